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


def ncu_table(path, bench):
    """One row per profiled contender and shape: its graph time (bench), then per kernel it
    launched: ncu's duration (launch to end, eager), the busiest SM's active time (cycles at
    the measured SM clock: a block's lifetime), grid, cluster, block, registers, shared memory."""
    text = open(path).read()
    order = [r for r in csv.reader(io.StringIO(text[: text.find('"ID"')]))
             if len(r) >= 6 and r[5].startswith("eager ")]
    rows = list(csv.DictReader(io.StringIO(text[text.find('"ID"'):])))
    kernels = collections.OrderedDict()
    for r in rows:
        kernels.setdefault(r["ID"], {"name": r["Kernel Name"]})[r["Metric Name"]] = r["Metric Value"]
    # Kernels to contenders in launch order: a split-K reduce belongs to the kernel before it.
    groups = []
    for kid, m in kernels.items():
        if "reduce" in m["name"].lower():  # a split-K reduction: the kernel before it is its GEMM
            groups[-1].append(m)
        else:
            groups.append([m])
    # Align: a contender whose kernel is not next (e.g. a call that launched nothing) gets none.
    expect = {"wgmma": "hgemm_wgmma::", "cutlass": "cutlass::device_kernel", "small": "hgemm_small",
              "floor_empty": "empty_kernel", "floor_touch": "touch_kernel"}
    aligned, gi = [], 0
    for o in order:
        pat = next((v for k, v in expect.items() if o[4].startswith(k)), None)
        g = groups[gi] if gi < len(groups) else None
        ok = g is not None and (pat in g[0]["name"] if pat else
                                not any(v in g[0]["name"] for v in expect.values()))
        aligned.append(g if ok else [])
        gi += ok
    times = {}
    if bench:
        for k, rs in bench.items():
            for r in rs:
                times[(k[0], k[1], k[2], k[3], r[4])] = float(r[7])
    num = lambda v: float(v.replace(",", "")) if v else float("nan")
    print("| shape | contender | graph µs per call | kernels | ncu duration µs | busiest SM active µs | grid | cluster | block | regs | smem KiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for o, g in zip(order, aligned):
        name = o[4]
        if not g:
            print(f"| {o[0]}x{o[1]}x{o[2]} | {name} | | (no kernel profiled) | | | | | | | |")
            continue
        t = times.get((o[0], o[1], o[2], o[3], name), float("nan"))
        dur = sum(num(m.get("gpu__time_duration.sum", "")) for m in g) / 1e3
        active = sum(num(m.get("sm__cycles_active.max", "")) / num(m.get("SM Frequency", "1")) * 1e6
                     for m in g)
        m0 = g[0]
        kn = " + ".join(x["name"].split("(")[0].split("<")[0].replace("void ", "")[-34:] for x in g)
        smem = (num(m0.get("Dynamic Shared Memory Per Block", "0")) + num(m0.get("Static Shared Memory Per Block", "0"))) / 1024
        print(f"| {o[0]}x{o[1]}x{o[2]} | {name} | {t:.2f} | {kn} | {dur:.2f} | {active:.2f} | "
              f"{m0.get('Grid Size', '')} | {m0.get('Cluster Size', '')} | {m0.get('Block Size', '')} | "
              f"{m0.get('Registers Per Thread', '')} | {smem:.0f} |")


if __name__ == "__main__":
    d = Path(sys.argv[1])
    bench = None
    if (d / "small_bench.csv").exists():
        bench = bench_table(d / "small_bench.csv")
    print()
    if (d / "nsys_trace.csv").exists():
        nsys_table(d / "nsys_trace.csv")
    print()
    if (d / "ncu.csv").exists():
        ncu_table(d / "ncu.csv", bench)
