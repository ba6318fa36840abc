#!/usr/bin/env python3
"""Merge kernel catalogs (`kernelrl catalog build` JSON, plain or .xz) into one (issue 24).

    python3 bench/merge_catalogs.py OLD.json[.xz] NEW.json [...] --out MERGED.json [--grid CSV]

Per (device, M, N, K, layout, accumulation) the entry with the higher speedup over its own
reference (each measured against lt-auto in its own interleaved rounds, so entries from
different builds compare; `kernelrl catalog build` picks among evaluations the same way) is
kept, with its kernel's source; inputs and skipped counts are concatenated / summed. The
result loads with `kernelrl catalog show` and exports with `kernelrl catalog export`, as a
catalog built from all the stores at once would (when their stores are gone, as the grid's
earlier sessions' are). With --grid (a family grid CSV), also prints the catalog-with-fallback
mean over the grid's shapes: max(1, speedup) where the catalog has the shape, 1 (cuBLASLt)
where it does not.
"""
import argparse
import csv
import json
import lzma


def load(path):
    return json.load(lzma.open(path) if path.endswith(".xz") else open(path))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("catalogs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--grid")
    a = ap.parse_args()
    cats = [load(p) for p in a.catalogs]
    key = lambda e: (e["device"], e["m"], e["n"], e["k"], e["layout"], e["acc"])
    best, kernels = {}, {}
    for c in cats:
        for e in c["entries"]:
            k = key(e)
            if k not in best or e["speedup"] > best[k][0]["speedup"]:
                best[k] = (e, c["kernels"][e["kernel"]])
    entries = []
    for k in sorted(best):
        e, src = best[k]
        entries.append(e)
        kernels[e["kernel"]] = src
    skipped = {}
    for c in cats:
        for r, n in c.get("skipped", {}).items():
            skipped[r] = skipped.get(r, 0) + n
    out = dict(cats[-1])
    out.update({"entries": entries, "kernels": kernels, "skipped": skipped,
                "inputs": [i for c in cats for i in c.get("inputs", [])]})
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    wins = [e for e in entries if e["speedup"] > 1]
    print(f"{a.out}: {len(entries)} shapes, {len(kernels)} kernels, beats lt-auto at {len(wins)}")
    if a.grid:
        by = {(int(e["m"]), int(e["n"]), int(e["k"]), e["layout"]): e["speedup"] for e in entries}
        rows = list(csv.DictReader(open(a.grid)))
        vals = [max(1.0, by.get((int(r["M"]), int(r["N"]), int(r["K"]), r["layout"]), 1.0)) for r in rows]
        print(f"catalog with cuBLASLt fallback over the {len(rows)} grid shapes: mean "
              f"{sum(vals) / len(vals):.4f}; {sum(v > 1 for v in vals)} dispatched to a catalog kernel, "
              f"{sum(v >= 1.05 for v in vals)} by >= 5 %")


if __name__ == "__main__":
    main()
