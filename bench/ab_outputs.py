#!/usr/bin/env python3
"""ab_outputs.py — are two builds of libmuh.so (base and new) bitwise the same on every forced policy?

usage: python3 bench/ab_outputs.py --base BASE/libmuh.so --new NEW/libmuh.so --out DIR [--quick] [--only TEXT...]
       python3 bench/ab_outputs.py --list [--quick] [--only TEXT...]   (the cases; needs neither a GPU nor torch)

Issue 16's proof that a refactor changes no result. Both libraries are loaded into one process
(ab_common.load_lib: RTLD_LOCAL, each binds to itself) and run every case on the same inputs
(torch, fixed seeds, made on the GPU) through the C ABI (include/muh/muh.h); the sha256 of each
output's bytes — out, and lse where the call writes it — must be equal. Cases: every dispatch
target (auto = -1, portable 0, 75, 80, 86, 89, 90, forced through force_target; one newer than
the device is skipped, saying so) x dtype (fp16, bf16, fp32) x head dim (64, 96, 128, 256) x
  prefill: a varlen batch [1, 7, 64, 200, 513] (q = k), causal and not, causal without lse,
    causal with out and lse pre-filled with NaN; q shorter than k ([1, 0, 64, 130, 77] against
    [17, 9, 300, 700, 77]: the causal mask bottom-right), causal and not; GQA 8 q / 2 kv heads
    (causal) and 6 / 1 (softmax_scale 0.25); the tail-split shapes, non-causal equal lengths —
    1 x 1024 x 8 heads (every tile in the tail) and 4 x 4096 x 16 heads (32 at hd 128: the issue's
    4k cell; whole rounds, then the tail) — once with a workspace of muh_prefill_workspace_size()
    bytes and once without. A tail shape for which neither build plans a split (workspace 0:
    the portable agent, fp32) is recorded as not split, and not run.
  decode: NHD and vLLM cache layouts, page 16 and 32, GQA 4 and 8 (2 kv heads), seq lens
    [1, 17, 300, 4096, 0] over pages in random order (unused slots of the last pages, unused pages
    and the block table's spare column hold NaN), force_splits 0 (the plan's), 1, 3, 16, with
    lse; one case without lse; a long batch [32768, 20001, 7, 32000], 32 q / 8 kv heads, with
    splits 0 and 3: its K/V as the plan counts it (4 x 32768 tokens, >= 268 MB) is above 3 x the
    L2, so the sm80 agent copies K/V without the evict-first hint (plan.cpp). Outputs are
    pre-filled with NaN.
--quick: targets auto, 0, 75, 80, 90; head dims 128, 256; no 4 x 4096 tail shape; decode page 16
only, splits 0 and 3, no long batch.
A status a build returns (MUH_NOT_COMPILED for an instance it lacks, MUH_UNSUPPORTED, ...) is
recorded; both builds must return the same. So must the workspace sizes the two report
(muh_prefill_workspace_size on the tail shapes, muh_decode_workspace_size on every decode case):
they are the plan (split or not, the split count), which sets speed. Where an output differs,
base runs the case again (is base itself repeatable there?) and max |new - base| is recorded.

Writes DIR/ab-outputs.json (every case: key, hashes, status codes, workspace bytes); prints
"N cases, M bitwise identical, ... K differ"; exits 1 if any case differs (or a call crashed),
2 on bad arguments.
"""
import argparse
import ctypes
import datetime
import hashlib
import json
import os
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab_common as ab  # noqa: E402

TARGETS = [-1, 0, 75, 80, 86, 89, 90]
QUICK_TARGETS = [-1, 0, 75, 80, 90]
DTYPE_NAMES = ["fp16", "bf16", "fp32"]
HEAD_DIMS = [64, 96, 128, 256]
QUICK_HEAD_DIMS = [128, 256]

VARLEN = [1, 7, 64, 200, 513]
Q_SHORT, K_LONG = [1, 0, 64, 130, 77], [17, 9, 300, 700, 77]
DECODE_LENS = [1, 17, 300, 4096, 0]
LONG_LENS = [32768, 20001, 7, 32000]
SPARE_PAGES = 7  # pages no sequence owns (NaN): a read through a wrong block id shows

