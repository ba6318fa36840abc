#!/usr/bin/env python3
"""How much the family sweep leaves inside hgemm_small at small shapes (issue 25).

The family grid (docs/data/family_grid_h100.csv, `bash bench/gpu_family_grid.sh`) measured
PER_FAMILY=3 variants per family per shape, picked by the portfolio's cost model
(data/family_portfolio.h), and names the fastest hgemm_small variant of those it measured. The
small-shapes calibration run (docs/data/small_bench_h100.csv, run "calibration", issue 24,
`bash bench/gpu_small_profile.sh`) measured 26-38 hgemm_small variants (nn) at 69 shapes. At
the shapes both measured, inside the calibration run alone (one timer, one session):
  ratio = time of the sweep's hgemm_small pick / time of the fastest hgemm_small variant.
A ratio of 1.02 or more means a variant other than the one the sweep kept was 2 % faster there:
one the sweep's cost model did not pick for that shape (or picked and measured slower in its own
run; the grid keeps only the fastest of its picks, so the two are not told apart here). Either
way a kernel inside the family that a policy choosing its parameters could find. Comparing the two runs' numbers directly is not done: the same
variant differs by ~2 % between them (64x64x64: 1.711 us and 1.723 us against lt-auto 2.476 and
2.445 us).

  python3 bench/sweep_headroom.py [--grid CSV] [--small CSV] [--table]
"""
import argparse
import collections
import csv
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default=ROOT / "docs/data/family_grid_h100.csv")
    ap.add_argument("--small", default=ROOT / "docs/data/small_bench_h100.csv")
    ap.add_argument("--table", action="store_true", help="print every shape")
    a = ap.parse_args()

    cal = collections.defaultdict(dict)
    for r in csv.DictReader(open(a.small)):
        if r["run"] == "calibration" and r["status"] == "ok":
            cal[(int(r["M"]), int(r["N"]), int(r["K"]), r["layout"])][r["contender"]] = float(r["device_us"])
    grid = {(int(r["M"]), int(r["N"]), int(r["K"]), r["layout"]): r for r in csv.DictReader(open(a.grid))}

    def calibration_name(v):  # hgemm_small_nn_accf32_bm32_bn32_bk64_stages4_splitk1_epi1_pdl1
        m = re.fullmatch(r"hgemm_small_(\w\w)_accf32_bm(\d+)_bn(\d+)_bk(\d+)_stages(\d+)_splitk(\d+)_epi(\d)_pdl(\d)", v)
        if not m:
            return None
        lay, bm, bn, bk, st, sk, epi, pdl = m.groups()
        return f"small_m{bm}n{bn}k{bk}_s{st}_sk{sk}_e{epi}_pdl{pdl}_{lay}"

    rows, unmatched = [], 0
    for key, times in sorted(cal.items()):
        small = {c: t for c, t in times.items() if c.startswith("small_")}
        if key not in grid or not small:
            continue
        g = grid[key]
        pick = calibration_name(g["hgemm_small_variant"])
        if pick not in small:
            unmatched += 1
            continue
        best = min(small, key=small.get)
        rows.append((key, len(small), g["best_family"], pick, small[pick], best, small[best],
                     small[pick] / small[best]))
    if not rows:
        raise SystemExit("sweep_headroom: no shape is in both files")

    if a.table:
        print("| shape | variants measured | sweep's best family | sweep's hgemm_small pick (us) | "
              "fastest hgemm_small (us) | ratio |")
        print("|---|---|---|---|---|---|")
        for key, n, fam, pick, tp, best, tb, r in rows:
            print(f"| {key[0]}x{key[1]}x{key[2]} | {n} | {fam} | {pick} ({tp:.3f}) | {best} ({tb:.3f}) | {r:.3f} |")
        print()
    print(f"{len(rows)} shapes in both runs ({unmatched} more where the sweep's hgemm_small pick "
          f"was not among the calibration's variants)")
    for label, sub in (("all", rows), ("where hgemm_small was the sweep's best family",
                                        [r for r in rows if r[2] == "hgemm_small"])):
        ratios = [r[-1] for r in sub]
        print(f"{label} ({len(sub)}): a variant the sweep did not keep was faster than its pick by "
              f">= 2 % at {sum(x >= 1.02 for x in ratios)}, >= 5 % at {sum(x >= 1.05 for x in ratios)}; "
              f"median ratio {statistics.median(ratios):.3f}, max {max(ratios):.3f}")


if __name__ == "__main__":
    main()
