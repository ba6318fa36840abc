#!/usr/bin/env python3
"""The table of bench/gpu_multigpu.sh: pretraining tokens/s and hgemm_rl throughput per GPU
count, weak and strong scaling against the 1-GPU run, where an RL step's time goes, and
bench/rl_guard.py's check of every run (issue 40).

    python3 bench/multigpu_table.py ROOT OUT_MD GPUS_TXT RUN[:LABEL] ...

RUN is rl<N> (N GPUs, the 1-GPU run's global batch: strong scaling) or rl<N>w (N times its
prompts: weak scaling); rl1 is the reference. A run's metrics are ROOT/RUN/metrics.jsonl (a run
directory) or ROOT/RUN_metrics.jsonl (the copies gpu_multigpu.sh leaves in OUT_DIR, as in
docs/data/rl_scaling_*). Pretraining rows come from ROOT/pre<N>/metrics.jsonl when present.

Every RL number is over the steps after the first (which seeded the exemplar pools before issue
40's seeding ahead, and is still a warm-up: the first compiles, the first runner starts). Scaling:
weak = samples/s over the 1-GPU run's, strong = steps/s over the 1-GPU run's (the same global
batch, so the same rows a step). A run that fails the guard (a measured step without an update
or without a compiled candidate) gets no ratio and its guard lines; the script then exits 1.
Standard library only."""
import datetime
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rl_guard  # noqa: E402

STAGE = "hgemm_rl"
SKIP = 1  # the first step: a warm-up (it seeded the exemplar pools before seeding ahead)
# Issue 40's targets (same per-GPU batch): weak scaling of samples/s, strong of steps/s.
TARGETS = {"weak": {2: 1.85, 4: 3.6, 8: 7.0}, "strong": {2: 1.6, 4: 2.8}}
# The step split, in the order a step runs (metrics.jsonl keys, trainer/rl_metrics.cpp).
SPLIT = [("seed_s", "seeding in step"), ("prompts_s", "prompts"), ("generate_s", "generate"), ("compile_s", "compile"),
         ("compile_wait_s", "compile wait"), ("time_s", "time"), ("runner_start_s", "of it runner starts"),
         ("wait_s", "wait for ranks"), ("update_s", "update")]


def metrics_path(root, run):
    for p in (os.path.join(root, run, "metrics.jsonl"), os.path.join(root, run + "_metrics.jsonl")):
        if os.path.exists(p):
            return p
    return os.path.join(root, run, "metrics.jsonl")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def kind_of(run):
    """(GPUs, "reference" | "strong" | "weak") from a run's name."""
    m = re.fullmatch(r"rl(\d+)(w?)", run)
    if not m:
        raise SystemExit(f"multigpu_table.py: run name {run!r} is not rl<N> or rl<N>w")
    n = int(m.group(1))
    return n, "reference" if n == 1 else "weak" if m.group(2) else "strong"


def rl_row(root, run, label):
    recs = rl_guard.read_stage(metrics_path(root, run), STAGE)
    rs = recs[SKIP:]
    n, kind = kind_of(run)
    row = {"run": run, "label": label, "gpus": n, "kind": kind, "steps": len(rs),
           "guard": rl_guard.problems(recs, run, STAGE, skip=SKIP, min_steps=1)}
    row["rows"] = med([r["candidates"] for r in rs])
    row["step_s"] = med([r["step_s"] for r in rs])
    row["steps_per_s"] = 1 / row["step_s"] if rs else float("nan")
    row["samples_per_s"] = row["rows"] / row["step_s"] if rs else float("nan")
    mean_step = statistics.mean([r["step_s"] for r in rs]) if rs else float("nan")
    row["samples_per_s_mean"] = row["rows"] / mean_step if rs else float("nan")
    row["split"] = {k: (med([r[k] for r in rs]) if rs and all(k in r for r in rs) else None)
                    for k, _ in SPLIT}
    row["compiled"] = med([r.get("compiled_rate", 0) for r in rs])
    row["updates"] = min((r.get("updates", 0) for r in rs), default=0)
    return row


def scaling(row, ref):
    """The row's scaling against the 1-GPU run (None without one, or when a guard failed)."""
    if ref is None or row["guard"] or ref["guard"] or row["kind"] == "reference":
        return None
    key = "samples_per_s" if row["kind"] == "weak" else "steps_per_s"
    return row[key] / ref[key]


def fmt(x, spec):
    return "n/a" if x is None or x != x else format(x, spec)


