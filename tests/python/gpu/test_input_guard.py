"""muh.ops and bad device-side inputs (README, "Bad device-side inputs"): the kernels guard block
ids, seq_lens and cu_seqlens; the ops raise ValueError naming the input — at the next muh call
(MUH_VALIDATE=1, the default, what this process runs with) or at muh.ops.check_errors() — and the
sequence concerned is not computed while the others are. A captured CUDA graph flags on replay."""

import math

import pytest

from gpu_helpers import COMPILED_16, PagedBatch, VarlenBatch, assert_close_to_reference, ops, torch

if not COMPILED_16:
    pytest.skip("no 16-bit instance in this build", allow_module_level=True)
DTYPE, HD = COMPILED_16[0]


@pytest.fixture(autouse=True)
def clean_flags():
    torch.cuda.synchronize()
    try:
        ops.check_errors()
    except ValueError:
        pass  # a test before this one left something: not this test's
    yield


def _batch():
    return PagedBatch([40, 70, 33], 8, 2, HD, 16, DTYPE, "nhd", seed=11)


@pytest.mark.parametrize("bad", ["minus_one", "num_pages", "two_pow_30"])
def test_bad_block_id_raises_naming_block_table_and_drops_only_that_sequence(bad):
    b = _batch()
    value = {"minus_one": -1, "num_pages": b.k_cache.shape[0], "two_pow_30": 1 << 30}[bad]
    b.block_table[1, 1] = value
    out, lse = ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.max_seq_len,
                                return_lse=True)
    with pytest.raises(ValueError, match=r"block_table holds a block id outside \[0, num_pages\)"):
        ops.check_errors()
    ops.check_errors()  # read and cleared
    assert torch.all(out[1] == 0) and torch.all(lse[1] == float("-inf"))
    ref32, naive, _ = b.reference(1.0 / math.sqrt(HD))
    for s in (0, 2):
        assert_close_to_reference(out[s], ref32[s], naive[s], f"sequence {s}")


def test_seq_len_past_the_block_table_raises_at_the_next_call():
    b = _batch()
    b.seq_lens[2] = b.block_table.shape[1] * 16 + 1
    ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.max_seq_len)
    torch.cuda.synchronize()  # the kernel has run; the next op sees its flag without a sync of its own
    b.seq_lens[2] = 33
    with pytest.raises(ValueError, match="seq_lens holds a length outside"):
        ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.max_seq_len)
    ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.max_seq_len)
    ops.check_errors()  # the good call after it flagged nothing


@pytest.mark.parametrize("bad", ["q_not_from_0", "q_not_monotonic", "k_last_not_total", "max_seqlen_q_too_small"])
def test_bad_cu_seqlens_raise_naming_the_input(bad):
    v = VarlenBatch([5, 9, 7], [6, 9, 8], 8, 2, HD, DTYPE, seed=3)
    cu_q, cu_k, max_q = v.cu_q.clone(), v.cu_k.clone(), 9
    if bad == "q_not_from_0":
        cu_q[0], want = 2, r"cu_seqlens_q\[0\] is not 0"
    elif bad == "q_not_monotonic":
        cu_q[2], want = 4, "cu_seqlens_q is not non-decreasing"
    elif bad == "k_last_not_total":
        cu_k[3], want = 20, r"cu_seqlens_k\[batch\] is not total_k"
    else:
        max_q, want = 7, "longer than max_seqlen_q"
    ops.flash_attn_varlen_func(v.q, v.k, v.v, cu_q, cu_k, max_q, 9, causal=True)
    with pytest.raises(ValueError, match=want):
        ops.check_errors()


def test_graph_replay_flags_and_the_next_eager_call_raises():
    b = _batch()
    out = torch.empty_like(b.q)
    ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.max_seq_len)  # warm-up
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out.copy_(ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.max_seq_len))
    ops.check_errors()  # capture launched nothing
    b.block_table[0, 0] = -7
    g.replay()
    torch.cuda.synchronize()
    with pytest.raises(ValueError, match="block_table"):
        ops.paged_decode(b.q, b.k_cache, b.v_cache, b.block_table, b.seq_lens, b.max_seq_len)
    assert torch.all(out[0] == 0)
