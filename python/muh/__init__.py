"""muh — hardware-aware attention kernels: the seed's Python API over muh's C++ selector.

Drop-in for the seed module ``muh_dispatch``::

    import muh as muh_dispatch
    cfg = muh_dispatch.select_attention_config(muh_dispatch.BI_V100, torch.bfloat16, 256, 100000, 4)

Every value comes from the constexpr C++ selector (include/muh/config.hpp) through ``muh._core``;
this file only gives the values the seed's dataclass shapes. No torch is needed here: a
``torch.dtype`` is recognised by its type and read by name. The torch ops live in ``muh.ops``.
"""

from __future__ import annotations

import operator
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, Optional, Union

from . import _core

__version__ = _core.__version__

__all__ = [
    "HardwareCapability", "AttentionConfig", "Backends",
    "BI_V100", "T4", "A100", "L40S", "H100", "H200", "PRESETS",
    "SEED_BACKENDS", "MUH_BACKENDS", "SUPPORTED_HEAD_DIMS", "COMPILED_TARGETS", "COMPILED_INSTANCES",
    "select_attention_config", "default_backends", "check_config_inputs", "current_device_capability",
    "QWEN36_BF16", "QWEN36_FP16", "asdict", "replace", "build_info",
]

_BI = _core.preset("bi-v100")       # the seed's HardwareCapability() defaults, from C++
_CFG = _core.default_config()       # C++ AttentionConfig{} (the seed's AttentionConfig() defaults)


@dataclass(frozen=True)
class HardwareCapability:
    """A GPU profile. The first six fields are the seed's, with its defaults (the BI-V100), so
    ``HardwareCapability()`` is ``BI_V100``. The rest are muh's: the opt-in shared memory
    (defaults to ``max_shared_memory_per_block``), the compute capability (0 = an own, non-NVIDIA
    architecture running the portable agent) and what the agents may use."""
    warp_size: int = _BI["warp_size"]
    max_threads_per_block: int = _BI["max_threads_per_block"]
    max_shared_memory_per_block: int = _BI["max_shared_memory_per_block"]
    sm_count: int = _BI["sm_count"]
    memory_bandwidth_gbps: int = _BI["memory_bandwidth_gbps"]
    l2_cache_size_bytes: int = _BI["l2_cache_size_bytes"]
    # muh's additions
    name: str = _BI["name"]
    max_shared_memory_per_block_optin: Optional[int] = None
    compute_capability: int = _BI["compute_capability"]
    async_copy: bool = _BI["async_copy"]
    tma: bool = _BI["tma"]
    wgmma: bool = _BI["wgmma"]
    fp16_tensor_cores: bool = _BI["fp16_tensor_cores"]
    bf16_tensor_cores: bool = _BI["bf16_tensor_cores"]

    def __post_init__(self) -> None:
        for f in ("warp_size", "max_threads_per_block", "max_shared_memory_per_block", "sm_count",
                  "memory_bandwidth_gbps", "l2_cache_size_bytes", "compute_capability"):
            _require_int(getattr(self, f), f)
        # Opt-in shared memory is never below the default limit (cudaFuncSetAttribute only
        # raises it), so a profile given only the seed's field — or replace()d on it — gets it.
        optin = self.max_shared_memory_per_block_optin
        optin = 0 if optin is None else _require_int(optin, "max_shared_memory_per_block_optin")
        object.__setattr__(self, "max_shared_memory_per_block_optin",
                           max(optin, self.max_shared_memory_per_block))
        for f in ("async_copy", "tma", "wgmma", "fp16_tensor_cores", "bf16_tensor_cores"):
            if not isinstance(getattr(self, f), bool):
                raise TypeError(f"{f} must be a bool, got {type(getattr(self, f)).__name__}")

    @property
    def is_own_arch(self) -> bool:
        return self.compute_capability == 0


