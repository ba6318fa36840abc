#!/usr/bin/env python3
"""Per-variant times for `kernelrl lift annotate --variants-csv` from the small-shapes calibration
run (issue 24, `bash bench/gpu_small_profile.sh`, docs/data/small_bench_h100.csv, run
"calibration"): every hgemm_small variant that passed at each shape, under its family variant
name (small_m32n32k64_s4_sk1_e1_pdl1_nn -> hgemm_small_nn_accf32_bm32_bn32_bk64_stages4_splitk1_
epi1_pdl1: the same kernels/hgemm_small.cuh Config, fp32 accumulation), with the lt-auto time of
the same run beside it. bench_small_gemm times as the evaluator's device mode does (20-call
graphs, cold L2), so its times rank variants like the sweep's.

  python3 bench/small_variants_csv.py [--src CSV] [--out CSV]
"""
import argparse
import csv
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"small_m(\d+)n(\d+)k(\d+)_s(\d+)_sk(\d+)_e(\d)_pdl(\d)_(nn|tn)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=ROOT / "docs/data/small_bench_h100.csv")
    ap.add_argument("--out", default=ROOT / "docs/data/small_variants_h100.csv")
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(a.src)) if r["run"] == "calibration"]
    lt = {(r["M"], r["N"], r["K"], r["layout"]): r["device_us"] for r in rows
          if r["contender"] == "lt-auto" and r["status"] == "ok"}
    out = ["M,N,K,layout,acc,variant,device_us,lt-auto_us"]
    for r in rows:
        m = NAME.fullmatch(r["contender"])
        if not m or r["status"] != "ok":
            continue
        bm, bn, bk, st, sk, epi, pdl, lay = m.groups()
        key = (r["M"], r["N"], r["K"], r["layout"])
        out.append(f"{r['M']},{r['N']},{r['K']},{lay},f32,hgemm_small_{lay}_accf32_bm{bm}_bn{bn}_bk{bk}_"
                   f"stages{st}_splitk{sk}_epi{epi}_pdl{pdl},{r['device_us']},{lt.get(key, '')}")
    Path(a.out).write_text("\n".join(out) + "\n")
    print(f"small_variants_csv: {len(out) - 1} variant times at {len(lt)} shapes -> {a.out}")


if __name__ == "__main__":
    main()
