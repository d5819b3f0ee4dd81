#!/usr/bin/env python3
"""plot_decode.py — bandwidth per cell of `muh bench decode`, as a PNG.

    python3 bench/plot_decode.py bench/results/decode-h200-DATE.csv [out.png]

One panel per configuration (hd128 32q/8kv, hd256 16q/4kv): for each batch, muh's effective
bandwidth (bars) and FlashInfer's figure from the issue (markers) over kv_len, with the
streaming-read ceiling measured in the same run as a line. Needs matplotlib (present next to
PyTorch on the H200 machine).
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else path.rsplit(".", 1)[0] + ".png"
    rows = [r for r in csv.DictReader(open(path)) if r["kind"] == "grid"]
    if not rows:
        print(f"plot_decode.py: no grid rows in {path}", file=sys.stderr)
        return 1
    ceiling = float(rows[0]["ceiling_tbps"])
    configs = sorted({r["config"] for r in rows}, key=lambda c: int(c.split("_")[0][2:]))
    lens = sorted({int(r["kv_len"]) for r in rows})
    batches = sorted({int(r["batch"]) for r in rows})
    cell = defaultdict(dict)
    for r in rows:
        cell[r["config"]][(int(r["batch"]), int(r["kv_len"]))] = r

    fig, axes = plt.subplots(1, len(configs), figsize=(7 * len(configs), 4.8), sharey=True)
    if len(configs) == 1:
        axes = [axes]
    width = 0.8 / len(batches)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, cfg in zip(axes, configs):
        for bi, b in enumerate(batches):
            xs = [li + (bi - (len(batches) - 1) / 2) * width for li in range(len(lens))]
            muh = [float(cell[cfg][(b, n)]["tbps"]) for n in lens]
            fi = [float(cell[cfg][(b, n)]["flashinfer_tbps"]) for n in lens]
            ax.bar(xs, muh, width * 0.95, color=colors[bi % len(colors)], label=f"muh, batch {b}")
            ax.plot(xs, fi, "k_", markersize=14, markeredgewidth=2, label="FlashInfer (issue)" if bi == 0 else None)
            for x, v in zip(xs, muh):
                ax.text(x, v + 0.05, f"{v:.2f}", ha="center", va="bottom", fontsize=6, rotation=90)
        ax.axhline(ceiling, color="gray", linestyle="--", linewidth=1, label=f"streaming read {ceiling:.2f} TB/s")
        ax.set_xticks(range(len(lens)))
        ax.set_xticklabels([str(n) for n in lens])
        ax.set_xlabel("kv_len (tokens per sequence)")
        ax.set_title(f"paged decode, bf16, {cfg.replace('_', ' ')}, page 16, cold L2")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("effective bandwidth (TB/s)")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
