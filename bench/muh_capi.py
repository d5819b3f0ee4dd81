"""muh_capi.py — muh's C ABI (include/muh/muh.h) for the ctypes scripts of bench/: the argument
types of every function and the values of every enum, read from the header itself, so that no
script declares a signature of its own that can drift from it.

Why: each script used to set its own `argtypes`, and bench/prefill_targets.py's muh_prefill still
had the 20 arguments it had before the workspace pair was added (22 now): ctypes then passes
force_target where the header has the workspace pointer. Reading the header leaves one place.

  import muh_capi as capi
  lib = capi.load("build/libmuh.so")          # every function of muh.h the library exports, typed
  capi.check(lib, lib.muh_prefill(...), "muh_prefill")
  capi.ENUMS["MUH_BF16"], capi.KvQuant(capi.ENUMS["MUH_KV_FP8_E4M3"], 0.02, 0.015)

Types: int → c_int, float → c_float, size_t → c_size_t, int64_t → c_int64, a `const char*`
result → c_char_p, and every pointer argument → c_void_p (a device pointer as an int, None,
ctypes.byref(x), a ctypes array or structure pointer all pass). Nothing here imports torch.
"""
import ctypes
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "include", "muh", "muh.h")

_SCALARS = {"int": ctypes.c_int, "float": ctypes.c_float, "size_t": ctypes.c_size_t, "int64_t": ctypes.c_int64,
            "uint32_t": ctypes.c_uint32}


def _strip_comments(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def _ctype(decl, where):
    """The ctypes type of one parameter or result declaration ('const int* seq_lens', 'float')."""
    decl = " ".join(decl.replace("*", " * ").split())
    if "*" in decl:
        return ctypes.c_void_p
    words = [w for w in decl.split() if w != "const"]
    base = words[0] if words else ""
    if base not in _SCALARS:
        raise ValueError(f"muh_capi: {where}: no ctypes type for '{decl}'")
    return _SCALARS[base]


def parse_header(path=HEADER):
    """{name: (restype, [argtypes])} of every function muh.h declares, and {NAME: value} of every
    enumerator (values as the header writes them: integers and `1u << k`)."""
    with open(path) as f:
        text = _strip_comments(f.read())
    funcs = {}
    for m in re.finditer(r"(?m)^\s*((?:const\s+)?\w+\s*\*?)\s*(muh_\w+)\s*\(([^)]*)\)\s*;", text):
        ret, name, params = m.group(1).strip(), m.group(2), m.group(3).strip()
        if ret.replace(" ", "") == "constchar*":
            restype = ctypes.c_char_p
        else:
            restype = _ctype(ret, name)
        args = [] if params in ("", "void") else [_ctype(p, f"{name}({p.strip()})") for p in params.split(",")]
        funcs[name] = (restype, args)
    enums = {}
    for m in re.finditer(r"enum\s+\w+\s*\{([^}]*)\}", text):
        for item in m.group(1).split(","):
            if "=" not in item:
                continue
            key, value = (s.strip() for s in item.split("=", 1))
            shift = re.fullmatch(r"(\d+)u?\s*<<\s*(\d+)", value)
            enums[key] = (int(shift.group(1)) << int(shift.group(2))) if shift else int(value.rstrip("u"), 0)
    return funcs, enums


FUNCTIONS, ENUMS = parse_header()
DTYPES = {"fp16": ENUMS["MUH_FP16"], "bf16": ENUMS["MUH_BF16"], "fp32": ENUMS["MUH_FP32"]}
LAYOUTS = {"nhd": ENUMS["MUH_KV_NHD"], "vllm": ENUMS["MUH_KV_VLLM"]}
KV_DTYPES = {"auto": ENUMS["MUH_KV_AUTO"], "fp8_e4m3": ENUMS["MUH_KV_FP8_E4M3"], "fp8_e5m2": ENUMS["MUH_KV_FP8_E5M2"]}
STATUS = {ENUMS[k]: k for k in ("MUH_OK", "MUH_INVALID_ARGUMENT", "MUH_UNSUPPORTED", "MUH_NOT_COMPILED",
                                  "MUH_NO_DEVICE", "MUH_CUDA_ERROR")}


class KvQuant(ctypes.Structure):
    """muh_kv_quant (muh.h): the cache's element type and per-tensor scales."""
    _fields_ = [("kv_dtype", ctypes.c_int), ("k_scale", ctypes.c_float), ("v_scale", ctypes.c_float)]


class Variant(ctypes.Structure):
    """muh_variant (muh.h); Variant.none() is MUH_VARIANT_NONE."""
    _fields_ = [("window_left", ctypes.c_int), ("window_right", ctypes.c_int), ("softcap", ctypes.c_float),
                ("use_sinks", ctypes.c_int), ("sinks", ctypes.c_void_p), ("use_alibi", ctypes.c_int),
                ("alibi_slopes", ctypes.c_void_p)]

    @classmethod
    def none(cls):
        return cls(-1, -1, 0.0, 0, None, 0, None)


def declare(lib, functions=None):
    """Sets restype and argtypes of every function of muh.h that `lib` exports; returns lib."""
    for name, (restype, args) in (functions or FUNCTIONS).items():
        fn = getattr(lib, name, None)  # an older build may lack a newer function
        if fn is None:
            continue
        fn.restype = restype
        fn.argtypes = args
    return lib


def load(path):
    """libmuh.so at `path` (made absolute), every function of muh.h typed."""
    return declare(ctypes.CDLL(os.path.abspath(path)))


def status_name(rc):
    return STATUS.get(rc, f"status {rc}")


def last_error(lib, rc):
    return lib.muh_last_error().decode(errors="replace") if rc != 0 else ""


def check(lib, rc, what):
    """Raises SystemExit naming the call, its status and muh_last_error() when rc != 0."""
    if rc != 0:
        raise SystemExit(f"{what}: {status_name(rc)}: {last_error(lib, rc)}")
