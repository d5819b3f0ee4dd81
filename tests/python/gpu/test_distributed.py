"""muh.distributed on one GPU: decode context parallelism with simulated ranks (a paged cache
sharded in one process, each shard decoded by muh, the partials combined by dcp_combine — the
function dcp_paged_decode runs after its all-gather) against the unsharded muh decode; a real
one-process NCCL group running dcp_paged_decode end to end; CUDA-graph capture and replay with
new lengths; argument errors. The multi-GPU runs are tests/python/multigpu/test_dcp_torchrun.py.

Tolerance (the simulated ranks): with ref32 SDPA in fp32 on the same rounded inputs,
    max|dcp − ref32| ≤ 2 · max|decode − ref32| + 2u · max|partial|,
u the input dtype's unit roundoff (fp16 2^-11, bf16 2^-8). The combined result carries each
partial's decode error (the merge weights sum to 1, so no more than the largest) and one rounding
of the partial itself, written in the input dtype by the decode at the partial's magnitude —
which over a shard's few keys can exceed the whole result's — then the final rounding; the merge
itself runs in fp32. A lost, doubled or misplaced token is off by O(1/L) of a value, far more."""

import gc
import math

import pytest

from gpu_helpers import PagedBatch, assert_close_to_reference, capture_graph, compiled, ops, seed_of, torch

import torch.distributed as dist  # noqa: E402

import muh.distributed as md  # noqa: E402

NAN = float("nan")
DT = {"fp16": torch.float16, "bf16": torch.bfloat16}
U = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def shard_partials(b, world, interleave, lens=None, max_local_seq_len=-1):
    """Each simulated rank's (out, lse) from muh's decode over its shard, stacked: [W, B, H, D], [W, B, H]."""
    shards = md.shard_paged_kv(b.k_cache, b.v_cache, b.block_table, b.seq_lens, world,
                               interleave_size=interleave, pad_value=NAN)
    outs, lses = [], []
    for s in shards:
        o, l = torch.ops.muh.paged_decode(b.q, s.k_cache, s.v_cache, s.block_table, s.seq_lens,
                                          max_local_seq_len, None, True, 0)
        outs.append(o)
        lses.append(l)
    return shards, torch.stack(outs), torch.stack(lses)


# ---- (a) simulated ranks ---------------------------------------------------------------------------

def sim_cases():
    cases = []
    # (dtype, head_dim, q heads, kv heads, lens, world, interleave, page)
    for t in ("fp16", "bf16"):
        for hd in (128, 256):
            cases.append((t, hd, 4, 1, (1, 17), 4, 1, 16))         # len 1: three empty shards
            cases.append((t, hd, 32, 8, (17, 1000), 3, 16, 16))     # odd, not a multiple of the page
    cases += [
        ("fp16", 128, 4, 1, (3,), 8, 1, 16),            # len < world: five empty shards
        ("bf16", 128, 4, 1, (0, 5), 4, 16, 16),          # an empty sequence; len < interleave
        ("fp16", 128, 32, 8, (4097, 333), 2, 1, 32),     # many partitions per shard
        ("fp16", 256, 4, 1, (999, 2), 8, 16, 16),
        ("bf16", 256, 32, 8, (511, 77), 4, 1, 16),
        ("fp16", 128, 4, 1, (100_000,), 8, 16, 64),      # long: 12.5k tokens per shard
        ("bf16", 256, 4, 1, (100_000, 1), 4, 1, 64),
    ]
    return cases


def _case_id(c):
    return f"{c[0]}-hd{c[1]}-{c[2]}q{c[3]}kv-len{'_'.join(map(str, c[4]))}-w{c[5]}-i{c[6]}-p{c[7]}"