torch = None  # imported by run_all() (--list works without it)
TORCH_DTYPES = {}  # dtype name -> torch dtype, set with torch


def target_name(t):
    return "auto" if t < 0 else f"t{t}"


def _prefill(q, k, hq, hkv, causal, lse=True, fill="zero", scale=0.0, tail=False, ws=False):
    return dict(q_lens=q, k_lens=k, hq=hq, hkv=hkv, causal=causal, lse=lse, fill=fill, scale=scale, tail=tail, ws=ws)


def prefill_shapes(hd, quick):
    """name -> prefill shape at head dim hd."""
    s = {
        "varlen-causal": _prefill(VARLEN, VARLEN, 4, 4, True),
        "varlen": _prefill(VARLEN, VARLEN, 4, 4, False),
        "varlen-causal-nolse": _prefill(VARLEN, VARLEN, 4, 4, True, lse=False),
        "varlen-causal-nanfill": _prefill(VARLEN, VARLEN, 4, 4, True, fill="nan"),
        "qshort-causal": _prefill(Q_SHORT, K_LONG, 4, 4, True),
        "qshort": _prefill(Q_SHORT, K_LONG, 4, 4, False),
        "gqa8x2-causal": _prefill(VARLEN, VARLEN, 8, 2, True),
        "gqa6x1-scale": _prefill(VARLEN, VARLEN, 6, 1, False, scale=0.25),
        "tail1x1024h8-ws": _prefill([1024], [1024], 8, 8, False, tail=True, ws=True),
        "tail1x1024h8": _prefill([1024], [1024], 8, 8, False, tail=True),
    }
    if not quick:
        h = 32 if hd == 128 else 16
        s[f"tail4x4096h{h}-ws"] = _prefill([4096] * 4, [4096] * 4, h, h, False, tail=True, ws=True)
        s[f"tail4x4096h{h}"] = _prefill([4096] * 4, [4096] * 4, h, h, False, tail=True)
    return s


def decode_variants(quick):
    """name -> decode variant (every head dim)."""
    v = {}
    for layout in ("nhd", "vllm"):
        for page in (16,) if quick else (16, 32):
            for group in (4, 8):
                for splits in (0, 3) if quick else (0, 1, 3, 16):
                    v[f"{layout}-p{page}-g{group}-s{splits}"] = dict(layout=layout, page=page, hq=2 * group, hkv=2,
                                                                    lens=DECODE_LENS, splits=splits, lse=True)
    v["nhd-p16-g4-s0-nolse"] = dict(layout="nhd", page=16, hq=8, hkv=2, lens=DECODE_LENS, splits=0, lse=False)
    if not quick:
        for splits in (0, 3):
            v[f"long-nhd-p16-g4-s{splits}"] = dict(layout="nhd", page=16, hq=32, hkv=8, lens=LONG_LENS, splits=splits,
                                                   lse=True)
    return v


def build_cases(quick):
    """Every case, in the order they run: per (dtype, head dim) the shapes, each over the targets
    (so that one shape's inputs serve every target)."""
    targets = QUICK_TARGETS if quick else TARGETS
    cases = []
    for dtype in DTYPE_NAMES:
        for hd in QUICK_HEAD_DIMS if quick else HEAD_DIMS:
            for family, shapes in (("prefill", prefill_shapes(hd, quick)), ("decode", decode_variants(quick))):
                for name, shape in shapes.items():
                    for t in targets:
                        cases.append(dict(key=f"{family}/{target_name(t)}/{dtype}/hd{hd}/{name}", family=family,
                                          target=t, dtype=dtype, hd=hd, shape=name, **shape))
    return cases


# ---- Inputs (torch, on the GPU, fixed seeds) -----------------------------------------------------

def _generator(text):
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(text.encode()))  # hash() is salted per process; crc32 is not
    return g


def _randn(shape, dtype, g):
    return torch.randn(shape, device="cuda", dtype=dtype, generator=g)


def _cu(lens):
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, device="cuda", dtype=torch.int32)


