"""Shared by the GPU tests of muh.ops: inputs, paged caches in both layouts, and the reference —
torch's scaled_dot_product_attention in fp32 on the gathered (dense) KV."""

import math
import zlib

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("muh.ops GPU tests need a CUDA device", allow_module_level=True)
ops = pytest.importorskip("muh.ops")
import muh  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
COMPILED = [(DTYPES[t], d) for t, d in muh.COMPILED_INSTANCES]
COMPILED_16 = [(t, d) for t, d in COMPILED if t != torch.float32]


def seed_of(case):
    """A stable seed from a test case (hash() of str is salted per process)."""
    return zlib.crc32(repr(case).encode()) & 0xffff


def run_fp8(fn):
    """fn(), skipping where this build has no fp8 instance for the case (MUH_KV_FP8 /
    MUH_KV_FP8_HEAD_DIMS pruned it: the op says 'is not compiled into this build')."""
    try:
        return fn()
    except NotImplementedError as e:
        if "is not compiled into this build" in str(e):
            pytest.skip(str(e))
        raise


def compiled(dtype, head_dim):
    return (dtype, head_dim) in COMPILED


def pick(dtype, head_dims):
    """The first of head_dims compiled for dtype (tests adapt to a pruned build)."""
    for d in head_dims:
        if compiled(dtype, d):
            return d
    pytest.skip(f"no instance of {dtype} with head_dim in {head_dims} in this build")


