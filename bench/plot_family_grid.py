#!/usr/bin/env python3
"""Speedup of the best family variant per shape against log2(M*N*K), from the CSV of
`kernelrl bench --families ...` (bench/gpu_family_grid.sh), like CUDA-L2's Figure 3.

    .venv/bin/python bench/plot_family_grid.py family_grid.csv docs/family_grid.png \
        [--baseline lt-auto-max] [--title "..."]

One point per shape (colour: the family of the fastest passing variant), the running median
over windows of 2 in log2(MNK), and the line at 1 (parity with the baseline). Shapes without a
passing variant are drawn at 0 in grey. Needs matplotlib (scripts/setup.sh --test installs it).
"""
import argparse
import csv
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--baseline", default="lt-auto-max")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    col = "speedup_" + a.baseline
    if not rows or col not in rows[0]:
        sys.exit(f"plot_family_grid: {a.csv} has no column {col} (not a family sweep CSV?)")
    by_family, failed = {}, []
    pts = []
    for r in rows:
        x = float(r["log2_mnk"])
        if r[col]:
            y = float(r[col])
            by_family.setdefault(r["best_family"], []).append((x, y))
            pts.append((x, y))
        else:
            failed.append(x)
    if not pts:
        sys.exit(f"plot_family_grid: no shape in {a.csv} has a passing variant")
    fig, ax = plt.subplots(figsize=(9, 5), dpi=130)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown"]
    for i, (fam, p) in enumerate(sorted(by_family.items())):
        ax.scatter([q[0] for q in p], [q[1] for q in p], s=9, alpha=0.6, color=colors[i % len(colors)],
                   label=f"{fam} best ({len(p)} shapes)")
    if failed:
        ax.scatter(failed, [0] * len(failed), s=9, color="grey", marker="x",
                   label=f"no passing variant ({len(failed)})")
    pts.sort()
    xs = sorted({round(x) for x, _ in pts})
    med = []
    for c in xs:
        w = sorted(y for x, y in pts if abs(x - c) <= 1)
        med.append(w[len(w) // 2] if len(w) % 2 else 0.5 * (w[len(w) // 2 - 1] + w[len(w) // 2]))
    ax.plot(xs, med, color="black", lw=1.5, label="running median")
    ax.axhline(1.0, color="red", lw=1, ls="--")
    ys = [y for _, y in pts]
    mean = sum(ys) / len(ys)
    geo = math.exp(sum(math.log(y) for y in ys) / len(ys))
    wins = sum(y > 1 for y in ys)
    ax.set_xlabel("log2(M·N·K)")
    ax.set_ylabel(f"speedup over {a.baseline} (device time)")
    ax.set_title(a.title or f"Best Hopper family variant per shape vs {a.baseline}: "
                 f"mean {mean:.3f}, geomean {geo:.3f}, wins {wins}/{len(ys)}")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(a.png)
    print(f"{a.png}: {len(rows)} shapes, mean {mean:.3f}, geomean {geo:.3f}, wins {wins}")


if __name__ == "__main__":
    main()
