"""The cache writes and the state merge take vLLM's signatures: vllm/_custom_ops.py's
reshape_and_cache, reshape_and_cache_flash and merge_attn_states for the Python wrappers in
python/muh/ops.py (read from source with ast: runs without torch), csrc/torch_bindings.cpp's schemas
for torch.ops.muh (vLLM 0.6.3's float scales on the default overloads, later vLLM's 0-dim tensors on
.tensor_scales; merge_attn_states in _C's order, output_lse second) where muh.ops loads."""

import inspect

import pytest

from test_signatures import _EMPTY, _muh_ops, _schema_args, params_in_source, params_of


def vllm_reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale, v_scale):
    ...


def vllm_reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale,
                                 v_scale):
    ...


def vllm_merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse=None):
    ...


ORIGINALS = {
    "reshape_and_cache": vllm_reshape_and_cache,
    "reshape_and_cache_flash": vllm_reshape_and_cache_flash,
    "merge_attn_states": vllm_merge_attn_states,
}


@pytest.mark.parametrize("name", sorted(ORIGINALS))
def test_source_signature_is_vllms(name):
    assert params_in_source(name) == params_of(ORIGINALS[name])


@pytest.mark.parametrize("name", sorted(ORIGINALS))
def test_imported_signature_is_vllms(name):
    assert params_of(getattr(_muh_ops(), name)) == params_of(ORIGINALS[name])


VLLM063_CACHE = ("Tensor key, Tensor value, Tensor! key_cache, Tensor! value_cache, Tensor slot_mapping, "
                 "str kv_cache_dtype, float k_scale, float v_scale")
VLLM_MERGE = ("Tensor! output, Tensor!? output_lse, Tensor prefix_output, Tensor prefix_lse, "
              "Tensor suffix_output, Tensor suffix_lse")


@pytest.mark.parametrize("name", ["reshape_and_cache", "reshape_and_cache_flash"])
def test_cache_op_schemas_are_vllms(name):
    _muh_ops()
    import torch
    packet = getattr(torch.ops.muh, name)
    assert _schema_args(packet.default) == VLLM063_CACHE
    assert _schema_args(packet.tensor_scales) == VLLM063_CACHE.replace("float k_scale, float v_scale",
                                                                       "Tensor k_scale, Tensor v_scale")


def test_merge_op_schema_is_vllms():
    _muh_ops()
    import torch
    got = _schema_args(torch.ops.muh.merge_attn_states.default)
    # "Tensor(a!)?" prints as Optional[Tensor] with a write alias: _schema_args writes "Tensor?!".
    assert got.replace("Tensor?! output_lse", "Tensor!? output_lse") == VLLM_MERGE


def test_cpu_tensors_are_refused_naming_the_argument():
    ops = _muh_ops()
    import torch
    key = torch.randn(3, 2, 64, dtype=torch.float16)
    kc, vc = torch.zeros(4, 2, 8, 16, 8, dtype=torch.float16), torch.zeros(4, 2, 64, 16, dtype=torch.float16)
    slots = torch.arange(3, dtype=torch.int64)
    with pytest.raises(ValueError, match="key must be a CUDA tensor"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "auto", 1.0, 1.0)
    # fp8 kv_cache_dtypes are taken (the device check comes next); unknown ones raise naming the value.
    with pytest.raises(ValueError, match="key must be a CUDA tensor"):
        ops.reshape_and_cache(key, key, kc.byte(), vc.byte(), slots, "fp8", 1.0, 1.0)
    with pytest.raises(ValueError, match="key must be a CUDA tensor"):
        ops.reshape_and_cache_flash(key, key, kc, vc, slots, "fp8_e5m2", torch.ones(()), torch.ones(()))
    with pytest.raises(NotImplementedError, match="kv_cache_dtype='fp8_inc'"):
        ops.reshape_and_cache(key, key, kc, vc, slots, "fp8_inc", 1.0, 1.0)
    with pytest.raises(NotImplementedError, match="kv_cache_dtype='int8'"):
        ops.reshape_and_cache_flash(key, key, kc, vc, slots, "int8", torch.ones(()), torch.ones(()))
    o = torch.zeros(3, 2, 64)
    lse = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="output must be a CUDA tensor"):
        ops.merge_attn_states(o, o, lse, o, lse)