@dataclass
class AttentionConfig:
    """The seed's AttentionConfig fields and defaults, then muh's own. Mapping from the C++
    struct: prefill.block_m/block_n/num_warps/num_stages → triton_*, decode.partition_size →
    partition_size, use_native_prefill → use_triton_prefill (muh's prefill is C++, not Triton;
    the seed's name is kept for its callers)."""
    # Prefill tile (the seed's Triton flash attention)
    triton_block_m: int = _CFG["triton_block_m"]
    triton_block_n: int = _CFG["triton_block_n"]
    triton_num_warps: int = _CFG["triton_num_warps"]
    triton_num_stages: int = _CFG["triton_num_stages"]
    # Paged decode V1/V2
    partition_size: int = _CFG["partition_size"]
    v1_v2_threshold: int = _CFG["v1_v2_threshold"]
    # Backends
    use_native_v1: bool = _CFG["use_native_v1"]
    use_native_v2: bool = _CFG["use_native_v2"]
    use_triton_prefill: bool = _CFG["use_triton_prefill"]
    # muh's own
    target_arch: int = _CFG["target_arch"]
    prefill_target: int = _CFG["prefill_target"]  # the rows' dispatch targets (muh/select.hpp)
    decode_target: int = _CFG["decode_target"]
    prefill_agent: str = _CFG["prefill_agent"]
    decode_agent: str = _CFG["decode_agent"]
    decode_num_warps: int = _CFG["decode_num_warps"]
    decode_tile_tokens: int = _CFG["decode_tile_tokens"]
    decode_num_stages: int = _CFG["decode_num_stages"]
    decode_ctas_per_sm: int = _CFG["decode_ctas_per_sm"]
    prefill_evidence: str = field(default=_CFG["prefill_evidence"], compare=False, repr=False)
    decode_evidence: str = field(default=_CFG["decode_evidence"], compare=False, repr=False)

    @property
    def use_native_prefill(self) -> bool:
        """muh's name for use_triton_prefill."""
        return self.use_triton_prefill


@dataclass(frozen=True)
class Backends:
    """Which native backends exist. The seed had no usable native V2 (SEED_BACKENDS), so its
    threshold was max_seq_len + 1; muh ships V1, V2 and prefill (MUH_BACKENDS). The default,
    ``auto`` (``default_backends(hw)``), is SEED_BACKENDS on the bi-v100 profile and MUH_BACKENDS
    elsewhere — the rule of ``muh config --backends auto``."""
    native_v1: bool = True
    native_v2: bool = True
    native_prefill: bool = True


def _require_int(v: Any, name: str) -> int:
    if not isinstance(v, bool):
        try:
            return operator.index(v)
        except TypeError:
            pass
    raise TypeError(f"{name} must be an int, got {type(v).__name__}")


def _hw(d: Dict[str, Any]) -> HardwareCapability:
    return HardwareCapability(**d)


SEED_BACKENDS = Backends(**_core.seed_backends())
MUH_BACKENDS = Backends(**_core.muh_backends())

BI_V100 = HardwareCapability()
assert BI_V100 == _hw(_BI), "the Python defaults must be the C++ bi-v100 preset"
PRESETS: Dict[str, HardwareCapability] = {n: _hw(_core.preset(n)) for n in _core.preset_names()}
T4 = PRESETS["t4"]
A100 = PRESETS["a100"]
L40S = PRESETS["l40s"]
H100 = PRESETS["h100"]
H200 = PRESETS["h200"]

SUPPORTED_HEAD_DIMS = tuple(_core.supported_head_dims())
# What this build compiled: dispatch targets (0 = portable) and (dtype, head_dim) kernel instances.
COMPILED_TARGETS = tuple(_core.compiled_targets())
COMPILED_INSTANCES = tuple((t, d) for t, d in _core.compiled_instances())


def build_info() -> str:
    """What this build holds, in one line: `pip install ./python` builds for the present GPU, or
    a lean set without one (python/CMakeLists.txt); `python -m muh` prints this."""
    import glob
    import os
    dtypes = sorted({t for t, _ in COMPILED_INSTANCES})
    dims = sorted({d for _, d in COMPILED_INSTANCES})
    here = os.path.dirname(os.path.abspath(__file__))
    ops = "built" if glob.glob(os.path.join(here, "_muh_torch_ops*.so")) else \
        "not built (torch was not importable when muh was built)"
    targets = ", ".join("portable" if t == 0 else f"sm_{t}" for t in COMPILED_TARGETS)
    return (f"muh {__version__}: SASS sm_{_core.cuda_architectures.replace(',', ', sm_')}; "
            f"dispatch targets {targets}; dtypes {', '.join(dtypes)} × head dims "
            f"{', '.join(map(str, dims))}; muh.ops {ops}")


# Python ints beyond what C++ holds are out of every supported range anyway; clamp them so the C++
# check answers with its own message instead of an overflow.
_I64 = 1 << 62


def _clamp(v: Any, name: str) -> int:
    v = _require_int(v, name)
    return max(-_I64, min(_I64, v))


