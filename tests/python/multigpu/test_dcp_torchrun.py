"""muh.distributed on N GPUs (decode context parallelism, issue 21): the sharded decode over N
ranks equals the single-GPU decode of the whole sequence, for 1–2 sequences, 1 KV head, 100k–1M
tokens, both interleave sizes; every rank holds the same bits; a CUDA graph of dcp_paged_decode
replays with new lengths. Launched by torchrun, one process per GPU:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONPATH=<build>/python \\
        torchrun --standalone --nproc-per-node N -m pytest -q tests/python/multigpu/test_dcp_torchrun.py

(scripts/dcp_multigpu.sh runs it for N = 2, 4, 8.) Without torchrun (no WORLD_SIZE ≥ 2) every test
skips. Tolerance as in tests/python/gpu/test_distributed.py: against SDPA in fp32 on the same
rounded inputs, max|dcp − ref32| ≤ 2 · max|decode − ref32| + 2u · max|partial| (u: fp16 2^-11,
bf16 2^-8; the partials' magnitude is the max over all ranks)."""

import os

import pytest

torch = pytest.importorskip("torch")
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
if WORLD < 2 or "LOCAL_RANK" not in os.environ:
    pytest.skip("multi-GPU test: launch with torchrun --nproc-per-node N (N >= 2)", allow_module_level=True)
if torch.cuda.device_count() < int(os.environ.get("LOCAL_WORLD_SIZE", WORLD)):
    pytest.skip(f"needs a GPU per local rank, found {torch.cuda.device_count()}", allow_module_level=True)

import muh.distributed as md  # noqa: E402  (before the process group: sets the NCCL environment)
import muh.ops as ops  # noqa: E402
import muh  # noqa: E402
import torch.distributed as dist  # noqa: E402

LOCAL_RANK = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(LOCAL_RANK)
if not dist.is_initialized():
    try:
        dist.init_process_group("nccl", device_id=torch.device("cuda", LOCAL_RANK))
    except TypeError:  # torch < 2.3: no device_id
        dist.init_process_group("nccl")
RANK = dist.get_rank()
GROUP = dist.group.WORLD
U = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}
COMPILED = {(t, d) for t, d in muh.COMPILED_INSTANCES}


def _dtype_hd():
    for t, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        for hd in (256, 128):
            if (t, hd) in COMPILED:
                return dtype, hd
    pytest.skip("no 16-bit instance with hd 256 or 128 in this build")


