#!/usr/bin/env python3
"""ab_bench_decode.py BASE_DIR NEW_DIR [--out FILE] — two `muh bench decode` runs, cell by cell.

Reads the decode-*.json that `muh bench decode --out DIR` wrote in each directory (the base
build's and the new build's, run one after the other in one device call) and prints, per cell,
new / base of the median µs and the plan (splits, partition tokens, CTAs, L2 evict-first) where it
differs, then the largest deviation of each part (grid, other page placements, forced splits).
The two runs are separate processes, so their ratio carries the drift between them; each grid
cell's ratio is also given against its size-matched read floor (median ÷ floor, measured in the
same run), which cancels a change of memory speed between the runs. Needs no GPU and no torch.
Exit 2 when a directory has no decode JSON.
"""
import argparse
import glob
import json
import os
import sys

PARTS = [("cells", "grid"), ("cells_other_layouts", "layouts"), ("forced_splits", "forced splits")]
PLAN = ("splits", "partition_tokens", "ctas", "l2_evict_first")


def load(d):
    files = sorted(glob.glob(os.path.join(d, "decode-*.json")))
    if not files:
        print(f"ab_bench_decode: no decode-*.json in {d}", file=sys.stderr)
        sys.exit(2)
    with open(files[-1]) as fh:
        return files[-1], json.load(fh)


def key(c, forced):
    k = (c["config"], c["layout"], c["batch"], c["kv_len"])
    return k + (c["splits"],) if forced else k


def compare(base, new):
    rows, lines = [], []
    for part, label in PARTS:
        b = {key(c, part == "forced_splits"): c for c in base.get(part, [])}
        n = {key(c, part == "forced_splits"): c for c in new.get(part, [])}
        common = [k for k in b if k in n]
        missing = len(b) + len(n) - 2 * len(common)
        mine = []
        for k in common:
            cb, cn = b[k], n[k]
            r = dict(part=label, config=cb["config"], layout=cb["layout"], batch=cb["batch"], kv_len=cb["kv_len"],
                     base_us=cb["median_us"], new_us=cn["median_us"], new_over_base=cn["median_us"] / cb["median_us"],
                     plan_differs=[f for f in PLAN if cb.get(f) != cn.get(f)])
            if part == "forced_splits":
                r["forced_splits"] = cb["splits"]
            if cb.get("read_floor_us", 0) > 0 and cn.get("read_floor_us", 0) > 0:
                r["floor_ratio_new_over_base"] = (cn["median_us"] / cn["read_floor_us"]) / (
                    cb["median_us"] / cb["read_floor_us"])
            mine.append(r)
        rows += mine
        if not mine:
            continue
        w = max(mine, key=lambda r: abs(r["new_over_base"] - 1))
        line = (f"muh bench decode, {label}: {len(mine)} cells, largest deviation new/base {w['new_over_base']:.4f} "
                f"({100 * (w['new_over_base'] - 1):+.2f} %) at {w['config']} {w['layout']} b{w['batch']} kv{w['kv_len']}"
                + (f" splits {w['forced_splits']}" if "forced_splits" in w else ""))
        fl = [r for r in mine if "floor_ratio_new_over_base" in r]
        if fl:
            wf = max(fl, key=lambda r: abs(r["floor_ratio_new_over_base"] - 1))
            line += f"; against the read floor: largest {wf['floor_ratio_new_over_base']:.4f}"
        plan = [r for r in mine if r["plan_differs"]]
        line += f"; plan differs in {len(plan)}" if plan else "; same plan everywhere"
        line += f"; {missing} cells in one run only" if missing else ""
        lines.append(line)
    return rows, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base_dir")
    ap.add_argument("new_dir")
    ap.add_argument("--out", help="write the per-cell comparison as JSON here")
    args = ap.parse_args()
    fb, base = load(args.base_dir)
    fn, new = load(args.new_dir)
    rows, lines = compare(base, new)
    for r in rows:
        if r["part"] == "grid" or r["plan_differs"]:
            extra = f" against the floor {r['floor_ratio_new_over_base']:.4f}" if "floor_ratio_new_over_base" in r else ""
            plan = f"  PLAN DIFFERS: {', '.join(r['plan_differs'])}" if r["plan_differs"] else ""
            print(f"  {r['part']:6s} {r['config']} {r['layout']} b{r['batch']:<3d} kv{r['kv_len']:<5d}: "
                  f"base {r['base_us']:8.1f} us  new {r['new_us']:8.1f} us  new/base {r['new_over_base']:.4f}{extra}{plan}")
    print(f"ceiling: base {base.get('ceiling_tbps', 0):.3f} TB/s, new {new.get('ceiling_tbps', 0):.3f} TB/s")
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(dict(base=fb, new=fn, summary=lines, cells=rows), fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
