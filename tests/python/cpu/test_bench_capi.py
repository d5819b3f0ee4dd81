"""bench/muh_capi.py reads muh.h's signatures; these check that it reads all of them, right, and
that no bench script declares a C ABI signature of its own (bench/prefill_targets.py had kept a
20-argument muh_prefill after the header grew to 22)."""
import ctypes
import os
import re
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import muh_capi as capi  # noqa: E402

HEADER = os.path.join(ROOT, "include", "muh", "muh.h")


def header_text():
    with open(HEADER) as f:
        return capi._strip_comments(f.read())


def test_every_declared_function_is_read():
    names = set(re.findall(r"\b(muh_\w+)\s*\(", header_text()))
    assert names == set(capi.FUNCTIONS), names ^ set(capi.FUNCTIONS)
    assert len(capi.FUNCTIONS) >= 25


def test_argument_counts_follow_the_commas():
    text = header_text()
    for name, (_, args) in capi.FUNCTIONS.items():
        params = re.search(r"\b" + name + r"\s*\(([^)]*)\)", text).group(1).strip()
        expect = 0 if params in ("", "void") else params.count(",") + 1
        assert len(args) == expect, name


def test_known_signatures():
    i, f, vp, sz = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t
    restype, args = capi.FUNCTIONS["muh_prefill"]
    assert restype is i
    assert args == [i] + [vp] * 7 + [i] * 8 + [f, i, vp, sz, i, vp]
    restype, args = capi.FUNCTIONS["muh_paged_decode_quant"]
    assert args == [i, i] + [vp] * 7 + [i] * 8 + [f, vp, sz] + [i] * 3 + [vp, vp, vp]
    restype, args = capi.FUNCTIONS["muh_reshape_and_cache_quant"]
    assert args == [i, i] + [vp] * 5 + [i] * 5 + [ctypes.c_int64] * 2 + [i, vp, i, f, f]
    assert capi.FUNCTIONS["muh_last_error"] == (ctypes.c_char_p, [])
    assert capi.FUNCTIONS["muh_check_input_errors"] == (i, [vp, vp])


def test_enums():
    assert capi.DTYPES == {"fp16": 0, "bf16": 1, "fp32": 2}
    assert capi.LAYOUTS == {"nhd": 0, "vllm": 1}
    assert capi.KV_DTYPES == {"auto": 0, "fp8_e4m3": 1, "fp8_e5m2": 2}
    assert capi.STATUS[0] == "MUH_OK" and capi.STATUS[3] == "MUH_NOT_COMPILED" and len(capi.STATUS) == 6
    assert capi.ENUMS["MUH_INPUT_ERROR_SEQLEN_K_MAX"] == 1 << 11


def test_structs_follow_the_header():
    text = header_text()
    for struct, cls in (("muh_kv_quant", capi.KvQuant), ("muh_variant", capi.Variant)):
        body = re.search(r"typedef struct " + struct + r"\s*\{([^}]*)\}", text).group(1)
        fields = [d.replace("*", " ").split()[-1] for d in body.split(";") if d.strip()]
        assert [n for n, _ in cls._fields_] == fields, struct
    none = capi.Variant.none()
    assert (none.window_left, none.window_right, none.softcap, none.use_sinks, none.use_alibi) == (-1, -1, 0.0, 0, 0)


def test_an_unknown_type_is_an_error(tmp_path):
    h = tmp_path / "h.h"
    h.write_text("int muh_x(double d);\n")
    with pytest.raises(ValueError, match="muh_x"):
        capi.parse_header(str(h))


def test_declare_types_what_the_library_exports():
    class Fn:
        pass

    class Lib:
        muh_prefill = Fn()  # muh_version etc. absent: an older build

    capi.declare(Lib())
    assert Lib.muh_prefill.argtypes == capi.FUNCTIONS["muh_prefill"][1]
    assert Lib.muh_prefill.restype is ctypes.c_int


def test_no_bench_script_declares_signatures_itself():
    bench = os.path.join(ROOT, "bench")
    offenders = []
    for name in sorted(os.listdir(bench)):
        if name.endswith(".py") and name != "muh_capi.py":
            with open(os.path.join(bench, name)) as f:
                if re.search(r"\.(argtypes|restype)\s*=", f.read()):
                    offenders.append(name)
    assert offenders == []