def _dtype_name(dtype: Any) -> str:
    """'bf16' | 'fp16' | 'fp32' (and the aliases dtype.hpp's parse_dtype takes), or a torch.dtype
    — recognised without importing torch: str(torch.bfloat16) == 'torch.bfloat16'."""
    t = type(dtype)
    if t.__name__ == "dtype" and t.__module__ == "torch":
        return str(dtype)
    if isinstance(dtype, str):
        return dtype
    raise TypeError(f"dtype must be a torch.dtype or one of 'bf16', 'fp16', 'fp32', got {dtype!r}")


def _profile(hw: Union[HardwareCapability, str, Any]) -> Any:
    # A preset name, or a profile object: _core checks that the object has the seed's six fields
    # (TypeError naming hw otherwise), so None, 42 or a dict never become the BI-V100.
    if isinstance(hw, str):
        try:
            return PRESETS[hw]
        except KeyError:
            raise ValueError(f"unknown hardware profile '{hw}' (known: {', '.join(PRESETS)})") from None
    return hw


def default_backends(hw: Union[HardwareCapability, str]) -> Backends:
    """``auto``: SEED_BACKENDS on the bi-v100 profile (the seed's deployment, no usable native
    V2), MUH_BACKENDS on every other profile — C++ ``muh::default_backends``, the rule
    ``muh config --backends auto`` uses."""
    return Backends(**_core.default_backends(_profile(hw)))


def select_attention_config(
    hw: Union[HardwareCapability, str],
    dtype: Any,
    head_dim: int,
    max_seq_len: int,
    num_kv_heads: int,
    backends: Union[Backends, str, None] = None,
) -> AttentionConfig:
    """The seed's selector, answered by C++ ``muh::select_attention_config``.

    hw: a HardwareCapability (or any object with the seed's six field names), or a preset name;
    anything else (None, 42, a dict) raises TypeError.
    dtype: torch.bfloat16 / torch.float16 / torch.float32, or "bf16" / "fp16" / "fp32".
    backends: None or "auto" (default: ``default_backends(hw)`` — the seed's on the bi-v100
    profile, so the seed's own call returns the seed's table), "seed" / SEED_BACKENDS (V1
    forced, threshold = max_seq_len + 1), "muh" / MUH_BACKENDS (threshold from the hardware).
    Raises ValueError with the message of C++ check_config_inputs() on bad input.
    """
    d = _core.select_attention_config(
        _profile(hw), _dtype_name(dtype), _clamp(head_dim, "head_dim"),
        _clamp(max_seq_len, "max_seq_len"), _clamp(num_kv_heads, "num_kv_heads"), backends)
    return AttentionConfig(**d)


def check_config_inputs(hw: Union[HardwareCapability, str], head_dim: int, max_seq_len: int,
                        num_kv_heads: int) -> str:
    """'' when the inputs are valid, else the C++ check's one-line message."""
    return _core.check_config_inputs(_profile(hw), _clamp(head_dim, "head_dim"),
                                     _clamp(max_seq_len, "max_seq_len"),
                                     _clamp(num_kv_heads, "num_kv_heads"))


def current_device_capability(device: Any = None) -> HardwareCapability:
    """The present CUDA device's profile (SMs, shared memory, L2, compute capability, bandwidth
    from memory clock × bus width). ``device``: None (the current device), an int ordinal, or a
    torch.device of type cuda. Raises RuntimeError ("no CUDA device ...") without one."""
    ordinal = -1
    if device is not None:
        if type(device).__name__ == "device" and type(device).__module__ == "torch":
            if device.type != "cuda":
                raise ValueError(f"device must be a CUDA device, got {device}")
            ordinal = -1 if device.index is None else device.index
        else:
            ordinal = _require_int(device, "device")
    return _hw(_core.query_device(ordinal))


# The seed's two precomputed configs: the C++ constexpr muh::QWEN36_BF16 / QWEN36_FP16
# (models.hpp, static_assert-checked), i.e. BI-V100, head_dim 256, 100 000 tokens, 4 KV heads,
# under the seed's backends.
QWEN36_BF16 = AttentionConfig(**_core.qwen36_bf16())
QWEN36_FP16 = AttentionConfig(**_core.qwen36_fp16())


def __getattr__(name: str) -> Any:
    # `muh.ops` needs torch; import it only when asked for.
    if name == "ops":
        import importlib
        return importlib.import_module(".ops", __name__)
    raise AttributeError(f"module 'muh' has no attribute '{name}'")