def prefill_inputs(c):
    dt = TORCH_DTYPES[c["dtype"]]
    g = _generator(f"prefill/{c['dtype']}/{c['hd']}/{c['q_lens']}/{c['k_lens']}/{c['hq']}/{c['hkv']}")
    tq, tk = sum(c["q_lens"]), sum(c["k_lens"])
    return dict(q=_randn((tq, c["hq"], c["hd"]), dt, g), k=_randn((tk, c["hkv"], c["hd"]), dt, g),
                v=_randn((tk, c["hkv"], c["hd"]), dt, g), cu_q=_cu(c["q_lens"]), cu_k=_cu(c["k_lens"]))


def decode_inputs(c):
    """q, K/V caches in the case's layout over pages in random order, block table, seq lens."""
    dt = TORCH_DTYPES[c["dtype"]]
    page, hkv, hd, lens = c["page"], c["hkv"], c["hd"], c["lens"]
    g = _generator(f"decode/{c['dtype']}/{hd}/{c['layout']}/{page}/{c['hq']}/{hkv}/{lens}")
    blocks = [(n + page - 1) // page for n in lens]
    used = sum(blocks)
    num_pages = used + SPARE_PAGES
    perm = torch.randperm(num_pages, device="cuda", generator=g).tolist()
    max_blocks = max(1, max(blocks)) + 1  # one spare column: it points at a NaN page
    table = [[perm[used]] * max_blocks for _ in lens]
    i = 0
    for s, nb in enumerate(blocks):
        for b in range(nb):
            table[s][b] = perm[i]
            i += 1
    if c["layout"] == "nhd":
        kshape = vshape = (num_pages, page, hkv, hd)
    else:  # vLLM: key [blocks, kv heads, hd / x, page, x], value [blocks, kv heads, hd, page]
        x = 16 // ab.ELEM_BYTES[c["dtype"]]
        kshape, vshape = (num_pages, hkv, hd // x, page, x), (num_pages, hkv, hd, page)
    k, v = _randn(kshape, dt, g), _randn(vshape, dt, g)
    nan = float("nan")
    for p in perm[used:]:
        k[p], v[p] = nan, nan
    for s, n in enumerate(lens):
        if n % page:  # the last page's slots past the sequence's end
            p = table[s][blocks[s] - 1]
            if c["layout"] == "nhd":
                k[p, n % page:], v[p, n % page:] = nan, nan
            else:
                k[p, :, :, n % page:], v[p, :, :, n % page:] = nan, nan
    return dict(q=_randn((len(lens), c["hq"], hd), dt, g), k=k, v=v, num_pages=num_pages, max_blocks=max_blocks,
                table=torch.tensor(table, device="cuda", dtype=torch.int32),
                lens=torch.tensor(lens, device="cuda", dtype=torch.int32))


class InputCache:
    """The inputs of the last shape: consecutive cases of one shape (the targets, the ws / no-ws
    pair) share them."""

    def __init__(self):
        self.key, self.value = None, None

    def get(self, c):
        fields = ("q_lens", "k_lens", "hq", "hkv") if c["family"] == "prefill" else ("layout", "page", "hq", "hkv", "lens")
        key = (c["family"], c["dtype"], c["hd"]) + tuple(str(c[f]) for f in fields)
        if key != self.key:
            self.key, self.value = None, None  # free the last shape's tensors first
            self.value = prefill_inputs(c) if c["family"] == "prefill" else decode_inputs(c)
            self.key = key
        return self.value


# ---- One library on one case ---------------------------------------------------------------------

def plan_side(lib, c):
    """The workspace the library asks for (its plan), where the case has one to ask about."""
    if c["family"] == "prefill":
        if not c["tail"]:
            return {}
        b, n = len(c["q_lens"]), c["q_lens"][0]
        rc, nbytes, msg = ab.prefill_workspace(lib, c["dtype"], b, b * n, b * n, n, n, c["hq"], c["hkv"], c["hd"],
                                               c["causal"], c["target"])
    else:
        rc, nbytes, msg = ab.decode_workspace(lib, c["dtype"], c["layout"], len(c["lens"]), c["hq"], c["hkv"], c["hd"],
                                              c["page"], max(c["lens"]), c["target"], c["splits"])
    return dict(ws_rc=rc, ws_bytes=nbytes, ws_msg=msg)


def _filled(shape, dtype, fill):
    return torch.full(shape, float("nan") if fill == "nan" else 0.0, device="cuda", dtype=dtype)


def _workspace(nbytes):
    # 0xff bytes: NaN as fp32, so a partial read before it is written shows
    return torch.full((nbytes,), 255, device="cuda", dtype=torch.uint8) if nbytes > 0 else None


def run_side(lib, c, inp, plan):
    """Runs the case on one library: (rc, message, [out, lse or None]), synchronized."""
    stream = torch.cuda.current_stream().cuda_stream
    dt = TORCH_DTYPES[c["dtype"]]
    ws_bytes = plan.get("ws_bytes", 0) if (c["family"] == "decode" or c["ws"]) else 0
    ws = _workspace(ws_bytes)
    if c["family"] == "prefill":
        tq, hq = inp["q"].shape[0], c["hq"]
        out = _filled(inp["q"].shape, dt, c["fill"])
        lse = _filled((hq, tq), torch.float32, c["fill"]) if c["lse"] else None
        rc = lib.muh_prefill(ab.DTYPES[c["dtype"]], inp["q"].data_ptr(), inp["k"].data_ptr(), inp["v"].data_ptr(),
                             out.data_ptr(), ab.ptr(lse), inp["cu_q"].data_ptr(), inp["cu_k"].data_ptr(),
                             len(c["q_lens"]), tq, inp["k"].shape[0], max(c["q_lens"]), max(c["k_lens"]), hq, c["hkv"],
                             c["hd"], c["scale"], int(c["causal"]), ab.ptr(ws), ws_bytes, c["target"], stream)
    else:
        s, hq = len(c["lens"]), c["hq"]
        out = _filled((s, hq, c["hd"]), dt, "nan")
        lse = _filled((s, hq), torch.float32, "nan") if c["lse"] else None
        rc = lib.muh_paged_decode(ab.DTYPES[c["dtype"]], ab.LAYOUTS[c["layout"]], inp["q"].data_ptr(),
                                  inp["k"].data_ptr(), inp["v"].data_ptr(), out.data_ptr(), ab.ptr(lse),
                                  inp["table"].data_ptr(), inp["lens"].data_ptr(), s, hq, c["hkv"], c["hd"], c["page"],
                                  inp["num_pages"], inp["max_blocks"], max(c["lens"]), 0.0, ab.ptr(ws), ws_bytes,
                                  c["target"], c["splits"], 0, stream)
    msg = ab.last_error(lib, rc)
    torch.cuda.synchronize()  # a fault raises here, charged to this library
    return rc, msg, [out, lse]


def sha256(t):
    if t is None:
        return None
    h = t.contiguous().cpu()
    n = h.numel() * h.element_size()
    return hashlib.sha256((ctypes.c_char * n).from_address(h.data_ptr()) if n else b"").hexdigest()


def diff_stats(a, b):
    """Where a and b (same shape and dtype) differ: elements, NaN in one only, max |a - b| over the rest."""
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32}[a.element_size()]
    same = a.view(ints) == b.view(ints)
    a64, b64 = a.double(), b.double()
    nan_a, nan_b = torch.isnan(a64), torch.isnan(b64)
    rest = ~same & ~nan_a & ~nan_b
    d = (a64 - b64).abs()[rest]
    return dict(elements=int((~same).sum()), of=a.numel(), nan_in_one=int((nan_a != nan_b).sum()),
                max_abs=float(d.max()) if d.numel() else 0.0)


# ---- A case on both --------------------------------------------------------------------------------

def compare_case(c, libs, inputs):
    """Runs c on base and new; the case's record for the JSON."""
    rec = {k: c[k] for k in ("key", "family", "target", "dtype", "hd", "shape")}
    plans = {n: plan_side(lib, c) for n, lib in libs.items()}
    for n in libs:
        rec[n] = dict(plans[n])
    problems = []
    if plans["base"].get("ws_rc") != plans["new"].get("ws_rc"):
        problems.append("workspace query status")
    elif plans["base"].get("ws_bytes") != plans["new"].get("ws_bytes"):
        problems.append("workspace bytes")
    if c["family"] == "prefill" and c["tail"] and not problems and plans["base"]["ws_rc"] == 0 \
            and plans["base"]["ws_bytes"] == 0:
        rec["verdict"] = "not_split"  # neither plans a split: the no-workspace shape is the same call
        return rec
    inp = inputs.get(c)
    runs = {}
    for n, lib in libs.items():
        rc, msg, tensors = run_side(lib, c, inp, plans[n])
        runs[n] = tensors
        rec[n].update(rc=rc, status=ab.status_name(rc), msg=msg, out_sha256=sha256(tensors[0]) if rc == 0 else None,
                      lse_sha256=sha256(tensors[1]) if rc == 0 else None)
    b, nw = rec["base"], rec["new"]
    if b["rc"] != nw["rc"]:
        problems.append("status")
    elif b["rc"] == 0:
        for i, name in enumerate(("out", "lse")):
            if b[f"{name}_sha256"] != nw[f"{name}_sha256"]:
                problems.append(name)
                rec.setdefault("diff", {})[name] = diff_stats(runs["base"][i], runs["new"][i])
        if "diff" in rec:  # is base itself repeatable here?
            _, _, again = run_side(libs["base"], c, inp, plans["base"])
            rec["base_repeatable"] = sha256(again[0]) == b["out_sha256"] and sha256(again[1]) == b["lse_sha256"]
    rec["problems"] = problems
    rec["verdict"] = "differ" if problems else ("identical" if b["rc"] == 0 else "both_refused")
    return rec


def summarize(records, skipped_targets, cc):
    count = {}
    for r in records:
        count[r["verdict"]] = count.get(r["verdict"], 0) + 1
    n = len(records) - count.get("skipped", 0)
    differ = [r for r in records if r["verdict"] in ("differ", "crash")]
    line = (f"{n} cases, {count.get('identical', 0)} bitwise identical, {count.get('both_refused', 0)} refused by both "
            f"with the same status, {count.get('not_split', 0)} tail shapes split by neither (not run), "
            f"{len(differ)} differ")
    if differ:
        line += ": " + ", ".join(f"{r['key']} ({', '.join(r.get('problems', ['crash']))})" for r in differ[:10])
        line += f" ... and {len(differ) - 10} more" if len(differ) > 10 else ""
    lines = [line]
    if differ:
        groups = {}
        for r in differ:
            g = f"{r['family']} {target_name(r['target'])} {r['dtype']} ({', '.join(r.get('problems', ['crash']))})"
            groups[g] = groups.get(g, 0) + 1
        lines.append("differ by family, target, dtype (what): " +
                     "; ".join(f"{g}: {n}" for g, n in sorted(groups.items(), key=lambda x: -x[1])))
    if skipped_targets:
        lines.append(f"skipped: target {', '.join(map(str, skipped_targets))} (newer than the device, sm_{cc}): "
                     f"{count.get('skipped', 0)} cases")
    split = sum(1 for r in records if r["family"] == "prefill" and r["base"].get("ws_bytes"))
    lines.append(f"tail split planned (workspace > 0) in {split} prefill cases")
    for r in differ[:10]:
        for name, d in r.get("diff", {}).items():
            lines.append(f"  {r['key']} {name}: {d['elements']} of {d['of']} elements differ, max |new - base| "
                         f"{d['max_abs']:.3g}, NaN in one only {d['nan_in_one']}; base repeatable: "
                         f"{r.get('base_repeatable')}")
        if "status" in r.get("problems", []) or "workspace" in " ".join(r.get("problems", [])):
            lines.append(f"  {r['key']}: base {r['base'].get('status')} ws {r['base'].get('ws_bytes')} "
                         f"'{r['base'].get('msg', '')}' | new {r['new'].get('status')} ws {r['new'].get('ws_bytes')} "
                         f"'{r['new'].get('msg', '')}'")
    return lines, bool(differ)


def run_all(args, cases):
    global torch, TORCH_DTYPES
    try:
        import torch as _torch
    except ImportError as e:
        sys.exit(f"ab_outputs: cannot import torch ({e}); run it with a Python that has torch with CUDA")
    torch = _torch
    TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
    if not torch.cuda.is_available():
        sys.exit("ab_outputs: no CUDA device visible to torch")
    libs = {"base": ab.load_lib(args.base), "new": ab.load_lib(args.new)}
    major, minor = torch.cuda.get_device_capability()
    cc = 10 * major + minor
    skipped_targets = sorted({c["target"] for c in cases if c["target"] > cc})
    dev = torch.cuda.get_device_name()
    print(f"ab_outputs: {len(cases)} cases on {dev} (sm_{cc}); base {args.base} ({libs['base'].muh_version().decode()}),"
          f" new {args.new} ({libs['new'].muh_version().decode()})", flush=True)
    inputs, records = InputCache(), []
    t0 = time.time()
    group, g0, crashed = None, time.time(), False
    for c in cases:
        if (c["family"], c["dtype"], c["hd"]) != group:
            _progress(records, group, g0)
            group, g0 = (c["family"], c["dtype"], c["hd"]), time.time()
        if c["target"] > cc:
            records.append({k: c[k] for k in ("key", "family", "target", "dtype", "hd", "shape")} |
                           dict(verdict="skipped", reason=f"target newer than the device (sm_{cc})", base={}, new={}))
            continue
        try:
            records.append(compare_case(c, libs, inputs))
        except RuntimeError as e:  # a device fault: the context is gone, nothing after it can run
            records.append({k: c[k] for k in ("key", "family", "target", "dtype", "hd", "shape")} |
                           dict(verdict="crash", problems=["crash"], error=str(e)[:500], base={}, new={}))
            print(f"ab_outputs: {c['key']} crashed ({str(e)[:200]}); stopping: the CUDA context is lost", flush=True)
            crashed = True
            break
    _progress(records, group, g0)
    lines, differ = summarize(records, skipped_targets, cc)
    if crashed:
        lines.insert(0, f"CRASHED at {records[-1]['key']}: {len(cases) - len(records)} cases not run")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "ab-outputs.json")
    with open(path, "w") as fh:
        json.dump(dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), device=dev,
                       compute_capability=cc, torch=torch.__version__, quick=args.quick,
                       base=dict(path=os.path.abspath(args.base), version=libs["base"].muh_version().decode()),
                       new=dict(path=os.path.abspath(args.new), version=libs["new"].muh_version().decode()),
                       elapsed_s=round(time.time() - t0, 1), summary=lines, skipped_targets=skipped_targets,
                       cases=records), fh, indent=1)
    print("\n".join(lines))
    print(f"wrote {path} ({time.time() - t0:.0f} s)")
    return 1 if differ or crashed else 0


