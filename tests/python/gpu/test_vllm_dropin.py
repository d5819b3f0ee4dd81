"""A script written against vLLM's ops (vllm_style_decode.py) runs unchanged with torch.ops.muh
substituted for torch.ops._C, and gives SDPA's answer — with a cache of the query's dtype
(kv_cache_dtype 'auto') and with vLLM's fp8 caches ('fp8' / 'fp8_e5m2': uint8 codes, x = 16,
k_scale / v_scale as floats or tensors)."""

import math

import pytest

from gpu_helpers import assert_close_to_reference, capture_graph, pick, run_fp8, sdpa, torch

import vllm_style_decode as script


@pytest.fixture
def muh_as_vllm(monkeypatch):
    # The substitution: vLLM's namespace of compiled ops becomes muh's.
    monkeypatch.setattr(torch.ops, "_C", torch.ops.muh)
    yield


@pytest.mark.parametrize("float_scales", [True, False], ids=["vllm063-float-scales", "vllm07-tensor-scales"])
@pytest.mark.parametrize("lens,force_version", [
    ([1, 100, 3000], None),      # vLLM's heuristic picks V2 (several partitions, small batch)
    ([7, 513, 64], 1),           # V1
    ([7, 513, 64], 2),           # V2
    ([9000, 1], None),           # > 8192: V2
])
def test_vllm_script_runs_with_muh(muh_as_vllm, lens, force_version, float_scales):
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    out, query, keys, values = script.decode_step(lens, 32, 8, hd, dtype=dtype,
                                                  force_version=force_version, float_scales=float_scales)
    scale = 1.0 / math.sqrt(hd)
    ref32 = torch.stack([sdpa(query[b][:, None].float(), keys[b].permute(1, 0, 2).float(),
                              values[b].permute(1, 0, 2).float(), scale)[:, 0] for b in range(len(lens))])
    naive = torch.stack([sdpa(query[b][:, None], keys[b].permute(1, 0, 2), values[b].permute(1, 0, 2),
                              scale)[:, 0].float() for b in range(len(lens))])
    assert_close_to_reference(out, ref32, naive, f"vLLM-style decode {lens}")


