"""The Python side of the kernels' input guard, read from the sources (runs without torch, CI):
muh.ops.check_errors() exists, takes nothing and is exported; MUH_VALIDATE's values are the ones
python/src/torch_ops.cpp accepts and the README documents."""

import ast
import os
import re

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def test_check_errors_is_exported_and_takes_no_arguments():
    tree = ast.parse(_read("python", "muh", "ops.py"))
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "check_errors" in funcs
    args = funcs["check_errors"].args
    assert not args.args and not args.kwonlyargs and args.vararg is None and args.kwarg is None
    exported = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "__all__")
    assert "check_errors" in [e.value for e in exported.value.elts]
    assert "torch.ops.muh.check_input_errors()" in ast.get_source_segment(_read("python", "muh", "ops.py"),
                                                                         funcs["check_errors"])


def test_muh_validate_values_match_the_readme():
    cpp = _read("python", "src", "torch_ops.cpp")
    accepted = set(re.findall(r's == "([^"]+)"', cpp[cpp.index("validate_mode()"):]))
    assert accepted == {"0", "1", "sync"}
    assert 'check_input_errors() -> ()' in cpp
    readme = _read("README.md")
    rows = set(re.findall(r"^\| `([^`]+)`", readme[readme.index("MUH_VALIDATE"):], re.M))
    assert {"0", "1", "sync"} <= rows