def _progress(records, group, g0):
    if group is None:
        return
    mine = [r for r in records if (r["family"], r["dtype"], r["hd"]) == group]
    bad = sum(1 for r in mine if r["verdict"] in ("differ", "crash"))
    print(f"  {group[0]} {group[1]} hd{group[2]}: {len(mine)} cases, {bad} differ ({time.time() - g0:.1f} s)",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="the base build's libmuh.so")
    ap.add_argument("--new", help="the new build's libmuh.so")
    ap.add_argument("--out", help="directory for ab-outputs.json")
    ap.add_argument("--quick", action="store_true", help="a smaller set of cases")
    ap.add_argument("--list", action="store_true", help="print the cases and exit (no GPU, no torch)")
    ap.add_argument("--only", nargs="+", metavar="TEXT",
                    help="only the cases whose key contains one of these (e.g. prefill/t90/ /hd256/tail)")
    args = ap.parse_args()
    cases = build_cases(args.quick)
    if args.only:
        cases = [c for c in cases if any(t in c["key"] for t in args.only)]
        if not cases:
            ap.error(f"--only {' '.join(args.only)}: no case matches")
    if args.list:
        for c in cases:
            print(c["key"])
        fam = {f: sum(1 for c in cases if c["family"] == f) for f in ("prefill", "decode")}
        print(f"{len(cases)} cases ({fam['prefill']} prefill, {fam['decode']} decode); targets "
              f"{', '.join(map(str, QUICK_TARGETS if args.quick else TARGETS))} (a target newer than the device is "
              f"skipped when run)")
        return 0
    for name in ("base", "new", "out"):
        if not getattr(args, name):
            ap.error(f"--{name} is required (or --list)")
    for name in ("base", "new"):
        if not os.path.isfile(getattr(args, name)):
            ap.error(f"--{name} {getattr(args, name)}: no such file")
    if os.path.samefile(args.base, args.new):
        ap.error("--base and --new are the same file (one library loaded twice is one handle)")
    return run_all(args, cases)


if __name__ == "__main__":
    sys.exit(main())
