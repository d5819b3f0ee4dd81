"""muh's core Python layer (muh._core over the C++ selector): no GPU, no torch needed.

The seed (shared/seed/muh_dispatch.py) is the oracle for BI-V100: its rule is restated in
`seed_tile` below and its __main__ figures are literals here.
"""

import dataclasses
import os
import subprocess
import sys

import pytest

import muh
import muh as muh_dispatch  # the seed's callers import it under this name

SEED_DTYPES = ["fp16", "bf16"]
SEED_HEAD_DIMS = [64, 128, 256]


def seed_tile(head_dim: int, elem_size: int = 2, smem: int = 49152) -> int:
    """The seed's prefill rule: block_n = 64, halved while block_n·d·elem·2 > smem, down to 16."""
    block_n = 64
    while block_n * head_dim * elem_size * 2 > smem and block_n > 16:
        block_n //= 2
    return block_n


class FakeTorchDtype:
    """Stands in for torch.bfloat16 where torch is absent: a type named 'dtype' from module
    'torch' whose str() is 'torch.<name>' — what muh reads."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


FakeTorchDtype.__name__ = "dtype"
FakeTorchDtype.__module__ = "torch"


# ---- The seed's BI-V100 table -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", SEED_DTYPES)
@pytest.mark.parametrize("head_dim", SEED_HEAD_DIMS)
@pytest.mark.parametrize("max_seq_len", [1, 4096, 100000])
@pytest.mark.parametrize("num_kv_heads", [1, 4, 8])
def test_seed_values_on_bi_v100(dtype, head_dim, max_seq_len, num_kv_heads):
    c = muh_dispatch.select_attention_config(muh_dispatch.BI_V100, dtype, head_dim, max_seq_len,
                                             num_kv_heads, backends=muh.SEED_BACKENDS)
    block = {64: 64, 128: 64, 256: 32}[head_dim]
    assert block == seed_tile(head_dim)
    assert (c.triton_block_m, c.triton_block_n) == (block, block)
    assert c.triton_num_warps == 4
    assert c.triton_num_stages == 1
    assert c.partition_size == 512
    assert c.v1_v2_threshold == max_seq_len + 1  # V1 forced
    assert (c.use_native_v1, c.use_native_v2, c.use_triton_prefill) == (True, False, True)
    assert c.prefill_agent == "portable" and c.target_arch == 0


def test_seed_main_figures():
    # seed __main__: BLOCK_M=32 BLOCK_N=32 warps=4 stages=1, partition=512 v1_thresh=100001,
    # SMEM 32×256×2×2 = 32768 bytes ≤ 48 KB, V1 forced.
    for c in (muh.QWEN36_BF16, muh.QWEN36_FP16):
        assert (c.triton_block_m, c.triton_block_n, c.triton_num_warps, c.triton_num_stages) == (32, 32, 4, 1)
        assert (c.partition_size, c.v1_v2_threshold) == (512, 100001)
        assert c.use_native_v1 and not c.use_native_v2 and c.use_triton_prefill
        assert c.triton_block_n * 256 * 2 * 2 == 32768


@pytest.mark.parametrize("name,dtype", [("QWEN36_BF16", "bf16"), ("QWEN36_FP16", "fp16")])
def test_qwen36_is_the_cpp_constexpr_config(name, dtype):
    # QWEN36_* are read from the C++ constexpr muh::QWEN36_* (models.hpp); the selector called
    # from Python with the seed's inputs must give the very same config.
    selected = muh.select_attention_config(muh.BI_V100, dtype, 256, 100000, 4, backends=muh.SEED_BACKENDS)
    assert getattr(muh, name) == selected
    assert dataclasses.asdict(getattr(muh, name)) == getattr(muh._core, "qwen36_" + dtype)()


def test_qwen36_fp16_equals_bf16():
    assert muh.QWEN36_FP16 == muh.QWEN36_BF16  # same element size, as the C++ static_assert says


def test_seed_defaults():
    assert muh.HardwareCapability() == muh.BI_V100
    hw = muh.HardwareCapability()
    assert (hw.warp_size, hw.max_threads_per_block, hw.max_shared_memory_per_block, hw.sm_count,
            hw.memory_bandwidth_gbps, hw.l2_cache_size_bytes) == (32, 1024, 49152, 16, 900, 6 * 1024 * 1024)
    cfg = muh.AttentionConfig()
    assert (cfg.triton_block_m, cfg.triton_block_n, cfg.triton_num_warps, cfg.triton_num_stages,
            cfg.partition_size, cfg.v1_v2_threshold, cfg.use_native_v1, cfg.use_native_v2,
            cfg.use_triton_prefill) == (32, 32, 4, 1, 512, 8192, True, False, True)


def test_seed_field_names_exist():
    seed_hw = ["warp_size", "max_threads_per_block", "max_shared_memory_per_block", "sm_count",
               "memory_bandwidth_gbps", "l2_cache_size_bytes"]
    seed_cfg = ["triton_block_m", "triton_block_n", "triton_num_warps", "triton_num_stages",
                "partition_size", "v1_v2_threshold", "use_native_v1", "use_native_v2", "use_triton_prefill"]
    hw_fields = [f.name for f in dataclasses.fields(muh.HardwareCapability)]
    cfg_fields = [f.name for f in dataclasses.fields(muh.AttentionConfig)]
    assert hw_fields[:6] == seed_hw  # same order: positional construction works as in the seed
    assert cfg_fields[:9] == seed_cfg


def test_hardware_capability_is_frozen_and_replaceable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        muh.BI_V100.sm_count = 50
    hw = dataclasses.replace(muh.BI_V100, sm_count=50)
    assert hw.sm_count == 50 and muh.BI_V100.sm_count == 16
    # Raising the seed's smem field raises the opt-in limit with it (opt-in is never below it).
    big = dataclasses.replace(muh.BI_V100, max_shared_memory_per_block=98304)
    assert big.max_shared_memory_per_block_optin == 98304
    assert hash(muh.HardwareCapability()) == hash(muh.BI_V100)


def test_presets_come_from_cpp():
    assert set(muh.PRESETS) == {"bi-v100", "t4", "a100", "l40s", "h100", "h200"}
    assert muh.PRESETS["bi-v100"] == muh.BI_V100
    # DESIGN.md's table: SMs, bandwidth, compute capability, async copy.
    rows = {muh.T4: (40, 320, 75, False), muh.A100: (108, 2039, 80, True),
            muh.L40S: (142, 864, 89, True), muh.H100: (132, 3350, 90, True),
            muh.H200: (132, 4800, 90, True)}
    for hw, (sms, bw, cc, async_copy) in rows.items():
        assert (hw.sm_count, hw.memory_bandwidth_gbps, hw.compute_capability, hw.async_copy) == (sms, bw, cc, async_copy), hw.name
    assert muh.H200.tma and not muh.T4.tma


def test_preset_by_name():
    assert muh.select_attention_config("h200", "bf16", 128, 8192, 8) == \
        muh.select_attention_config(muh.H200, "bf16", 128, 8192, 8)
    with pytest.raises(ValueError, match="unknown hardware profile 'v100'"):
        muh.select_attention_config("v100", "bf16", 128, 8192, 8)


# ---- dtype spellings ----------------------------------------------------------------------------

@pytest.mark.parametrize("spelling,canonical", [
    ("bf16", "bf16"), ("bfloat16", "bf16"), ("fp16", "fp16"), ("float16", "fp16"), ("half", "fp16"),
    ("fp32", "fp32"), ("float32", "fp32"),
    (FakeTorchDtype("bfloat16"), "bf16"), (FakeTorchDtype("float16"), "fp16"),
    (FakeTorchDtype("float32"), "fp32"),
])
def test_dtype_spellings(spelling, canonical):
    got = muh.select_attention_config(muh.A100, spelling, 128, 8192, 8)
    assert got == muh.select_attention_config(muh.A100, canonical, 128, 8192, 8)


def test_real_torch_dtypes():
    torch = pytest.importorskip("torch")
    for td, name in ((torch.bfloat16, "bf16"), (torch.float16, "fp16"), (torch.float32, "fp32")):
        assert muh.select_attention_config(muh.BI_V100, td, 256, 100000, 4) == \
            muh.select_attention_config(muh.BI_V100, name, 256, 100000, 4)
    with pytest.raises(ValueError, match="unsupported dtype 'torch.int8'"):
        muh.select_attention_config(muh.BI_V100, torch.int8, 128, 4096, 4)


def test_fp32_fits_real_footprint_not_seed_double_halving():
    # The seed halved fp32 tiles twice (32/16/8); muh fits Q + K + V tiles in 48 KB once.
    for hd, block in ((64, 64), (128, 32), (256, 16)):
        c = muh.select_attention_config(muh.BI_V100, "fp32", hd, 4096, 4, backends=muh.SEED_BACKENDS)
        assert (c.triton_block_m, c.triton_block_n) == (block, block), hd
        assert (c.triton_block_m + 2 * c.triton_block_n) * hd * 4 <= 48 * 1024


# ---- Bad input: ValueError with the C++ check_config_inputs() message ---------------------------

@pytest.mark.parametrize("hw,head_dim,max_seq_len,num_kv_heads,message", [
    (muh.BI_V100, 0, 4096, 4, "unsupported head_dim"),
    (muh.BI_V100, 7, 4096, 4, "unsupported head_dim"),
    (muh.BI_V100, 1024, 4096, 4, "unsupported head_dim"),
    (muh.BI_V100, -128, 4096, 4, "unsupported head_dim"),
    (muh.BI_V100, 10 ** 40, 4096, 4, "unsupported head_dim"),
    (muh.BI_V100, 128, 0, 4, "max_seq_len must be >= 1"),
    (muh.BI_V100, 128, -5, 4, "max_seq_len must be >= 1"),
    (muh.BI_V100, 128, 2 ** 30, 4, "max_seq_len too large"),
    (muh.BI_V100, 128, 10 ** 30, 4, "max_seq_len too large"),
    (muh.BI_V100, 128, 4096, 0, "num_kv_heads must be >= 1"),
    (muh.BI_V100, 128, 4096, -1, "num_kv_heads must be >= 1"),
    (dataclasses.replace(muh.BI_V100, sm_count=0), 128, 4096, 4, "no SMs or no bandwidth"),
    (muh.HardwareCapability(max_shared_memory_per_block=32768), 128, 4096, 4, "less than 48 KB"),
])
def test_bad_arguments_raise_value_error(hw, head_dim, max_seq_len, num_kv_heads, message):
    expected = muh.check_config_inputs(hw, head_dim, max_seq_len, num_kv_heads)
    assert message in expected
    with pytest.raises(ValueError) as e:
        muh.select_attention_config(hw, "bf16", head_dim, max_seq_len, num_kv_heads)
    assert str(e.value) == expected


def test_valid_inputs_check_empty():
    assert muh.check_config_inputs(muh.BI_V100, 256, 100000, 4) == ""


@pytest.mark.parametrize("dtype", ["int8", "fp8", "", FakeTorchDtype("int8")])
def test_bad_dtype_raises_value_error(dtype):
    with pytest.raises(ValueError, match="unsupported dtype"):
        muh.select_attention_config(muh.BI_V100, dtype, 128, 4096, 4)


@pytest.mark.parametrize("kwargs", [dict(head_dim=128.0), dict(max_seq_len="4096"),
                                    dict(num_kv_heads=True), dict(dtype=2)])
def test_wrong_types_raise_type_error(kwargs):
    args = dict(hw=muh.BI_V100, dtype="bf16", head_dim=128, max_seq_len=4096, num_kv_heads=4)
    args.update(kwargs)
    with pytest.raises(TypeError):
        muh.select_attention_config(**args)


def test_bad_hardware_fields_raise_type_error():
    with pytest.raises(TypeError, match="sm_count must be an int"):
        muh.HardwareCapability(sm_count=16.5)
    with pytest.raises(TypeError, match="async_copy must be a bool"):
        muh.HardwareCapability(async_copy=1)


# ---- muh's own behaviour ----------------------------------------------------------------------

def test_seed_style_hardware_object_is_accepted():
    @dataclasses.dataclass(frozen=True)
    class SeedHardwareCapability:  # the seed's own class: six fields, no muh extras
        warp_size: int = 32
        max_threads_per_block: int = 1024
        max_shared_memory_per_block: int = 49152
        sm_count: int = 16
        memory_bandwidth_gbps: int = 900
        l2_cache_size_bytes: int = 6 * 1024 * 1024

    got = muh.select_attention_config(SeedHardwareCapability(), "bf16", 256, 100000, 4,
                                      backends=muh.SEED_BACKENDS)
    assert got == muh.QWEN36_BF16


def test_muh_backends_threshold_comes_from_hardware():
    # With muh's native V2 the threshold is where splitting pays (heuristics.hpp), not max + 1.
    # (On the bi-v100 profile `auto` means the seed's backends: ask for muh's.)
    for hw in (muh.BI_V100, muh.A100, muh.H200):
        c = muh.select_attention_config(hw, "bf16", 256, 100000, 4, backends=muh.MUH_BACKENDS)
        assert c.use_native_v2
        assert c.partition_size <= c.v1_v2_threshold <= 100000, hw.name
    # Short contexts never split: the threshold lies past max_seq_len.
    # (L* = partition + split overhead · per-SM bandwidth / bytes per token > 64 on any profile.)
    short = muh.select_attention_config(muh.H200, "bf16", 128, 64, 8)
    assert short.v1_v2_threshold == 65
    # Enough KV heads to fill every CTA slot of a tiny GPU: splitting never pays.
    tiny = dataclasses.replace(muh.BI_V100, sm_count=1)
    assert muh.select_attention_config(tiny, "bf16", 128, 100000, 64,
                                       backends=muh.MUH_BACKENDS).v1_v2_threshold == 100001
    assert muh.select_attention_config(muh.H200, "bf16", 128, 4096, 8) == \
        muh.select_attention_config(muh.H200, "bf16", 128, 4096, 8, backends=muh.MUH_BACKENDS)


def test_num_stages_follow_async_copy():
    assert muh.select_attention_config(muh.T4, "fp16", 128, 4096, 8).triton_num_stages == 1
    assert muh.select_attention_config(muh.H200, "bf16", 128, 4096, 8).triton_num_stages > 1


def test_use_native_prefill_alias():
    assert muh.QWEN36_BF16.use_native_prefill is muh.QWEN36_BF16.use_triton_prefill


def test_current_device_capability():
    try:
        hw = muh.current_device_capability()
    except RuntimeError as e:  # CI: no GPU
        assert "no CUDA device" in str(e)
    else:
        assert hw.sm_count > 0 and hw.compute_capability >= 75
        assert muh.select_attention_config(hw, "bf16", 128, 4096, 8).target_arch == hw.compute_capability
    with pytest.raises(TypeError):
        muh.current_device_capability("cuda:0")


def test_python_dash_m_prints_seed_table():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "muh"], capture_output=True, text=True, env=env, check=True)
    assert "BLOCK_M=32 BLOCK_N=32 warps=4 stages=1" in r.stdout
    assert "partition=512 v1_thresh=100001" in r.stdout


def test_ops_needs_torch():
    # Without torch `import muh` must still work; muh.ops says what it needs.
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            import muh.ops  # noqa: F401


def test_compiled_instances_describe_this_build():
    assert 0 in muh.COMPILED_TARGETS  # the portable agent is in every build
    assert muh.COMPILED_INSTANCES, "a build compiles at least one (dtype, head_dim)"
    for t, d in muh.COMPILED_INSTANCES:
        assert t in ("fp16", "bf16", "fp32") and d in muh.SUPPORTED_HEAD_DIMS
