"""A script written against vLLM's ops (vllm_style_decode.py) runs unchanged with torch.ops.muh
substituted for torch.ops._C, and gives SDPA's answer."""

import math

import pytest

from gpu_helpers import assert_close_to_reference, pick, sdpa, torch

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
    with pytest.raises(NotImplementedError, match="fp8"):
        script.forward_decode(q, kc, vc, bt, sl, 1, "fp8_e4m3", 2, 0.1, None, one, one)
