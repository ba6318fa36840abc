#!/usr/bin/env python3
"""The table of bench/gpu_multigpu.sh: pretraining tokens/s and hgemm_rl throughput on 1 GPU
against N GPUs, and where an RL step's time goes. Run only after bench/rl_guard.py passed every
RL run (a step without updates or compiled candidates measured no RL).

    python3 bench/multigpu_table.py ROOT OUT_MD GPUS_TXT RUN[:LABEL] ...

ROOT holds the run directories: pre1 and preN (pretraining, optional) and the RL runs named on
the command line (rl1 first: the 1-GPU reference). Every RL median is over the steps after the
first (which seeds the exemplar pool). Standard library only."""
import datetime
import json
import os
import statistics
import sys


def recs(root, run, stage):
    p = os.path.join(root, run, "metrics.jsonl")
    if not os.path.exists(p):
        return []
    out = []
    for line in open(p):
        line = line.strip()
        if line:
            r = json.loads(line)
            if r.get("stage") == stage:
                out.append(r)
    return out


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    root, out_md, gpus_txt = sys.argv[1:4]
    runs = [a.split(":", 1) if ":" in a else (a, a) for a in sys.argv[4:]]
    gpus = open(gpus_txt).read().strip().replace("\n", "; ") if os.path.exists(gpus_txt) else "?"
    rl_config = os.environ.get("RL_CONFIG", "configs/quickstart.yaml")
    lines = [f"`bash bench/gpu_multigpu.sh BUILD OUT`, {datetime.date.today()}, {gpus}, "
             f"NCCL_NVLS_ENABLE=0; pretraining: the quickstart model and data; RL: {rl_config}'s "
             f"hgemm_rl stage.", ""]
    pre = {n: med([r["tokens_per_s"] for r in recs(root, n, "pretrain")[10:]])
           for n in sorted(d for d in os.listdir(root) if d.startswith("pre") and d[3:].isdigit())}
    if pre:
        ref = pre.get("pre1", float("nan"))
        lines += ["| pretrain (global batch 8 x 4608, median of steps 11-40) | tokens/s | vs 1 GPU |",
                  "|---|---|---|"]
        for n, v in pre.items():
            lines.append(f"| {n[3:]} GPU(s) | {v:,.0f} | {v / ref:.2f}x |")
        lines.append("")
    lines += ["| hgemm_rl run | steps measured | rows / step | step s (median) | steps/s | samples/s | vs 1 GPU (samples/s) "
              "| step s (mean) | samples/s (mean) | vs 1 GPU (mean) "
              "| prompts (pool seeding) / generate / compile / compile wait / time / wait / update s | runner starts s (spares / runners) | compiled | updates |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ref_mean = None
    ref = None
    for run, label in runs:
        rs = recs(root, run, "hgemm_rl")[1:]
        step = med([r["step_s"] for r in rs])
        rows = med([r["candidates"] for r in rs])
        sps = rows / step if rs else float("nan")
        mean_step = statistics.mean([r["step_s"] for r in rs]) if rs else float("nan")
        sps_mean = rows / mean_step if rs else float("nan")
        if ref is None:
            ref, ref_mean = sps, sps_mean
        split = " / ".join(f"{med([r.get(k, 0) for r in rs]):.1f}"
                           for k in ("prompts_s", "generate_s", "compile_s", "compile_wait_s", "time_s", "wait_s", "update_s"))
        # Runner starts (a fresh process and CUDA context per candidate, or a spare made ready
        # while the batch compiled): median over steps of the summed seconds; older runs: n/a.
        runner = (f"{med([r['runner_start_s'] for r in rs]):.1f} ({med([r['spare_runners'] for r in rs]):.0f} / "
                  f"{med([r['runners'] for r in rs]):.0f})" if rs and all("runner_start_s" in r for r in rs) else "n/a")
        lines.append(f"| {label} | {len(rs)} | {rows:.0f} | {step:.1f} | {1 / step:.4f} | {sps:.2f} | "
                     f"{sps / ref:.2f}x | {mean_step:.1f} | {sps_mean:.2f} | {sps_mean / ref_mean:.2f}x | {split} | {runner} | {med([r['compiled_rate'] for r in rs]):.0%} | "
                     f"{min((r['updates'] for r in rs), default=0)} |")
    lines += ["", "Steps measured: those after the first (exemplar seeding). The median step leaves out the "
              "occasional step that seeds a new task's exemplar pool; the mean keeps it. compiled: the median share "
              "of a step's candidates that compiled; updates: the fewest policy updates of a measured step."]
    open(out_md, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