class FullCache:
    """A full NHD paged cache of `lens` (1 KV head), the same on every rank: made on rank 0 and
    broadcast. Slots past a sequence's length hold NaN."""

    def __init__(self, lens, hq, hd, dtype, page=16, seed=0):
        self.lens, self.hq, self.hd, self.dtype, self.page = list(lens), hq, hd, dtype, page
        blocks = [max(1, -(-L // page)) for L in lens]
        pages = sum(blocks)
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.k = torch.randn(pages, page, 1, hd, generator=g, device="cuda").to(dtype)
        self.v = torch.randn(pages, page, 1, hd, generator=g, device="cuda").to(dtype)
        self.q = torch.randn(len(lens), hq, hd, generator=g, device="cuda").to(dtype)
        perm = torch.randperm(pages, generator=g, device="cuda").to(torch.int32)
        self.block_table = torch.zeros(len(lens), max(blocks), dtype=torch.int32, device="cuda")
        used = 0
        for b, (L, nb) in enumerate(zip(lens, blocks)):
            self.block_table[b, :nb] = perm[used:used + nb]
            used += nb
            tail = nb * page - L  # NaN past the end, in the last page
            if tail:
                last = int(self.block_table[b, nb - 1])
                self.k[last, page - tail:] = float("nan")
                self.v[last, page - tail:] = float("nan")
        for t in (self.k, self.v, self.q, self.block_table):
            dist.broadcast(t, src=0)
        self.seq_lens = torch.tensor(lens, dtype=torch.int32, device="cuda")

    def ref32(self, scale):
        """Attention in fp32 over the dense KV of each sequence: [B, Hq, D] (length 0: zeros)."""
        outs = []
        for b, L in enumerate(self.lens):
            rows = self.block_table[b, :-(-L // self.page)].long()
            k = self.k[rows].reshape(-1, self.hd)[:L].float()   # [L, D] (1 KV head)
            v = self.v[rows].reshape(-1, self.hd)[:L].float()
            s = (self.q[b].float() @ k.t()) * scale              # [Hq, L]
            outs.append(torch.softmax(s, dim=-1) @ v)
        return torch.stack(outs)


def _check(out, want, part, ref32, dtype, what):
    """The stated bound; `part` is this rank's partial (the largest over the ranks is taken)."""
    biggest = part.float().abs().max()
    dist.all_reduce(biggest, op=dist.ReduceOp.MAX)
    err = (out.float() - ref32).abs().max().item()
    err_decode = (want.float() - ref32).abs().max().item()
    bound = 2 * err_decode + 2 * U[dtype] * biggest.item()
    assert torch.isfinite(out).all(), f"rank {RANK}, {what}: non-finite output"
    assert err <= bound, f"rank {RANK}, {what}: max error {err:.3e} > {bound:.3e} (single GPU: {err_decode:.3e})"


@pytest.fixture(scope="module", autouse=True)
def _process_group():
    yield
    dist.barrier()
    dist.destroy_process_group()


CASES = [  # (lens, interleave)
    ((100_000,), 1),
    ((1_000_000,), 1),
    ((262_144, 99_999), 16),
    ((1_000_000, 1), 16),   # the second sequence is empty on every rank but rank 0
]


@pytest.mark.parametrize("lens,interleave", CASES, ids=[f"{'_'.join(map(str, c[0]))}-i{c[1]}" for c in CASES])
def test_sharded_decode_equals_single_gpu(lens, interleave):
    dtype, hd = _dtype_hd()
    full = FullCache(lens, 4, hd, dtype, seed=len(lens) * 7 + interleave)
    scale = hd ** -0.5
    want = ops.paged_decode(full.q, full.k, full.v, full.block_table, full.seq_lens)
    shard = md.shard_paged_kv(full.k, full.v, full.block_table, full.seq_lens, WORLD, interleave_size=interleave,
                              ranks=[RANK], pad_value=float("nan"))[0]
    assert torch.equal(shard.seq_lens, md.dcp_local_seq_lens(full.seq_lens, WORLD, RANK, interleave))
    part, _ = ops.paged_decode(full.q, shard.k_cache, shard.v_cache, shard.block_table, shard.seq_lens, return_lse=True)
    out = torch.full_like(full.q, float("nan"))
    got = md.dcp_paged_decode(full.q, shard.k_cache, shard.v_cache, shard.block_table, shard.seq_lens, GROUP, out=out)
    torch.cuda.synchronize()
    assert got is out and torch.isfinite(out).all(), f"rank {RANK}: non-finite output"

    # Every rank folds the partials in the same order: the same bits everywhere.
    everyone = torch.empty(WORLD * out.numel(), dtype=out.dtype, device="cuda")
    dist.all_gather_into_tensor(everyone, out.reshape(-1))
    everyone = everyone.view((WORLD,) + tuple(out.shape))
    assert all(torch.equal(everyone[r], out) for r in range(WORLD)), "ranks disagree"

    _check(out, want, part, full.ref32(scale), dtype, f"lens {lens} interleave {interleave}")


def test_cuda_graph_replays_new_lengths():
    """dcp_paged_decode captured once (local lengths recomputed inside the graph from the global
    ones), replayed with other global lengths up to the captured ones, 0 included."""
    dtype, hd = _dtype_hd()
    interleave = 1
    full = FullCache([300_000, 4097], 4, hd, dtype, seed=99)
    shard = md.shard_paged_kv(full.k, full.v, full.block_table, full.seq_lens, WORLD, interleave_size=interleave,
                              ranks=[RANK], pad_value=float("nan"))[0]
    global_lens = full.seq_lens.clone()
    local_lens = torch.empty_like(shard.seq_lens)
    out = torch.full_like(full.q, float("nan"))
    cap = int(shard.seq_lens.max())

    def step():
        local_lens.copy_(md.dcp_local_seq_lens(global_lens, WORLD, RANK, interleave))
        md.dcp_paged_decode(full.q, shard.k_cache, shard.v_cache, shard.block_table, local_lens, GROUP, out=out,
                            max_local_seq_len=cap)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up outside the graph
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    for new in ([300_000, 1], [17, 4097], [123_457, 0]):
        global_lens.copy_(torch.tensor(new, dtype=torch.int32))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        full.lens = list(new)
        want = ops.paged_decode(full.q, full.k, full.v, full.block_table, global_lens)
        part, _ = ops.paged_decode(full.q, shard.k_cache, shard.v_cache, shard.block_table, local_lens,
                                   return_lse=True)
        _check(out, want, part, full.ref32(hd ** -0.5), dtype, f"replay {new}")
        for b, L in enumerate(new):
            if L == 0:
                assert torch.equal(out[b], torch.zeros_like(out[b])), "an empty sequence gives 0"
    del g
    torch.cuda.synchronize()
    dist.barrier()