@pytest.mark.parametrize("case", sim_cases(), ids=_case_id)
def test_simulated_ranks_equal_the_unsharded_decode(case):
    t, hd, hq, hkv, lens, world, interleave, page = case
    dtype = DT[t]
    if not compiled(dtype, hd):
        pytest.skip(f"{t} hd {hd} is not compiled in this build")
    b = PagedBatch(lens, hq, hkv, hd, page, dtype, "nhd", seed=seed_of(case))
    scale = hd ** -0.5
    full, full_lse = ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, return_lse=True)
    shards, outs, lses = shard_partials(b, world, interleave)
    assert [int(x) for x in sum(s.seq_lens for s in shards)] == list(lens)

    out = torch.full_like(b.q, NAN)
    out_lse = torch.full((len(lens), hq), NAN, device="cuda")
    got, got_lse = md.dcp_combine(outs, lses, out=out, out_lse=out_lse)
    assert got is out and got_lse is out_lse
    assert torch.isfinite(out).all(), "non-finite values in the combined output"

    ref32, _, _ = b.reference(scale)
    err = (out.float() - ref32).abs().max().item()
    err_decode = (full.float() - ref32).abs().max().item()
    bound = 2 * err_decode + 2 * U[dtype] * outs.float().abs().max().item()
    assert err <= bound, f"max error {err:.3e} > {bound:.3e} (the unsharded decode's: {err_decode:.3e})"

    finite = torch.isfinite(full_lse)
    assert torch.equal(torch.isfinite(out_lse), finite), "lse must be -inf exactly for empty sequences"
    torch.testing.assert_close(out_lse[finite], full_lse[finite], atol=1e-3, rtol=1e-4)
    for s, L in enumerate(lens):
        if L == 0:
            assert torch.equal(out[s], torch.zeros_like(out[s])), "an empty sequence gives 0"


def test_combine_is_deterministic():
    dtype = torch.float16 if compiled(torch.float16, 128) else torch.bfloat16
    if not compiled(dtype, 128):
        pytest.skip("no 16-bit hd 128 instance in this build")
    b = PagedBatch((2049, 5), 8, 1, 128, 16, dtype, "nhd", seed=3)
    _, outs, lses = shard_partials(b, 4, 1)
    a, la = md.dcp_combine(outs, lses)
    c, lc = md.dcp_combine(outs.clone(), lses.clone())
    assert torch.equal(a, c) and torch.equal(la, lc), "the same partials must give the same bits"
    # One rank alone is a copy (to fp32 and back: exact).
    one, lone = md.dcp_combine(outs[:1], lses[:1])
    assert torch.equal(one, outs[0]) and torch.equal(lone, lses[0])


# ---- (b) a real one-process NCCL group -------------------------------------------------------------

@pytest.fixture(scope="module")
def group1(tmp_path_factory):
    if not dist.is_available() or not dist.is_nccl_available():
        pytest.skip("torch.distributed with NCCL is not available")
    if dist.is_initialized():
        if dist.get_world_size() != 1:
            pytest.skip("a process group of several ranks already exists in this process")
        yield dist.group.WORLD
        return
    store = tmp_path_factory.mktemp("dcp") / "store"
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def _pick16():
    for dtype in (torch.bfloat16, torch.float16):
        for hd in (128, 256):
            if compiled(dtype, hd):
                return dtype, hd
    pytest.skip("no 16-bit instance with hd 128 or 256 in this build")


@pytest.mark.parametrize("kv", [(4, 1), (32, 8)])
def test_real_group_of_one_equals_paged_decode(group1, kv):
    dtype, hd = _pick16()
    hq, hkv = kv
    b = PagedBatch((1, 17, 4097), hq, hkv, hd, 16, dtype, "nhd", seed=21 + hq)
    want, want_lse = ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, return_lse=True)
    for group in (group1, None):
        out = torch.full_like(b.q, NAN)
        got, lse = md.dcp_paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, group, out=out,
                                       return_lse=True)
        assert got is out
        # World 1: the same plan, then fp16/bf16 → fp32 → back, exact: the same bits.
        assert torch.equal(got, want), f"group={group}: dcp_paged_decode != paged_decode"
        assert torch.equal(lse, want_lse)
    plain = md.dcp_paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, group1,
                                softmax_scale=0.05)
    assert torch.equal(plain, ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens,
                                               softmax_scale=0.05, return_lse=True)[0])


# ---- (c) CUDA-graph capture and replay -------------------------------------------------------------

