#!/usr/bin/env python3
"""check_uniform_registers.py LIBRARY — every uniform register a kernel reads, it writes.
(--listing FILE reads a saved `cuobjdump -sass` listing; --expect N: pass when exactly N functions
are flagged — the self-check on tests/sass/fixtures.)

Why: ptxas 13.0 (V13.0.88) compiled the evict-first cp.async copies of the sm80 decode agent's
fp8 kernels at sm_90 as `LDGSTS [R + UR0], desc[UR1][...]` with UR0 and UR1 written nowhere in
the kernel — "an illegal instruction" on an H100 (`muh verify --quick`, 2026-12-07); ptxas 13.5
does not (include/muh/kernels/decode_sm80.cuh, cp_async16_generic_dst, works around it). The
symptom is visible in the SASS without a GPU: a uniform register that some instruction reads and
none writes. This check runs over every function of the built library's SASS (cuobjdump -sass),
so a toolkit or a source change that brings the pattern back fails CI, not a user's GPU.

Written: the first operand of a uniform-datapath instruction (U*, S2UR, R2UR, ...) that names a
UR — two registers for .64 / .WIDE forms, four for .128. Read: every other UR operand; a memory
descriptor desc[URn] reads URn and URn+1. URZ is not a register. Exit 0 when every function is
clean (or N of them are not, --expect N), 1 listing the functions and instructions otherwise,
2 when the SASS cannot be read.
"""
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

# Uniform instructions whose first UR operand is read, not written (compares write UP predicates;
# the TMA / bulk-copy family takes its addresses and descriptors in URs).
READS_FIRST = ("UISETP", "UPSETP", "UTMA", "UBLKCP", "UBLKRED", "UBLKPF", "UCGABAR", "USETMAXREG")

INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z0-9_.]+)\s*([^;]*);")
UR = re.compile(r"\bUR(\d+)\b")


def find_cuobjdump():
    """cuobjdump on PATH, in the CUDA toolkit, or where scripts/common.sh's muh_sass_tools puts it."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        path = os.path.join(root, "bin", "cuobjdump")
        if root and os.access(path, os.X_OK):
            return path
    cache = os.environ.get("MUH_SASS_TOOLS", os.path.expanduser("~/.cache/muh/sass-tools"))
    for path in sorted(glob.glob(os.path.join(cache, "nvidia", "cu*", "bin", "cuobjdump"))):
        if os.access(path, os.X_OK):
            return path
    return None


def unwritten_reads(lines):
    """Yields (function, register, instruction) for each UR a function reads and never writes."""
    function, written, reads = None, set(), collections.defaultdict(list)

    def finish():
        if function is not None:
            for reg in sorted(reads):
                if reg not in written:
                    yield function, reg, reads[reg][0]

    for line in lines:
        if "Function :" in line:
            yield from finish()
            function, written, reads = line.split("Function :", 1)[1].strip(), set(), collections.defaultdict(list)
            continue
        m = INSTRUCTION.search(line)
        if not m or function is None:
            continue
        opcode, args = m.group(1), m.group(2)
        operands = [a.strip() for a in args.split(",")]
        first_written = bool(operands) and re.fullmatch(r"UR\d+", operands[0]) and not opcode.startswith(READS_FIRST)
        if first_written:
            n = int(operands[0][2:])
            width = 4 if ".128" in opcode else 2 if (".64" in opcode or ".WIDE" in opcode) else 1
            written.update(range(n, n + width))
        for i, operand in enumerate(operands):
            if i == 0 and first_written:
                continue
            for reg in UR.findall(operand):
                reads[int(reg)].append(f"{opcode} {args}".strip())
            for reg in re.findall(r"desc\[UR(\d+)\]", operand):
                reads[int(reg) + 1].append(f"{opcode} {args}".strip())
    yield from finish()


def main():
    args = sys.argv[1:]
    expect = 0
    if len(args) >= 2 and args[-2] == "--expect":  # the self-check: exactly N functions flagged
        expect, args = int(args[-1]), args[:-2]
    listing = len(args) == 2 and args[0] == "--listing"  # a saved `cuobjdump -sass` listing
    if len(args) != (2 if listing else 1):
        print("usage: check_uniform_registers.py LIBRARY | --listing SASS_TEXT [--expect N]", file=sys.stderr)
        return 2
    source = args[-1]
    if listing:
        proc, stream = None, open(source)
    else:
        tool = find_cuobjdump()
        if tool is None:
            print("check_uniform_registers: cuobjdump not found (scripts/common.sh's muh_sass_tools fetches it; "
                  "scripts/test.sh runs that)", file=sys.stderr)
            return 2
        proc = subprocess.Popen([tool, "-sass", source], stdout=subprocess.PIPE, text=True)
        stream = proc.stdout
    functions = 0

    def counted(lines):
        nonlocal functions
        for line in lines:
            if "Function :" in line:
                functions += 1
            yield line

    bad = list(unwritten_reads(counted(stream)))
    status = proc.wait() if proc else 0
    if status != 0 or functions == 0:
        print(f"check_uniform_registers: no SASS read from {source} (cuobjdump exit {status})", file=sys.stderr)
        return 2
    names = sorted({f for f, _, _ in bad})
    print(f"{functions} functions of {source}: {len(names)} read a uniform register none of their "
          f"instructions writes (expected {expect})")
    for name in names:
        regs = [(r, ins) for f, r, ins in bad if f == name]
        print(f"  {name}\n    " + ", ".join(f"UR{r}" for r, _ in regs) + f" — e.g. {regs[0][1]}")
    return 0 if len(names) == expect else 1


if __name__ == "__main__":
    sys.exit(main())
