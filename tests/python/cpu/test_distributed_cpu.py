"""muh.distributed without a GPU: the interleaved token-to-rank assignment (local lengths against
brute-force counting, shards that hold each token once, in order, on its owner), the NCCL
environment it sets, and the argument errors raised before any kernel or collective. Skipped
where torch is not importable (CI has no torch); the combine's math is checked in C++
(tests/cpu/test_context_parallel.cpp) and on the GPU (tests/python/gpu/test_distributed.py)."""

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import muh.distributed as md  # noqa: E402


def test_nccl_environment_is_set_on_import():
    """A fresh interpreter without the variables: importing muh.distributed sets both (NVLink
    multicast off before any communicator exists)."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")}
    code = ("import os, muh.distributed; "
            "print(os.environ['NCCL_NVLS_ENABLE'], os.environ['TORCH_SYMM_MEM_DISABLE_MULTICAST'])")
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["0", "1"]


def owners(L, world, interleave):
    return [(t // interleave) % world for t in range(L)]


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("interleave", [1, 16])
def test_local_seq_lens_count_the_owned_tokens(world, interleave):
    lens = list(range(0, 3 * world * interleave + 3)) + [100_000, 1_000_003]
    for r in range(world):
        got = md.dcp_local_seq_lens(torch.tensor(lens, dtype=torch.int32), world, r, interleave)
        assert got.dtype == torch.int32
        for L, g in zip(lens, got.tolist()):
            want = owners(L, world, interleave).count(r) if L < 10_000 else None
            if want is None:  # long: the closed form, I per round of W·I plus the last round's share
                rounds, rest = divmod(L, world * interleave)
                want = rounds * interleave + min(max(rest - r * interleave, 0), interleave)
            assert g == want, (L, world, r, interleave)
    total = sum(md.dcp_local_seq_lens(torch.tensor(lens), world, r, interleave) for r in range(world))
    assert total.tolist() == lens


@pytest.mark.parametrize("world,interleave,page", [(2, 1, 16), (3, 1, 16), (4, 16, 16), (8, 2, 8), (3, 16, 4)])
def test_shards_hold_each_token_once_in_order(world, interleave, page):
    g = torch.Generator().manual_seed(world * 100 + interleave)
    lens = [0, 1, 2, 17, 33, 101]
    hkv, d = 2, 8
    blocks = [-(-L // 16) for L in lens]
    num_pages = sum(blocks) + 3
    perm = torch.randperm(num_pages, generator=g).to(torch.int32)
    bt = torch.zeros(len(lens), max(blocks) + 1, dtype=torch.int32)
    used = 0
    for b, nb in enumerate(blocks):
        bt[b, :nb] = perm[used:used + nb]
        used += nb
    k = torch.full((num_pages, 16, hkv, d), float("nan"))
    v = torch.full_like(k, float("nan"))
    dense_k = [torch.randn(L, hkv, d, generator=g) for L in lens]
    dense_v = [torch.randn(L, hkv, d, generator=g) for L in lens]
    for b, L in enumerate(lens):
        for t in range(L):
            k[bt[b, t // 16], t % 16] = dense_k[b][t]
            v[bt[b, t // 16], t % 16] = dense_v[b][t]
    shards = md.shard_paged_kv(k, v, bt, torch.tensor(lens, dtype=torch.int32), world, interleave_size=interleave,
                               page_size=page, pad_value=float("nan"))
    assert len(shards) == world
    for r, s in enumerate(shards):
        assert s.k_cache.shape[1:] == (page, hkv, d) and s.block_table.dtype == torch.int32
        local = md.dcp_local_seq_lens(torch.tensor(lens), world, r, interleave)
        assert torch.equal(s.seq_lens, local)
        for b, L in enumerate(lens):
            mine = [t for t in range(L) if (t // interleave) % world == r]
            assert len(mine) == int(s.seq_lens[b])
            for j, t in enumerate(mine):  # local position j holds global token t
                p, slot = int(s.block_table[b, j // page]), j % page
                assert torch.equal(s.k_cache[p, slot], dense_k[b][t]), (r, b, j, t)
                assert torch.equal(s.v_cache[p, slot], dense_v[b][t]), (r, b, j, t)
        used_slots = sum(int(x) for x in s.seq_lens)
        nan_slots = int(torch.isnan(s.k_cache[:, :, 0, 0]).sum())
        assert nan_slots == s.k_cache.shape[0] * page - used_slots, "slots past the lengths hold pad_value"
    one = md.shard_paged_kv(k, v, bt, torch.tensor(lens, dtype=torch.int32), world, interleave_size=interleave,
                            ranks=[world - 1], page_size=page, pad_value=float("nan"))
    assert len(one) == 1 and torch.equal(one[0].seq_lens, shards[-1].seq_lens)


@pytest.mark.parametrize("call,words", [
    (lambda: md.dcp_local_seq_lens(torch.tensor([5], dtype=torch.int32), 2, 0, 0), "interleave_size"),
    (lambda: md.dcp_local_seq_lens(torch.tensor([5], dtype=torch.int32), 0, 0, 1), "world_size"),
    (lambda: md.dcp_local_seq_lens(torch.tensor([5], dtype=torch.int32), 2, 2, 1), "rank"),
    (lambda: md.dcp_local_seq_lens(torch.tensor([5.0]), 2, 0, 1), "seq_lens"),
    (lambda: md.shard_paged_kv(torch.zeros(2, 16, 1, 8), torch.zeros(2, 16, 1, 8), torch.zeros(1, 2, dtype=torch.int32),
                               torch.tensor([5], dtype=torch.int32), 2, interleave_size=-1), "interleave_size"),
    (lambda: md.shard_paged_kv(torch.zeros(2, 16, 1, 8), torch.zeros(2, 16, 1, 4), torch.zeros(1, 2, dtype=torch.int32),
                               torch.tensor([5], dtype=torch.int32), 2), "v_cache"),
    (lambda: md.shard_paged_kv(torch.zeros(2, 16, 1, 8), torch.zeros(2, 16, 1, 8), torch.zeros(1, 2, dtype=torch.int64),
                               torch.tensor([5], dtype=torch.int32), 2), "block_table"),
    (lambda: md.shard_paged_kv(torch.zeros(2, 16, 1, 8), torch.zeros(2, 16, 1, 8), torch.zeros(1, 2, dtype=torch.int32),
                               torch.tensor([33], dtype=torch.int32), 2), "seq_lens"),
])
def test_layout_argument_errors_name_the_argument(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def _decode_args():
    q = torch.randn(1, 4, 128, dtype=torch.float16)
    k = torch.zeros(2, 16, 1, 128, dtype=torch.float16)
    return q, k, k.clone(), torch.zeros(1, 2, dtype=torch.int32), torch.tensor([5], dtype=torch.int32)


def test_group_none_with_several_ranks_is_refused(monkeypatch):
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 4)
    with pytest.raises(ValueError, match="group is None but torch.distributed's world has 4 ranks"):
        md.dcp_paged_decode(*_decode_args(), None)


def test_group_without_init_is_refused():
    if dist.is_initialized():
        pytest.skip("a process group exists in this process")
    with pytest.raises(ValueError, match="torch.distributed is not initialized"):
        md.dcp_paged_decode(*_decode_args(), object())


def test_cpu_query_is_refused():
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        md.dcp_paged_decode(*_decode_args(), None)


def test_combine_refuses_bad_partials():
    with pytest.raises(ValueError, match="outs must be a 4-D tensor"):
        md.dcp_combine(torch.zeros(2, 3, 4), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="outs must be a CUDA tensor"):
        md.dcp_combine(torch.zeros(2, 1, 4, 8), torch.zeros(2, 1, 4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_gather_packs_out_and_lse_into_one_collective(monkeypatch, dtype):
    """dcp_paged_decode's exchange: one all_gather_into_tensor of [out bytes | lse bytes] per rank,
    unpacked into views [W, B, H, D] and [W, B, H]. The collective is replaced by its definition
    (the output is the ranks' inputs concatenated, rank order) with three simulated ranks' inputs."""
    world, b, h, d = 3, 2, 4, 64
    outs = [torch.randn(b, h, d).to(dtype) for _ in range(world)]
    lses = [torch.randn(b, h) for _ in range(world)]
    lses[1][0, 0] = float("-inf")  # an empty shard's lse survives the trip
    calls = []

    def fake_all_gather(output, inp, group=None):
        calls.append((tuple(output.shape), output.dtype, group))
        n = inp.numel()
        for r in range(world):
            packed = torch.cat((outs[r].reshape(-1).view(torch.uint8), lses[r].reshape(-1).view(torch.uint8)))
            assert packed.shape == inp.shape
            output[r * n:(r + 1) * n].copy_(packed)

    monkeypatch.setattr(dist, "all_gather_into_tensor", fake_all_gather)
    g_out, g_lse = md._all_gather_partials(outs[0], lses[0], "the-group", world)
    assert len(calls) == 1 and calls[0][1] == torch.uint8 and calls[0][2] == "the-group"
    assert calls[0][0] == (world * (b * h * d * outs[0].element_size() + b * h * 4),)
    assert g_out.shape == (world, b, h, d) and g_out.dtype == dtype
    assert g_lse.shape == (world, b, h) and g_lse.dtype == torch.float32
    for r in range(world):
        assert torch.equal(g_out[r], outs[r]) and torch.equal(g_lse[r], lses[r])


class _FakeMerge:
    """Stands in for torch.ops.muh (CUDA only) to check dcp_combine's wiring on the CPU: the
    real op's argument checks on shapes and layout (lse [num_heads, num_tokens], contiguous;
    output_lse apart from the input lse), and vLLM's merge in torch math as the oracle."""

    def __init__(self):
        self.calls = 0

    def merge_attn_states(self, output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse):
        self.calls += 1
        n, h, d = output.shape
        assert prefix_output.shape == suffix_output.shape == output.shape
        for lse in (prefix_lse, suffix_lse, output_lse):
            assert lse.shape == (h, n) and lse.dtype == torch.float32 and lse.is_contiguous()
        assert output_lse.data_ptr() not in (prefix_lse.data_ptr(), suffix_lse.data_ptr())
        p, s = prefix_lse.t()[:, :, None], suffix_lse.t()[:, :, None]  # [n, h, 1]
        m = torch.maximum(p, s)
        empty = m == float("-inf")
        m0 = torch.where(empty, torch.zeros_like(m), m)
        wp, ws = torch.exp(p - m0), torch.exp(s - m0)
        merged = torch.where(empty, prefix_output, (prefix_output * wp + suffix_output * ws) / (wp + ws))
        lse = torch.where(empty, m, m0 + torch.log(wp + ws))
        output.copy_(merged)  # after reading: output may be prefix_output (in place)
        output_lse.copy_(lse[:, :, 0].t())


