#!/usr/bin/env python3
"""Merge family grid sweeps made in different runs into one per-shape table (issue 24).

    python3 bench/merge_family_grids.py BASE.csv NEW.csv [NEW2.csv ...] --out MERGED.csv

Each input is a CSV of `kernelrl bench --families ...` (one row per shape, columns per family).
A family's speedup on a shape is its best variant's time against the lt-auto-max (and lt-auto)
measured in the same evaluation, in the same interleaved rounds: speedups from different runs
are comparable where times are not (the clock and the card's state move between runs; the
catalog compares evaluations the same way). Per shape the merged row keeps every family's
columns (`<family>_us`, `<family>_variant`, and, new here, `<family>_speedup_lt-auto-max` and
`<family>_speedup_lt-auto`), and takes best_family / best_variant / best_us / lt-auto_us /
lt-auto-max_us / speedup_* from the run of the best family by speedup against lt-auto-max.
Shapes missing from BASE are added; shapes of BASE missing from the new files keep BASE's row.
Prints the summary by log2(M·N·K) bin, the catalog-with-fallback mean (cuBLASLt where the best
family loses: max(1, speedup)) and the shape counts per best family.
"""
import argparse
import csv
import math
from collections import OrderedDict

BINS = [(0, 27), (27, 30), (30, 33), (33, 36), (36, 99)]


def families_of(row):
    return [k[: -len("_variant")] for k in row if k.endswith("_variant") and k != "best_variant"]


def per_family(row):
    """{family: (us, variant, speedup_max, speedup_auto)} of one CSV row (its own evaluation)."""
    out = {}
    lt_max = float(row["lt-auto-max_us"]) if row.get("lt-auto-max_us") else None
    lt_auto = float(row["lt-auto_us"]) if row.get("lt-auto_us") else None
    for fam in families_of(row):
        us = row.get(fam + "_us", "")
        if not us:
            continue
        us = float(us)
        sp_max = row.get(fam + "_speedup_lt-auto-max") or (lt_max / us if lt_max else None)
        sp_auto = row.get(fam + "_speedup_lt-auto") or (lt_auto / us if lt_auto else None)
        out[fam] = dict(us=us, variant=row[fam + "_variant"], sp_max=float(sp_max),
                        sp_auto=float(sp_auto) if sp_auto else None,
                        lt_max=row.get(fam + "_lt-auto-max_us") or row["lt-auto-max_us"],
                        lt_auto=row.get(fam + "_lt-auto_us") or row["lt-auto_us"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("new", nargs="+")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    key = lambda r: (r["M"], r["N"], r["K"], r["layout"], r["acc"])
    merged = OrderedDict()
    fams = OrderedDict()
    for path in [a.base] + a.new:
        for r in csv.DictReader(open(path)):
            entry = merged.setdefault(key(r), {"row": r, "fams": {}})
            for fam, v in per_family(r).items():
                fams[fam] = True
                old = entry["fams"].get(fam)
                if old is None or v["sp_max"] > old["sp_max"]:
                    entry["fams"][fam] = v
    base_cols = ["M", "N", "K", "layout", "acc", "log2_mnk", "best_family", "best_variant",
                 "best_us", "lt-auto_us", "lt-auto-max_us", "speedup_lt-auto",
                 "speedup_lt-auto-max"]
    cols = base_cols[:]
    for fam in fams:
        cols += [f"{fam}_us", f"{fam}_variant", f"{fam}_lt-auto-max_us",
                 f"{fam}_speedup_lt-auto-max", f"{fam}_speedup_lt-auto"]
    rows = []
    for k, e in merged.items():
        r = e["row"]
        out = {c: r.get(c, "") for c in base_cols}
        if e["fams"]:
            bf, b = max(e["fams"].items(), key=lambda kv: kv[1]["sp_max"])
            out.update({"best_family": bf, "best_variant": b["variant"], "best_us": b["us"],
                        "lt-auto_us": b["lt_auto"], "lt-auto-max_us": b["lt_max"],
                        "speedup_lt-auto": b["sp_auto"] or "",
                        "speedup_lt-auto-max": round(b["sp_max"], 6)})
        for fam, v in e["fams"].items():
            out.update({f"{fam}_us": v["us"], f"{fam}_variant": v["variant"],
                        f"{fam}_lt-auto-max_us": v["lt_max"],
                        f"{fam}_speedup_lt-auto-max": round(v["sp_max"], 6),
                        f"{fam}_speedup_lt-auto": round(v["sp_auto"], 6) if v["sp_auto"] else ""})
        rows.append(out)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)

    def summary(name, pick):
        print(f"\n{name}\n\n| log2(M·N·K) | shapes | mean | geomean | wins (> 1) | catalog mean (max(1, s)) |")
        print("|---|---|---|---|---|---|")
        allv = []
        for lo, hi in BINS + [(0, 99)]:
            v = [pick(r) for r in rows if lo <= float(r["log2_mnk"]) < hi and pick(r)]
            if (lo, hi) != (0, 99):
                allv += v
            if not v:
                continue
            label = "all" if (lo, hi) == (0, 99) else (f"< {hi}" if lo == 0 else f"≥ {lo}" if hi == 99 else f"{lo}–{hi}")
            print(f"| {label} | {len(v)} | {sum(v) / len(v):.3f} | "
                  f"{math.exp(sum(map(math.log, v)) / len(v)):.3f} | {sum(x > 1 for x in v)} | "
                  f"{sum(max(1, x) for x in v) / len(v):.3f} |")

    summary("Best family per shape against lt-auto-max (each family against its own evaluation)",
            lambda r: float(r["speedup_lt-auto-max"]) if r["speedup_lt-auto-max"] else None)
    for fam in fams:
        summary(f"{fam} alone against lt-auto-max",
                lambda r, fam=fam: float(r[f"{fam}_speedup_lt-auto-max"]) if r.get(f"{fam}_speedup_lt-auto-max") else None)
    counts = {}
    for r in rows:
        counts[r["best_family"]] = counts.get(r["best_family"], 0) + 1
    print("\nbest family per shape:", counts)
    print(f"{a.out}: {len(rows)} shapes")


if __name__ == "__main__":
    main()