def table(root, gpus, runs, rl_config, date):
    lines = [f"`bash bench/gpu_multigpu.sh BUILD OUT`, {date}, {gpus}, NCCL_NVLS_ENABLE=0; "
             f"pretraining: the quickstart model and data; RL: {rl_config}'s {STAGE} stage.", ""]
    pre = {}
    if os.path.isdir(root):
        for d in sorted(os.listdir(root)):
            if d.startswith("pre") and d[3:].isdigit():
                recs = rl_guard.read_stage(os.path.join(root, d, "metrics.jsonl"), "pretrain")
                if recs:
                    pre[int(d[3:])] = med([r["tokens_per_s"] for r in recs[10:]])
    if pre:
        ref = pre.get(1, float("nan"))
        lines += ["| pretrain (global batch 8 x 4608, median of steps 11-40) | tokens/s | vs 1 GPU |",
                  "|---|---|---|"]
        for n, v in sorted(pre.items()):
            lines.append(f"| {n} GPU(s) | {v:,.0f} | {v / ref:.2f}x |")
        lines.append("")
    rows = [rl_row(root, run, label) for run, label in runs]
    if not rows:
        return lines, rows
    ref = next((r for r in rows if r["kind"] == "reference"), None)
    split_head = " / ".join(name for _, name in SPLIT)
    lines += [f"| {STAGE} run | GPUs | scaling | steps measured | rows / step | step s (median) | steps/s "
              f"| samples/s | scaling vs 1 GPU | target (issue 40) | samples/s (mean step) "
              f"| {split_head} s (medians) | compiled | updates | rl_guard |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = scaling(r, ref)
        target = TARGETS.get(r["kind"], {}).get(r["gpus"])
        if s is not None:
            ratio = f"{s:.2f}x ({'samples/s' if r['kind'] == 'weak' else 'steps/s'})"
        elif r["kind"] == "reference":
            ratio = "1.00x"
        elif r["guard"] or (ref is not None and ref["guard"]):
            ratio = "none (guard)"
        else:
            ratio = "n/a (no 1-GPU run)"
        verdict = "" if target is None else f"{target:.2f}x" + (
            "" if s is None else " met" if s >= target else " missed")
        split = " / ".join(fmt(r["split"][k], ".1f") for k, _ in SPLIT)
        guard = "pass" if not r["guard"] else "FAIL: " + "; ".join(
            g.split(f"{STAGE} ", 1)[-1] for g in r["guard"])
        lines.append(f"| {r['label']} | {r['gpus']} | {r['kind']} | {r['steps']} | {fmt(r['rows'], '.0f')} "
                     f"| {fmt(r['step_s'], '.1f')} | {fmt(r['steps_per_s'], '.4f')} | {fmt(r['samples_per_s'], '.2f')} "
                     f"| {ratio} | {verdict or 'n/a'} | {fmt(r['samples_per_s_mean'], '.2f')} | {split} "
                     f"| {fmt(r['compiled'], '.0%')} | {r['updates']} | {guard} |")
    lines += ["", "Steps measured: those after the first (a warm-up; before issue 40's seeding ahead it "
              "seeded the exemplar pools, and prompts_s of older runs holds the occasional step that "
              "seeds a new task's pool: the medians leave it out, the mean step keeps it; seeding in "
              "step is seed_s, 0 since seeding ahead). Scaling: weak = "
              "samples/s at N x the prompts over 1 GPU's, strong = steps/s at 1 GPU's global batch over "
              "1 GPU's. Split: each phase's median over the measured steps on rank 0 (runner starts are "
              "within time, summed over the rank's runners; wait is rank 0 waiting for the others' "
              "timing; n/a: the run predates the field). compiled: the median share of a step's "
              "candidates that compiled; updates: the fewest policy updates of a measured step; "
              "rl_guard: bench/rl_guard.py --skip 1 (every measured step updated and compiled)."]
    return lines, rows


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    root, out_md, gpus_txt = argv[:3]
    runs = [tuple(a.split(":", 1)) if ":" in a else (a, a) for a in argv[3:]]
    gpus = open(gpus_txt).read().strip().replace("\n", "; ") if os.path.exists(gpus_txt) else "?"
    lines, rows = table(root, gpus, runs, os.environ.get("RL_CONFIG", "configs/quickstart.yaml"),
                        os.environ.get("TABLE_DATE", str(datetime.date.today())))
    open(out_md, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    failed = [g for r in rows for g in r["guard"]]
    if failed:
        print("\n".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
