#!/usr/bin/env python3
"""Tables for issue 24's small-shape profile from bench/gpu_small_profile.sh's files.

    python3 bench/small_profile_report.py DIR

DIR holds small_bench.csv (device time per contender and shape), nsys_trace.csv (the contender
order of `bench_small_gemm --mode once`, then nsys's cuda_gpu_trace: one row per kernel or
memset) and ncu.csv (ncu --csv --page details of one eager call per contender). Prints markdown:
the device-time table, the per-call breakdown from the trace (kernels per call, their mean
duration, the mean gap from one kernel's end to the next one's start inside the graph), and the
ncu launch statistics and stall reasons of each profiled kernel.
"""
import collections
import csv
import io
import statistics
import sys
from pathlib import Path

UTIL = ("fill_random", "hold_kernel", "diff_norms", "marker_kernel", "[CUDA memset]", "[CUDA memcpy")


def bench_table(path):
    rows = [r for r in csv.reader(open(path)) if len(r) >= 9 and r[5] == "ok"]
    by = collections.OrderedDict()
    for r in rows:
        by.setdefault(tuple(r[:4]), []).append(r)
    print("| shape | layout | lt-auto µs | wgmma best µs | cutlass pp 64x64 µs | hgemm_small best | µs | vs lt-auto | empty kernel µs | touch µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, rs in by.items():
        t = {r[4]: float(r[7]) for r in rs}
        lt = t["lt-auto"]
        wg = min((v for n, v in t.items() if n.startswith("wgmma")), default=float("nan"))
        cu = min((v for n, v in t.items() if n.startswith("cutlass")), default=float("nan"))
        sm = min(((v, n) for n, v in t.items() if n.startswith("small")), default=(float("nan"), "-"))
        print(f"| {'x'.join(k[:3])} | {k[3]} | {lt:.2f} | {wg:.2f} | {cu:.2f} | {sm[1]} | {sm[0]:.2f} "
              f"| {lt / sm[0]:.3f} | {t.get('floor_empty_nn', float('nan')):.2f} | {t.get('floor_touch_nn', float('nan')):.2f} |")
    return by


def nsys_table(path):
    text = open(path).read()
    if "#### nsys cuda_gpu_trace" not in text:
        print("(no nsys trace)")
        return
    head, trace = text.split("#### nsys cuda_gpu_trace", 1)
    order = [r for r in csv.reader(io.StringIO(head)) if len(r) >= 6 and r[5].startswith("once ")]
    lines = trace.strip().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"Start') or l.startswith("Start"))
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    name_key = "Name"
    start_key = next(k for k in rows[0] if k.startswith("Start"))
    dur_key = next(k for k in rows[0] if k.startswith("Duration"))
    # Segments: the kernels after each marker_kernel up to the next utility kernel.
    segs, cur = [], None
    for r in rows:
        n = r[name_key]
        if n.startswith("marker_kernel"):
            cur = []
            segs.append(cur)
        elif any(n.startswith(u) for u in UTIL) or n.startswith("hold_kernel"):
            cur = None
        elif cur is not None:
            cur.append((float(r[start_key]), float(r[dur_key]), n))
    if len(segs) != len(order):
        print(f"(trace: {len(segs)} marked replays, {len(order)} contenders: order unknown)")
        return
    print("| shape | contender | kernels per call | per call µs (first start → last end / 20) | kernel µs (mean) | gap µs (mean end → next start) | kernel names |")
    print("|---|---|---|---|---|---|---|")
    for o, seg in zip(order, segs):
        if not seg:
            continue
        seg.sort()
        per_call = (seg[-1][0] + seg[-1][1] - seg[0][0]) / 20 / 1e3
        durs = [d for _, d, _ in seg]
        gaps = [seg[i + 1][0] - (seg[i][0] + seg[i][1]) for i in range(len(seg) - 1)]
        names = collections.Counter(n.split("(")[0].split("<")[0][:60] for _, _, n in seg)
        print(f"| {'x'.join(o[:3])} {o[3]} | {o[4]} | {len(seg) / 20:g} | {per_call:.3f} | "
              f"{statistics.mean(durs) / 1e3:.3f} | {statistics.mean(gaps) / 1e3 if gaps else 0:.3f} | "
              f"{'; '.join(f'{n} x{c // 20}' for n, c in names.items())} |")


def ncu_table(path):
    text = open(path).read()
    start = text.find('"ID"')
    if start < 0:
        print("(no ncu rows)")
        return
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    kernels = collections.OrderedDict()
    for r in rows:
        kernels.setdefault((r["ID"], r["Kernel Name"]), {})[(r["Section Name"], r["Metric Name"])] = (
            r["Metric Value"], r["Metric Unit"])
    want = ["Duration", "Grid Size", "Block Size", "Cluster Size", "Registers Per Thread",
            "Dynamic Shared Memory Per Block", "Achieved Occupancy", "SM Active Cycles",
            "Elapsed Cycles", "DRAM Throughput", "gpu__time_duration.sum", "sm__cycles_active.max",
            "dram__bytes_read.sum"]
    print("| id | kernel | " + " | ".join(want) + " | top stalls (cycles per issued instruction) |")
    print("|---|---|" + "---|" * len(want) + "---|")
    for (kid, name), m in kernels.items():
        vals = []
        for w in want:
            v = next((f"{val} {unit}".strip() for (sec, met), (val, unit) in m.items() if met == w), "")
            vals.append(v)
        stalls = sorted(((float(val.replace(",", "")), met) for (sec, met), (val, unit) in m.items()
                         if sec == "Warp State Statistics" and met.startswith("Stall")
                         and val.replace(",", "").replace(".", "").isdigit()), reverse=True)[:3]
        short = name.split("(")[0][:50]
        print(f"| {kid} | {short} | " + " | ".join(vals) + " | "
              + ", ".join(f"{n} {v:.1f}" for v, n in stalls) + " |")


if __name__ == "__main__":
    d = Path(sys.argv[1])
    if (d / "small_bench.csv").exists():
        bench_table(d / "small_bench.csv")
    print()
    if (d / "nsys_trace.csv").exists():
        nsys_table(d / "nsys_trace.csv")
    print()
    if (d / "ncu.csv").exists():
        ncu_table(d / "ncu.csv")
