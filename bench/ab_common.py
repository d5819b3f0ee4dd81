"""ab_common.py — two builds of libmuh.so in one process, for the A/B scripts (ab_outputs.py,
ab_speed.py): loading them side by side, and the C ABI (include/muh/muh.h) calls both make.

Nothing here imports torch at import time, so `ab_outputs.py --list` runs on a machine without it.
"""
import atexit
import ctypes
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

if HERE not in sys.path:
    sys.path.insert(0, HERE)
import muh_capi as capi  # noqa: E402

DTYPES, LAYOUTS, STATUS = capi.DTYPES, capi.LAYOUTS, capi.STATUS  # muh.h's enums
ELEM_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
status_name = capi.status_name


def load_lib(path):
    """libmuh.so at `path`, with the argument types of every C ABI call set.

    ctypes.CDLL opens it with dlopen(RTLD_LOCAL) (its mode on Linux, checked here): the library's
    symbols stay out of the process's global scope, so each library's internal calls (muh_prefill
    -> muh::prefill -> its instances, its function-local statics, its thread-local last error)
    bind to itself, never to the other build's symbols of the same name. Both share the one CUDA
    runtime and context, so torch's device pointers are valid in both. The same path twice would
    give the same handle; a second copy of one build must be loaded from another path
    (copy_lib)."""
    if ctypes.DEFAULT_MODE != os.RTLD_LOCAL:
        raise SystemExit("ab_common: ctypes does not open libraries RTLD_LOCAL here; the two builds would bind "
                         "to each other's symbols")
    lib = capi.load(path)  # every function of muh.h, typed from the header
    lib.ab_path = os.path.abspath(path)
    return lib


def copy_lib(path):
    """A copy of `path` in a fresh temporary directory (so that one build can be loaded twice:
    base against base is the noise estimate). The directory is removed when the process exits."""
    d = tempfile.mkdtemp(prefix="muh-ab-copy-")
    atexit.register(shutil.rmtree, d, True)
    dst = os.path.join(d, os.path.basename(path))
    shutil.copy2(path, dst)
    return dst


last_error = capi.last_error


def prefill_workspace(lib, dtype, batch, total_q, total_k, max_q, max_k, hq, hkv, hd, causal, target):
    """(rc, bytes, message) of muh_prefill_workspace_size."""
    n = ctypes.c_size_t(0)
    rc = lib.muh_prefill_workspace_size(DTYPES[dtype], batch, total_q, total_k, max_q, max_k, hq, hkv, hd,
                                        int(causal), target, ctypes.byref(n))
    return rc, n.value if rc == 0 else 0, last_error(lib, rc)


def decode_workspace(lib, dtype, layout, num_seqs, hq, hkv, hd, page, max_len, target, splits, cuda_graph=0):
    """(rc, bytes, message) of muh_decode_workspace_size."""
    n = ctypes.c_size_t(0)
    rc = lib.muh_decode_workspace_size(DTYPES[dtype], LAYOUTS[layout], num_seqs, hq, hkv, hd, page, max_len, target,
                                       splits, cuda_graph, ctypes.byref(n))
    return rc, n.value if rc == 0 else 0, last_error(lib, rc)


def ptr(t):
    """A tensor's device pointer for the C ABI (None for no tensor)."""
    return None if t is None else t.data_ptr()