def capture_graph(fn):
    """fn() captured into a CUDA graph after two warm-up calls on a side stream (outside the graph:
    device profile, kernel attributes, NCCL's communicator); returns (graph, what the captured call
    returned — its output tensors, which each replay overwrites)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        result = fn()
    return g, result


# ---- Accuracy: error ≤ 3 × the error of torch's SDPA in the input precision (+ a small floor) ----
# Both are measured against SDPA in fp32 on the same (rounded) inputs. SDPA in bf16/fp16 is the
# "naive implementation at the input precision" of STYLE.md; 3× leaves room for a different but
# legitimate summation order and P rounding, a bug is off by far more (wrong key: O(0.1..1)).

def assert_close_to_reference(got, ref32, naive, what, factor=3.0, floor=2e-3):
    assert torch.isfinite(got).all(), f"{what}: non-finite values"
    err = (got.float() - ref32).abs().max().item()
    naive_err = (naive.float() - ref32).abs().max().item()
    bound = factor * naive_err + floor
    assert err <= bound, f"{what}: max error {err:.3e} > {bound:.3e} (SDPA at input precision: {naive_err:.3e})"


def sdpa(q, k, v, scale, mask=None):
    """q [Hq, Lq, D], k/v [Hkv, Lk, D] → [Hq, Lq, D]; GQA by repeating KV heads."""
    rep = q.shape[0] // k.shape[0]
    k = k.repeat_interleave(rep, dim=0)
    v = v.repeat_interleave(rep, dim=0)
    return torch.nn.functional.scaled_dot_product_attention(
        q[None], k[None], v[None], attn_mask=mask, scale=scale)[0]


def lse_reference(q, k, scale, mask=None):
    rep = q.shape[0] // k.shape[0]
    s = torch.einsum("hqd,hkd->hqk", q.float(), k.repeat_interleave(rep, dim=0).float()) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.logsumexp(s, dim=-1)  # [Hq, Lq]


def causal_mask(lq, lk, device):
    # Bottom-right aligned, as FlashAttention: query i sees keys j <= i + lk - lq.
    i = torch.arange(lq, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    return j <= i + (lk - lq)


# ---- Paged caches ---------------------------------------------------------------------------------

class PagedBatch:
    """Dense per-sequence K/V scattered into a paged cache in random page order; pages and slots
    no sequence owns hold NaN, so a read past seq_len shows up as NaN in the output."""

    def __init__(self, seq_lens, num_q_heads, num_kv_heads, head_dim, page_size, dtype, layout,
                 seed=0, spare_blocks=2):
        g = torch.Generator(device="cuda").manual_seed(seed)
        dev = "cuda"
        self.dtype, self.layout, self.page_size = dtype, layout, page_size
        self.num_q_heads, self.num_kv_heads, self.head_dim = num_q_heads, num_kv_heads, head_dim
        self.lens = list(seq_lens)
        n = len(self.lens)
        blocks = [max(1, math.ceil(L / page_size)) for L in self.lens]
        self.max_blocks = max(blocks) + spare_blocks
        num_pages = sum(blocks) + 3
        perm = torch.randperm(num_pages, generator=g, device=dev).to(torch.int32)
        self.block_table = torch.zeros(n, self.max_blocks, dtype=torch.int32, device=dev)
        used = 0
        for b, nb in enumerate(blocks):
            self.block_table[b, :nb] = perm[used:used + nb]
            used += nb
        self.seq_lens = torch.tensor(self.lens, dtype=torch.int32, device=dev)
        self.q = torch.randn(n, num_q_heads, head_dim, generator=g, device=dev).to(dtype)
        self.k = [torch.randn(L, num_kv_heads, head_dim, generator=g, device=dev).to(dtype) for L in self.lens]
        self.v = [torch.randn(L, num_kv_heads, head_dim, generator=g, device=dev).to(dtype) for L in self.lens]
        nan = float("nan")
        if layout == "nhd":
            shape = (num_pages, page_size, num_kv_heads, head_dim)
            self.k_cache = torch.full(shape, nan, dtype=dtype, device=dev)
            self.v_cache = torch.full(shape, nan, dtype=dtype, device=dev)
        else:  # vLLM: key [blocks, kv_heads, d/x, block, x], value [blocks, kv_heads, d, block]
            x = 16 // torch.empty((), dtype=dtype).element_size()
            self.x = x
            self.k_cache = torch.full((num_pages, num_kv_heads, head_dim // x, page_size, x), nan, dtype=dtype, device=dev)
            self.v_cache = torch.full((num_pages, num_kv_heads, head_dim, page_size), nan, dtype=dtype, device=dev)
        for b, L in enumerate(self.lens):
            for t in range(0, L, page_size):
                page = int(self.block_table[b, t // page_size])
                kt, vt = self.k[b][t:t + page_size], self.v[b][t:t + page_size]  # [m, H, D]
                m = kt.shape[0]
                if layout == "nhd":
                    self.k_cache[page, :m] = kt
                    self.v_cache[page, :m] = vt
                else:
                    # key[page, h, d // x, slot, d % x] = k[slot, h, d]
                    self.k_cache[page, :, :, :m, :] = kt.view(m, num_kv_heads, head_dim // x, x).permute(1, 2, 0, 3)
                    self.v_cache[page, :, :, :m] = vt.permute(1, 2, 0)

    @property
    def max_seq_len(self):
        return max(self.lens)

    def reference(self, scale, q=None):
        """(out fp32 [n, Hq, D], out at input precision, lse fp32 [n, Hq]) from SDPA on dense KV."""
        q = self.q if q is None else q
        outs32, outs_lp, lses = [], [], []
        for b, L in enumerate(self.lens):
            if L == 0:  # muh's convention (attention.hpp): out = 0, lse = -inf
                z = torch.zeros(self.num_q_heads, self.head_dim, device="cuda")
                outs32.append(z)
                outs_lp.append(z)
                lses.append(torch.full((self.num_q_heads,), float("-inf"), device="cuda"))
                continue
            qb = q[b][:, None, :]                   # [Hq, 1, D]
            kb = self.k[b][:L].permute(1, 0, 2)     # [Hkv, L, D] (L may have been shortened)
            vb = self.v[b][:L].permute(1, 0, 2)
            outs32.append(sdpa(qb.float(), kb.float(), vb.float(), scale)[:, 0])
            outs_lp.append(sdpa(qb, kb, vb, scale)[:, 0].float())
            lses.append(lse_reference(qb, kb, scale)[:, 0])
        return torch.stack(outs32), torch.stack(outs_lp), torch.stack(lses)


# ---- Varlen prefill batches ------------------------------------------------------------------------

class VarlenBatch:
    def __init__(self, q_lens, k_lens, num_q_heads, num_kv_heads, head_dim, dtype, seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.q_lens, self.k_lens = list(q_lens), list(k_lens)
        self.num_q_heads, self.num_kv_heads, self.head_dim = num_q_heads, num_kv_heads, head_dim
        tq, tk = sum(self.q_lens), sum(self.k_lens)
        self.q = torch.randn(tq, num_q_heads, head_dim, generator=g, device="cuda").to(dtype)
        self.k = torch.randn(tk, num_kv_heads, head_dim, generator=g, device="cuda").to(dtype)
        self.v = torch.randn(tk, num_kv_heads, head_dim, generator=g, device="cuda").to(dtype)
        cq = [0]
        ck = [0]
        for a, b in zip(self.q_lens, self.k_lens):
            cq.append(cq[-1] + a)
            ck.append(ck[-1] + b)
        self.cu_q = torch.tensor(cq, dtype=torch.int32, device="cuda")
        self.cu_k = torch.tensor(ck, dtype=torch.int32, device="cuda")
        self.cq, self.ck = cq, ck

    def reference(self, scale, causal, q=None, k=None, v=None):
        q = self.q if q is None else q
        k = self.k if k is None else k
        v = self.v if v is None else v
        o32 = torch.zeros(q.shape, device="cuda")
        olp = torch.zeros(q.shape, device="cuda")
        lse = torch.full((self.num_q_heads, q.shape[0]), float("-inf"), device="cuda")
        for b in range(len(self.q_lens)):
            lq, lk = self.q_lens[b], self.k_lens[b]
            if lq == 0 or lk == 0:
                continue
            qb = q[self.cq[b]:self.cq[b + 1]].permute(1, 0, 2)
            kb = k[self.ck[b]:self.ck[b + 1]].permute(1, 0, 2)
            vb = v[self.ck[b]:self.ck[b + 1]].permute(1, 0, 2)
            mask = causal_mask(lq, lk, "cuda") if causal else None
            o32[self.cq[b]:self.cq[b + 1]] = sdpa(qb.float(), kb.float(), vb.float(), scale, mask).permute(1, 0, 2)
            olp[self.cq[b]:self.cq[b + 1]] = sdpa(qb, kb, vb, scale, mask).permute(1, 0, 2).float()
            lse[:, self.cq[b]:self.cq[b + 1]] = lse_reference(qb, kb, scale, mask)
        return o32, olp, lse