def test_cuda_graph_capture_and_replay(group1):
    """One graph: dcp_paged_decode on the real group, and a 4-rank simulated decode + combine whose
    local lengths are recomputed inside the graph from the global ones (a shard stores its tokens
    in global order, so a shorter global length is a prefix of each shard). Replays change the
    lengths — each at most the sequence's length at capture, where its K/V end; 0 included — and
    the queries."""
    dtype, hd = _pick16()
    scale = hd ** -0.5
    world, interleave = 4, 16
    b = PagedBatch((3000, 1, 700), 32, 8, hd, 16, dtype, "nhd", seed=41)
    shards = md.shard_paged_kv(b.k_cache, b.v_cache, b.block_table, b.seq_lens, world,
                               interleave_size=interleave, pad_value=NAN)
    local = [torch.empty_like(s.seq_lens) for s in shards]
    out_real = torch.full_like(b.q, NAN)
    out_sim = torch.full_like(b.q, NAN)

    def step():
        md.dcp_paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, group1, out=out_real,
                            max_local_seq_len=3000)
        parts = []
        for r, s in enumerate(shards):
            local[r].copy_(md.dcp_local_seq_lens(b.seq_lens, world, r, interleave))
            parts.append(torch.ops.muh.paged_decode(b.q, s.k_cache, s.v_cache, s.block_table, local[r],
                                                    -1, None, True, 0))
        md.dcp_combine(torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts]), out=out_sim)

    g, _ = capture_graph(step)
    for new_lens in ([1500, 0, 700], [3000, 1, 1], [17, 0, 699]):  # each ≤ the sequence's own length
        b.lens = list(new_lens)
        b.seq_lens.copy_(torch.tensor(new_lens, dtype=torch.int32))
        b.q.copy_(torch.randn_like(b.q))
        out_real.fill_(NAN)
        out_sim.fill_(NAN)
        g.replay()
        torch.cuda.synchronize()
        ref32, naive, _ = b.reference(scale)  # the dense K/V of the captured lengths still hold
        assert_close_to_reference(out_real, ref32, naive, f"dcp_paged_decode replay {new_lens}")
        assert_close_to_reference(out_sim, ref32, naive, f"simulated 4-rank combine replay {new_lens}")
        for r in range(world):
            assert torch.equal(local[r].cpu(), md.dcp_local_seq_lens(torch.tensor(new_lens), world, r, interleave))
    del g
    gc.collect()
    torch.cuda.synchronize()


# ---- Argument errors -------------------------------------------------------------------------------

def _args():
    dtype, hd = _pick16()
    b = PagedBatch((5,), 4, 1, hd, 16, dtype, "nhd", seed=1)
    return b, [b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens]


@pytest.mark.parametrize("at,bad,words", [
    (1, lambda a: a.cpu(), "local_k_cache is on cpu but q is on cuda"),
    (2, lambda a: a.float(), "local_v_cache must be"),
    (3, lambda a: a.long(), "local_block_table must be 2-D int32"),
    (4, lambda a: a[:0], "local_seq_lens must be 1-D int32"),
    (4, lambda a: a.cpu(), "local_seq_lens is on cpu"),
])
def test_bad_inputs_name_the_argument(group1, at, bad, words):
    _, args = _args()
    args[at] = bad(args[at])
    with pytest.raises(ValueError, match=words):
        md.dcp_paged_decode(*args, group1)


def test_bad_out_and_group(group1):
    b, args = _args()
    with pytest.raises(ValueError, match="out must be"):
        md.dcp_paged_decode(*args, group1, out=torch.empty(2, 4, b.head_dim, dtype=b.dtype, device="cuda"))
    with pytest.raises(ValueError, match="max_local_seq_len"):
        md.dcp_paged_decode(*args, group1, max_local_seq_len=-3)
    gloo = dist.new_group(backend="gloo")
    with pytest.raises(ValueError, match="NCCL backend"):
        md.dcp_paged_decode(*args, gloo)
    dist.destroy_process_group(gloo)
    with pytest.raises(ValueError, match="lses must be float32"):
        md.dcp_combine(torch.zeros(2, 1, 4, 8, device="cuda"), torch.zeros(2, 1, 3, device="cuda"))
    with pytest.raises(ValueError, match="interleave_size"):
        md.dcp_local_seq_lens(b.seq_lens, 2, 0, 0)


def test_math_of_the_bound_is_not_vacuous():
    """The tolerance catches tokens lost from one shard (the failure a bad sharding makes): rank 1
    keeps only the first half of its tokens."""
    dtype, hd = _pick16()
    b = PagedBatch((64,), 4, 1, hd, 16, dtype, "nhd", seed=9)
    full = ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens)
    shards, outs, lses = shard_partials(b, 2, 1)
    s = shards[1]
    o, l = torch.ops.muh.paged_decode(b.q, s.k_cache, s.v_cache, s.block_table, s.seq_lens // 2, -1, None, True, 0)
    outs[1], lses[1] = o, l
    wrong, _ = md.dcp_combine(outs, lses)
    ref32, _, _ = b.reference(hd ** -0.5)
    err = (wrong.float() - ref32).abs().max().item()
    err_decode = (full.float() - ref32).abs().max().item()
    assert err > 2 * err_decode + 2 * U[dtype] * outs.float().abs().max().item() + 1e-3, \
        f"losing a quarter of the tokens moved the result by only {err:.3e}"
    assert math.isfinite(err)
