"""One default everywhere: `auto` backends (C++ muh::default_backends) in Python as in
`muh config`, the seed's exact call through `import muh as muh_dispatch`, and a `hw` that is not
a profile raising TypeError instead of silently becoming the BI-V100. No GPU, no torch needed."""

import dataclasses
import types

import pytest

import muh
import muh as muh_dispatch  # the seed's callers import it under this name


def test_seed_exact_call_gives_seed_table():
    # The seed's own call, positional, no backends: `muh config` prints 100001 / V1 forced for it.
    c = muh.select_attention_config(muh.BI_V100, "bf16", 256, 100000, 4)
    assert c.v1_v2_threshold == 100001
    assert c.use_native_v2 is False and c.use_native_v1 is True
    assert c == muh.QWEN36_BF16


def test_seed_keyword_call_and_main_figures():
    # The seed's module-level precomputation and its __main__ prints, under the seed's name.
    cfg = muh_dispatch.select_attention_config(hw=muh_dispatch.BI_V100, dtype="bf16", head_dim=256,
                                               max_seq_len=100000, num_kv_heads=4)
    assert cfg == muh_dispatch.QWEN36_BF16
    lines = [
        f"  triton: BLOCK_M={cfg.triton_block_m} BLOCK_N={cfg.triton_block_n}"
        f" warps={cfg.triton_num_warps} stages={cfg.triton_num_stages}",
        f"  decode: partition={cfg.partition_size} v1_thresh={cfg.v1_v2_threshold}",
        f"  SMEM: {cfg.triton_block_n}×256×2×2 = {cfg.triton_block_n*256*2*2} bytes"
        f" ({cfg.triton_block_n*256*2*2/1024:.0f}KB ≤ 48KB)",
        f"  V1 forced: {cfg.use_native_v1} (V2 native has correctness issues)",
    ]
    assert lines == ["  triton: BLOCK_M=32 BLOCK_N=32 warps=4 stages=1",
                     "  decode: partition=512 v1_thresh=100001",
                     "  SMEM: 32×256×2×2 = 32768 bytes (32KB ≤ 48KB)",
                     "  V1 forced: True (V2 native has correctness issues)"]


def test_seed_call_with_torch_dtype():
    torch = pytest.importorskip("torch")
    c = muh_dispatch.select_attention_config(muh_dispatch.BI_V100, torch.bfloat16, 256, 100000, 4)
    assert c == muh_dispatch.QWEN36_BF16


@pytest.mark.parametrize("hw,expected", [
    (muh.BI_V100, "seed"), ("bi-v100", "seed"), (muh.HardwareCapability(), "seed"),
    (muh.T4, "muh"), (muh.A100, "muh"), (muh.L40S, "muh"), (muh.H100, "muh"), ("h200", "muh"),
    (dataclasses.replace(muh.H200, name="NVIDIA H200"), "muh"),  # a device read from the runtime
])
def test_auto_is_the_cli_rule(hw, expected):
    want = muh.SEED_BACKENDS if expected == "seed" else muh.MUH_BACKENDS
    assert muh.default_backends(hw) == want
    for auto in (None, "auto"):
        assert muh.select_attention_config(hw, "bf16", 128, 100000, 8, backends=auto) == \
            muh.select_attention_config(hw, "bf16", 128, 100000, 8, backends=want)


def test_backends_by_name():
    assert muh.select_attention_config("h200", "bf16", 256, 100000, 4, backends="seed").v1_v2_threshold == 100001
    assert muh.select_attention_config("bi-v100", "bf16", 256, 100000, 4, backends="muh").use_native_v2
    with pytest.raises(ValueError, match="unknown backends 'triton'"):
        muh.select_attention_config("h200", "bf16", 256, 100000, 4, backends="triton")
    with pytest.raises(TypeError, match="backends must be"):
        muh.select_attention_config("h200", "bf16", 256, 100000, 4, backends=42)


@pytest.mark.parametrize("hw", [None, 42, {"sm_count": 132}, [], 1.5])
def test_hw_that_is_not_a_profile_raises_type_error(hw):
    with pytest.raises(TypeError, match=r"^hw must be a muh\.HardwareCapability"):
        muh.select_attention_config(hw, "bf16", 256, 100000, 4)
    with pytest.raises(TypeError, match=r"^hw must be"):
        muh.check_config_inputs(hw, 256, 100000, 4)
    with pytest.raises(TypeError, match=r"^hw must be"):
        muh.default_backends(hw)


def test_misspelt_fields_raise_type_error():
    with pytest.raises(TypeError, match="sm_cout"):
        muh.HardwareCapability(sm_cout=132)
    with pytest.raises(TypeError, match="sm_cout"):
        dataclasses.replace(muh.H200, sm_cout=132)
    # A seed-style object whose field is misspelt lacks the real one: named in the error.
    seedish = types.SimpleNamespace(warp_size=32, max_threads_per_block=1024,
                                    max_shared_memory_per_block=49152, sm_cout=16,
                                    memory_bandwidth_gbps=900, l2_cache_size_bytes=6 << 20)
    with pytest.raises(TypeError, match=r"no sm_count"):
        muh.select_attention_config(seedish, "bf16", 256, 100000, 4)
    with pytest.raises(TypeError, match=r"no sm_count"):
        muh.select_attention_config(types.SimpleNamespace(**{**vars(seedish), "sm_count": None}),
                                    "bf16", 256, 100000, 4)


def test_unknown_preset_name_is_value_error():
    with pytest.raises(ValueError, match="unknown hardware profile 'v100'"):
        muh.select_attention_config("v100", "bf16", 256, 100000, 4)


def test_version():
    assert muh.__version__ == muh._core.__version__ and muh.__version__.count(".") == 2


def test_build_info_says_what_was_built():
    info = muh.build_info()
    assert info.startswith(f"muh {muh.__version__}: SASS sm_")
    for _, d in muh.COMPILED_INSTANCES:
        assert str(d) in info
    assert "muh.ops " in info