@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_combine_folds_the_ranks_in_order(monkeypatch, world):
    """Partials of an attention row over interleaved token shards (empty ones included) folded by
    dcp_combine equal attention over all tokens (float64 truth, fp32 partials: 1e-5)."""
    fake = _FakeMerge()
    monkeypatch.setattr(md, "_ops", lambda: fake)
    monkeypatch.setattr(md, "_check_partials", lambda op, outs, lses: None)  # its CUDA check
    g = torch.Generator().manual_seed(world)
    lens, h, d = [1, 5, 40], 3, 16
    b = len(lens)
    outs = torch.zeros(world, b, h, d)
    lses = torch.full((world, b, h), float("-inf"))
    want = torch.zeros(b, h, d, dtype=torch.float64)
    want_lse = torch.zeros(b, h, dtype=torch.float64)
    for s, L in enumerate(lens):
        scores = torch.randn(h, L, generator=g, dtype=torch.float64) * 3
        values = torch.randn(L, d, generator=g, dtype=torch.float64)
        want[s] = torch.softmax(scores, -1) @ values
        want_lse[s] = torch.logsumexp(scores, -1)
        for r in range(world):
            mine = [t for t in range(L) if t % world == r]
            if mine:
                sc = scores[:, mine]
                outs[r, s] = (torch.softmax(sc, -1) @ values[mine]).float()
                lses[r, s] = torch.logsumexp(sc, -1).float()
    out, lse = md.dcp_combine(outs, lses)
    assert fake.calls == world - 1
    assert out.shape == (b, h, d) and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=0)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-5, rtol=0)
