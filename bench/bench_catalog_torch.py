#!/usr/bin/env python3
"""The exported catalog called from PyTorch (torch.ops.kernelrl.hgemm) against torch.matmul.

    python3 bench/bench_catalog_torch.py --lib PKG_BUILD/libkernelrl_catalog_torch.so \
        --grid configs/grids/llm.txt --out OUT_DIR

Contenders per shape (A: M x K, B: K x N, fp16, layout nn, normal inputs, fixed seed):
  torch        torch.matmul(a, b)
  catalog      torch.ops.kernelrl.hgemm(a, b, "nn"), AUTO dispatch (catalog kernel where it beat
               cuBLASLt in the catalog, else the library's autotuned cuBLASLt)
  catalog-lt   the same operator with the dispatch forced to cuBLASLt (the library's fallback)
Protocol (device time): three eager warm-up calls per contender (the library autotunes cuBLASLt
and loads its kernel there), then one CUDA graph per contender of --graph-calls back-to-back
calls on the same operands (the dispatch is fixed at capture); --rounds rounds, contenders in a
rotated order within each round, each replay preceded by an untimed 256 MiB L2 flush and timed
with CUDA events; per-call time = replay time / calls; the median over rounds is reported.
Beside it the call time: events around one eager call (the host's issue cost included), median
over the same number of rounds. Each contender's output is checked against the fp32 product
with the evaluator's bound 2 * max(torch fp16 deviation, 2^-11 * max|ref|).
Writes OUT_DIR/catalog_torch.csv and catalog_torch.md.
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch


def read_grid(path):
    shapes = []
    for line in open(path):
        line = line.split("#")[0].strip()
        if not line:
            continue
        parts = line.split()
        m, n, k = (int(x) for x in parts[0].split("x"))
        layout = parts[1] if len(parts) > 1 else "nn"
        shapes.append((m, n, k, layout))
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libkernelrl_catalog_torch.so of an exported catalog")
    ap.add_argument("--grid", default="configs/grids/llm.txt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--graph-calls", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=3.0, help="timing budget per shape (fewer rounds for big ones)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_catalog_torch: no CUDA device", file=sys.stderr)
        return 2
    torch.ops.load_library(args.lib)
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    rows = []
    t_start = time.time()
    for (m, n, k, layout) in read_grid(args.grid):
        a = torch.randn(m, k, device=dev, dtype=torch.float16, generator=gen)
        b = torch.randn(k, n, device=dev, dtype=torch.float16, generator=gen) if layout == "nn" else \
            torch.randn(n, k, device=dev, dtype=torch.float16, generator=gen)
        bk = b if layout == "nn" else b.t()
        route = torch.ops.kernelrl.route(m, n, k, layout) or "cuBLASLt"
        contenders = {
            "torch": ("auto", lambda: torch.matmul(a, bk)),
            "catalog": ("auto", lambda: torch.ops.kernelrl.hgemm(a, b, layout)),
            "catalog-lt": ("cublaslt", lambda: torch.ops.kernelrl.hgemm(a, b, layout)),
        }
        ref = torch.matmul(a.float(), bk.float())
        ref_max = ref.abs().max().item()
        torch_dev = (torch.matmul(a, bk).float() - ref).abs().max().item()
        bound = 2 * max(torch_dev, ref_max * 2.0 ** -11)
        graphs, devs = {}, {}
        for name, (mode, fn) in contenders.items():
            torch.ops.kernelrl.set_dispatch(mode)
            for _ in range(3):
                out = fn()
            torch.cuda.synchronize()
            devs[name] = (out.float() - ref).abs().max().item() if out.isfinite().all() else math.inf
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(args.graph_calls):
                    out = fn()
            graphs[name] = g
        torch.ops.kernelrl.set_dispatch("auto")
        del out
        # Rounds from a first estimate: one replay of each graph.
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        est = 0.0
        for g in graphs.values():
            e0.record(); g.replay(); e1.record(); e1.synchronize()
            est += e0.elapsed_time(e1) / 1e3
        rounds = max(3, min(args.rounds, int(args.budget_s / max(est, 1e-6))))
        dev_us = {name: [] for name in graphs}
        call_us = {name: [] for name in graphs}
        names = list(graphs)
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                flush.zero_()
                e0.record(); graphs[name].replay(); e1.record(); e1.synchronize()
                dev_us[name].append(e0.elapsed_time(e1) * 1e3 / args.graph_calls)
            for name in order:
                mode, fn = contenders[name]
                torch.ops.kernelrl.set_dispatch(mode)
                flush.zero_()
                torch.cuda.synchronize()
                e0.record(); fn(); e1.record(); e1.synchronize()
                call_us[name].append(e0.elapsed_time(e1) * 1e3)
            torch.ops.kernelrl.set_dispatch("auto")
        med = {n_: statistics.median(v) for n_, v in dev_us.items()}
        cmed = {n_: statistics.median(v) for n_, v in call_us.items()}
        row = dict(M=m, N=n, K=k, layout=layout, route=route, rounds=rounds,
                   torch_us=med["torch"], catalog_us=med["catalog"], catalog_lt_us=med["catalog-lt"],
                   speedup=med["torch"] / med["catalog"],
                   torch_call_us=cmed["torch"], catalog_call_us=cmed["catalog"], catalog_lt_call_us=cmed["catalog-lt"],
                   tflops=2.0 * m * n * k / med["catalog"] / 1e6,
                   dev_ok=all(d <= bound for d in devs.values()), max_dev=max(devs.values()), bound=bound)
        rows.append(row)
        print(f"{m}x{n}x{k} {layout} {route:>14}  torch {row['torch_us']:9.2f} us  catalog {row['catalog_us']:9.2f} us "
              f"(lt {row['catalog_lt_us']:9.2f})  x{row['speedup']:.3f}  call {row['torch_call_us']:.1f}/"
              f"{row['catalog_call_us']:.1f} us  dev {'ok' if row['dev_ok'] else 'FAIL'}", flush=True)
        del graphs, a, b, bk, ref
        torch.cuda.empty_cache()
    keys = list(rows[0].keys())
    with open(os.path.join(args.out, "catalog_torch.csv"), "w") as f:
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(str(r[k_]) for k_ in keys) + "\n")
    geo = math.exp(sum(math.log(r["speedup"]) for r in rows) / len(rows))
    wins = sum(r["speedup"] > 1 for r in rows)
    routed = sum(r["route"] != "cuBLASLt" for r in rows)
    lines = [f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
             f"{args.graph_calls} calls per graph, up to {args.rounds} rounds, {time.time() - t_start:.0f} s",
             "",
             "| shape (MxNxK) | route | torch.matmul us | kernelrl.hgemm us | its cuBLASLt us | x torch | "
             "TFLOP/s | call us torch / hgemm | check |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['M']}x{r['N']}x{r['K']} | {r['route']} | {r['torch_us']:.2f} | {r['catalog_us']:.2f} | "
                     f"{r['catalog_lt_us']:.2f} | {r['speedup']:.3f} | {r['tflops']:.0f} | "
                     f"{r['torch_call_us']:.1f} / {r['catalog_call_us']:.1f} | {'ok' if r['dev_ok'] else 'FAIL'} |")
    lines += ["", f"{len(rows)} shapes, {routed} dispatched to a catalog kernel; kernelrl.hgemm vs torch.matmul: "
              f"geometric mean x{geo:.3f}, faster at {wins}; every output within the bound: "
              f"{all(r['dev_ok'] for r in rows)}"]
    kern = [r for r in rows if r["route"] != "cuBLASLt"]
    if kern:  # the dispatched kernels against the library's own autotuned cuBLASLt, same rounds
        sp = [r["catalog_lt_us"] / r["catalog_us"] for r in kern]
        lines.append(f"dispatched kernels vs the library's cuBLASLt: geometric mean "
                     f"x{math.exp(sum(map(math.log, sp)) / len(sp)):.3f}, median x{statistics.median(sp):.3f}, "
                     f"faster at {sum(x > 1 for x in sp)} of {len(sp)}, range x{min(sp):.3f}-x{max(sp):.3f}")
    open(os.path.join(args.out, "catalog_torch.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines[-2:]))
    return 0 if all(r["dev_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