def test_vllm_script_errors_are_muh_errors(muh_as_vllm):
    # An option muh lacks, asked for by the unchanged script's caller, raises instead of computing.
    # (alibi_slopes, refused here before the attention variants, runs since issue 20's first part:
    # test_variants.py's test_vllm_paged_attention_alibi_matches_reference checks it.)
    dtype = torch.bfloat16
    hd = pick(dtype, (128, 64, 256))
    q = torch.randn(1, 8, hd, device="cuda", dtype=dtype)
    kc = torch.zeros(4, 2, hd // 8, 16, 8, device="cuda", dtype=dtype)
    vc = torch.zeros(4, 2, hd, 16, device="cuda", dtype=dtype)
    bt = torch.zeros(1, 1, dtype=torch.int32, device="cuda")
    sl = torch.ones(1, dtype=torch.int32, device="cuda")
    one = torch.ones((), device="cuda")
    # (An fp8 cache, refused here before, is read since the fp8 decode: the tests below.)
    with pytest.raises(NotImplementedError, match="kv_cache_dtype='int8'"):
        script.forward_decode(q, kc, vc, bt, sl, 1, "int8", 2, 0.1, None, one, one)


# ---- fp8 KV cache (kv_cache_dtype 'fp8' = e4m3, 'fp8_e5m2') ----------------------------------------
# vLLM's fp8 caches are torch.uint8 tensors in the same layouts, x = 16 (one byte per element):
# key [blocks, kv_heads, d/16, block, 16], value [blocks, kv_heads, d, block]. Its cache write
# stores the fp8 code of x / scale, saturated to the kind's largest finite value; the decode reads
# code · k_scale (K) and code · v_scale (V). The reference is SDPA in fp32 on those dequantised
# values; "naive" (the error yardstick of assert_close_to_reference) is SDPA at the query's
# precision on the same values.

FP8_KINDS = {"fp8": (torch.float8_e4m3fn, 448.0), "fp8_e4m3": (torch.float8_e4m3fn, 448.0),
             "fp8_e5m2": (torch.float8_e5m2, 57344.0)}
K_SCALE, V_SCALE = 0.05, 0.03
FP8_NAN = 0x7f  # a NaN code in both kinds (e4m3fn S.1111.111, e5m2 S.11111.11)
FP8_LENS = (1, 17, 300, 1031)  # 1, non-multiples of the block size; 1031 spans 3 of vLLM's v2 partitions


def quantize_like_vllm(x, kind, scale):
    """vLLM's fp8 cache write, in plain torch: the code of x / scale, saturated, as uint8."""
    fdt, fmax = FP8_KINDS[kind]
    return (x.float() / scale).clamp(-fmax, fmax).to(fdt).view(torch.uint8)


def dequantize(codes, kind, scale):
    return codes.view(FP8_KINDS[kind][0]).float() * scale


def skip_unless_fp8_decode():
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("muh reads an fp8 KV cache on sm_80+ GPUs only")


class Fp8VllmCache:
    """Random bf16 K/V per sequence, quantised as vLLM does and scattered into vLLM-layout uint8
    caches in random block order; slots no sequence owns hold the NaN code, so a read past
    seq_len shows up as NaN in the output."""

    def __init__(self, lens, num_heads, num_kv_heads, head_size, block_size, dtype, kind, seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        dev = "cuda"
        self.lens, self.kind, self.dtype = list(lens), kind, dtype
        self.num_heads, self.num_kv_heads, self.head_size, self.block_size = num_heads, num_kv_heads, head_size, block_size
        blocks = [max(1, math.ceil(n / block_size)) for n in self.lens]
        num_blocks = sum(blocks) + 3
        perm = torch.randperm(num_blocks, generator=g, device=dev).to(torch.int32)
        self.block_tables = torch.zeros(len(self.lens), max(blocks) + 1, dtype=torch.int32, device=dev)
        used = 0
        for b, nb in enumerate(blocks):
            self.block_tables[b, :nb] = perm[used:used + nb]
            used += nb
        self.seq_lens = torch.tensor(self.lens, dtype=torch.int32, device=dev)
        self.query = torch.randn(len(self.lens), num_heads, head_size, generator=g, device=dev).to(dtype)
        x = 16
        self.key_cache = torch.full((num_blocks, num_kv_heads, head_size // x, block_size, x), FP8_NAN,
                                    dtype=torch.uint8, device=dev)
        self.value_cache = torch.full((num_blocks, num_kv_heads, head_size, block_size), FP8_NAN,
                                      dtype=torch.uint8, device=dev)
        self.k, self.v = [], []  # dequantised, fp32 [L, kv_heads, d]
        for b, n in enumerate(self.lens):
            k = torch.randn(n, num_kv_heads, head_size, generator=g, device=dev).to(torch.bfloat16)
            v = torch.randn(n, num_kv_heads, head_size, generator=g, device=dev).to(torch.bfloat16)
            kq, vq = quantize_like_vllm(k, kind, K_SCALE), quantize_like_vllm(v, kind, V_SCALE)
            self.k.append(dequantize(kq, kind, K_SCALE))
            self.v.append(dequantize(vq, kind, V_SCALE))
            for t in range(0, n, block_size):
                blk = int(self.block_tables[b, t // block_size])
                kt, vt = kq[t:t + block_size], vq[t:t + block_size]
                m = kt.shape[0]
                self.key_cache[blk, :, :, :m, :] = kt.view(m, num_kv_heads, head_size // x, x).permute(1, 2, 0, 3)
                self.value_cache[blk, :, :, :m] = vt.permute(1, 2, 0)

    @property
    def max_seq_len(self):
        return max(self.lens)

    def reference(self, scale):
        ref32, naive = [], []
        for b in range(len(self.lens)):
            q = self.query[b][:, None, :]          # [H, 1, d]
            k = self.k[b].permute(1, 0, 2)         # [Hkv, L, d]
            v = self.v[b].permute(1, 0, 2)
            ref32.append(sdpa(q.float(), k, v, scale)[:, 0])
            naive.append(sdpa(q, k.to(self.dtype), v.to(self.dtype), scale)[:, 0].float())
        return torch.stack(ref32), torch.stack(naive)


def fp8_scales(how):
    if how == "float":  # vLLM 0.6.3: layer._k_scale floats, the default overloads
        return K_SCALE, V_SCALE
    if how == "tensor":  # vLLM >= 0.6.4: fp32 tensors on the GPU, the .tensor_scales overloads
        return (torch.tensor(K_SCALE, dtype=torch.float32, device="cuda"),          # 0-dim
                torch.tensor([V_SCALE], dtype=torch.float32, device="cuda"))        # 1 element
    return (torch.tensor([K_SCALE], dtype=torch.float32), torch.tensor(V_SCALE, dtype=torch.float32))  # CPU


@pytest.mark.parametrize("scales", ["float", "tensor", "tensor-cpu"])
@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("kind", ["fp8", "fp8_e5m2"])
def test_vllm_script_fp8_cache_matches_reference(muh_as_vllm, kind, dtype, version, scales):
    skip_unless_fp8_decode()
    hd = pick(dtype, (128,))
    c = Fp8VllmCache(FP8_LENS, 8, 2, hd, 16, dtype, kind, seed=len(kind) * 10 + version)
    k_scale, v_scale = fp8_scales(scales)
    scale = 1.0 / math.sqrt(hd)
    out = run_fp8(lambda: script.forward_decode(c.query, c.key_cache, c.value_cache, c.block_tables, c.seq_lens,
                                                c.max_seq_len, kind, 2, scale, None, k_scale, v_scale,
                                                force_version=version))
    assert out.dtype == dtype and out.shape == c.query.shape
    ref32, naive = c.reference(scale)
    assert_close_to_reference(out, ref32, naive, f"vLLM-style decode, {kind} cache, v{version}, {scales} scales")


@pytest.mark.parametrize("kind", ["fp8_e4m3", "fp8_e5m2"])
def test_vllm_fp8_cache_as_float8_dtype(kind):
    # A cache held as torch.float8_e4m3fn / torch.float8_e5m2 (not uint8) is read the same.
    skip_unless_fp8_decode()
    dtype = torch.bfloat16
    hd = pick(dtype, (128,))
    c = Fp8VllmCache((5, 40), 8, 2, hd, 16, dtype, kind, seed=3)
    fdt = FP8_KINDS[kind][0]
    out = torch.full_like(c.query, float("nan"))
    run_fp8(lambda: torch.ops.muh.paged_attention_v1(
        out, c.query, c.key_cache.view(fdt), c.value_cache.view(fdt), 2, hd ** -0.5, c.block_tables, c.seq_lens,
        16, c.max_seq_len, None, kind, K_SCALE, V_SCALE, 0, 0, 0, 64, 0))
    ref32, naive = c.reference(hd ** -0.5)
    assert_close_to_reference(out, ref32, naive, f"paged_attention_v1, {fdt} cache")


def test_vllm_fp8_bad_arguments():
    # All refused before any plan or kernel (so on any GPU).
    dtype = torch.bfloat16
    hd = pick(dtype, (128,))
    c = Fp8VllmCache((5, 40), 8, 2, hd, 16, dtype, "fp8", seed=4)
    out = torch.empty_like(c.query)

    def v1(kv_cache_dtype="fp8", k_scale=K_SCALE, v_scale=V_SCALE, query=None, key_cache=None, value_cache=None):
        torch.ops.muh.paged_attention_v1(
            out if query is None else torch.empty_like(query), c.query if query is None else query,
            c.key_cache if key_cache is None else key_cache, c.value_cache if value_cache is None else value_cache,
            2, hd ** -0.5, c.block_tables, c.seq_lens, 16, c.max_seq_len, None, kv_cache_dtype, k_scale, v_scale,
            0, 0, 0, 64, 0)

    zero = torch.zeros((), device="cuda")
    for k_scale, v_scale in ((0.0, V_SCALE), (zero, torch.tensor(V_SCALE, device="cuda"))):  # both overloads
        with pytest.raises((ValueError, RuntimeError), match="k_scale"):
            v1(k_scale=k_scale, v_scale=v_scale)
    with pytest.raises((ValueError, RuntimeError), match="v_scale"):
        v1(v_scale=float("nan"))
    with pytest.raises((ValueError, RuntimeError), match="k_scale"):
        v1(k_scale=torch.ones(2, device="cuda"), v_scale=torch.ones(2, device="cuda"))  # not one value
    with pytest.raises(NotImplementedError, match="kv_cache_dtype='int8'"):
        v1(kv_cache_dtype="int8")
    # The cache's dtype must be the kind's: uint8 or the matching float8, named by argument.
    with pytest.raises(ValueError, match="key_cache must be uint8 or"):
        v1(kv_cache_dtype="fp8_e5m2", key_cache=c.key_cache.view(torch.float8_e4m3fn))
    with pytest.raises(ValueError, match="value_cache must be uint8 or"):
        v1(value_cache=c.value_cache.view(torch.float8_e5m2))
    with pytest.raises(ValueError, match="key_cache must be uint8 or"):
        v1(key_cache=torch.zeros(c.key_cache.shape, dtype=dtype, device="cuda"))
    # x is 16 for a 1-byte cache: a key cache shaped for bf16's x = 8 is refused.
    with pytest.raises(ValueError, match=r"key_cache\.shape\[2\]"):
        v1(key_cache=c.key_cache.view(c.key_cache.shape[0], 2, hd // 8, 16, 8))
    with pytest.raises(NotImplementedError, match="float32"):
        v1(query=c.query.float())
    # 'auto' with a uint8 cache: a quantised cache needs an fp8 kv_cache_dtype.
    with pytest.raises(NotImplementedError, match="key_cache dtype"):
        v1(kv_cache_dtype="auto")


def test_vllm_fp8_in_cuda_graph():
    # Float scales never synchronise: an fp8 decode is captured and replayed like an 'auto' one.
    # CUDA tensor scales are read to the host (a sync), which capture refuses: that raises.
    skip_unless_fp8_decode()
    dtype = torch.bfloat16
    hd = pick(dtype, (128,))
    c = Fp8VllmCache(FP8_LENS, 8, 2, hd, 16, dtype, "fp8", seed=6)
    scale = hd ** -0.5
    v1_out, v2_out = torch.empty_like(c.query), torch.empty_like(c.query)
    parts = (c.max_seq_len + 511) // 512
    es = torch.empty(len(FP8_LENS), 8, parts, device="cuda")
    ml = torch.empty_like(es)
    tmp = torch.empty(len(FP8_LENS), 8, parts, hd, dtype=dtype, device="cuda")

    def step():
        torch.ops.muh.paged_attention_v1(v1_out, c.query, c.key_cache, c.value_cache, 2, scale, c.block_tables,
                                         c.seq_lens, 16, c.max_seq_len, None, "fp8", K_SCALE, V_SCALE, 0, 0, 0, 64, 0)
        torch.ops.muh.paged_attention_v2(v2_out, es, ml, tmp, c.query, c.key_cache, c.value_cache, 2, scale,
                                         c.block_tables, c.seq_lens, 16, c.max_seq_len, None, "fp8", K_SCALE,
                                         V_SCALE, 0, 0, 0, 64, 0)

    g = run_fp8(lambda: capture_graph(step)[0])
    c.query.copy_(torch.randn_like(c.query))
    g.replay()
    torch.cuda.synchronize()
    ref32, naive = c.reference(scale)
    assert_close_to_reference(v1_out, ref32, naive, "paged_attention_v1 fp8, graph replay")
    assert_close_to_reference(v2_out, ref32, naive, "paged_attention_v2 fp8, graph replay")
    del g

    k_t, v_t = fp8_scales("tensor")
    g2 = torch.cuda.CUDAGraph()
    with pytest.raises(NotImplementedError, match="CUDA-graph capture"):
        with torch.cuda.graph(g2):
            torch.ops.muh.paged_attention_v1(v1_out, c.query, c.key_cache, c.value_cache, 2, scale, c.block_tables,
                                             c.seq_lens, 16, c.max_seq_len, None, "fp8", k_t, v_t, 0, 0, 0, 64, 0)
