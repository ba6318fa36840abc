#!/usr/bin/env python3
"""The headline table of docs/benchmarks.md, made from the data it reports.

Each row is either computed from a data file under docs/data/ (CSV or catalog JSON) or quoted
from a dated report under docs/history/ (the quote must be in that file, and every number of
the row's value must be in the quote). The table sits between the markers
<!-- headline:begin --> and <!-- headline:end --> of docs/benchmarks.md.

  python3 scripts/headline.py --check      exit 1 if the table differs from what the data gives,
                                           README.md has a measured number the table lacks, or an
                                           area section one that neither the table nor a report
                                           the section links has
  python3 scripts/headline.py --write      rewrite the table from the data
  python3 scripts/headline.py --self-test  the check must fail on a changed value, a changed data
                                           file, a quote its source lacks, a section number
                                           without a source and a README number the table lacks
                                           (CTest runs both --check and this)

Only the standard library: a fresh clone runs it before any virtual environment exists.
"""
import csv
import json
import lzma
import math
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"
HIST = ROOT / "docs" / "history"
BEGIN, END = "<!-- headline:begin -->", "<!-- headline:end -->"
H100 = "H100 80GB HBM3"
DEVICE = "device time"  # CUDA-graph replay, cold L2, interleaved (docs/timing.md)


def read_csv(name):
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


# ---- computed rows ------------------------------------------------------------------------
def grid_all():
    rows = read_csv("family_grid_h100.csv")
    s = [float(r["speedup_lt-auto-max"]) for r in rows]
    return (f"mean {sum(s) / len(s):.3f}×, geomean {geomean(s):.3f}×, "
            f"faster at {sum(x > 1 for x in s)}/{len(s)} shapes")


def grid_small():
    rows = read_csv("family_grid_h100.csv")
    s = [float(r["speedup_lt-auto-max"]) for r in rows
         if math.log2(int(r["M"]) * int(r["N"]) * int(r["K"])) < 27]
    fam = sum(r["best_family"] == "hgemm_small" for r in rows
              if math.log2(int(r["M"]) * int(r["N"]) * int(r["K"])) < 27)
    return (f"mean {sum(s) / len(s):.3f}×, faster at {sum(x > 1 for x in s)}/{len(s)} shapes "
            f"(best family hgemm_small at {fam})")


def grid_large():
    rows = read_csv("family_large_h100.csv")
    s = [float(r["speedup_lt-auto"]) for r in rows]
    return f"{min(s):.3f}×–{max(s):.3f}× at {len(s)}/{len(s)} (best variant: {rows[0]['best_family']})"


def small_64():
    rows = [r for r in read_csv("small_bench_h100.csv")
            if r["run"] == "profile" and (r["M"], r["N"], r["K"], r["layout"]) == ("64", "64", "64", "nn")]
    t = {r["contender"]: float(r["device_us"]) for r in rows}
    ours = t["small_m32n32k64_s4_sk1_pdl1_nn"]
    return f"{ours:.2f} µs against {t['lt-auto']:.2f} µs ({t['lt-auto'] / ours:.2f}×)"


def catalog():
    with lzma.open(DATA / "catalog_h100_grid_issue24.json.xz") as f:
        c = json.load(f)
    e = c["entries"]
    return (f"{len(e)} shapes, {len(c['kernels'])} kernels; beats lt-auto at "
            f"{sum(x['speedup'] > 1 for x in e)} ({sum(x['speedup'] >= 1.05 for x in e)} by ≥ 5 %)")


def catalog_torch():
    rows = read_csv("catalog_grid_torch_h100.csv")
    s = [float(r["catalog_lt_us"]) / float(r["catalog_us"]) for r in rows]
    ok = sum(r["dev_ok"] == "True" for r in rows)
    return (f"geomean {geomean(s):.3f}×, median {statistics.median(s):.3f}×, faster at "
            f"{sum(x > 1 for x in s)}/{len(s)}; {ok}/{len(rows)} outputs within the bound")


def trust_agree(path="trust_h100_2026-11-27.csv"):
    rows = read_csv(path)
    d = [float(r["diff_to_nearer_pct"]) for r in rows]
    worst = max(d, key=abs)
    return f"within 3 % at {sum(abs(x) < 3 for x in d)}/{len(d)} shapes (largest {worst:+.2f} %)"


def trust_repeat(path="trust_h100_2026-11-27.csv"):
    rows = [r for r in read_csv(path) if int(r["shape"]) >= 1024]
    miss = [r for r in rows if float(r["repeat_diff_pct"]) >= 1]
    text = f"within 1 % at {len(rows) - len(miss)}/{len(rows)} shapes ≥ 1024³"
    if miss:
        text += "; missed at " + ", ".join(f"{r['shape']}³ ({float(r['repeat_diff_pct']):.2f} %, "
                                           f"clock {r['mhz_run1']}/{r['mhz_run2']} MHz)" for r in miss)
    return text


def reference_neighbors(path="trust_h100_2026-11-27c/neighbors_run2/neighbors.csv"):
    """The standalone reference against itself at the power cap: its top algorithm with and
    without a near-idle gap before each timed replay, per repeat; and the evaluator's lt-auto
    (both evaluations of each repeat) against the gapped and the default reference."""
    by = {}
    for r in read_csv(path):
        by.setdefault((r["M"], r["repeat"]), {})[r["variant"]] = float(r["device_us"])
    def pct(a, b):
        return 100 * (a / b - 1)
    apart = {m: [pct(v["top1"], v["top1gap"]) for (mm, _), v in by.items() if mm == m] for m in ("4096", "8192")}
    big = [v for (m, _), v in by.items() if m == "8192"]
    ev = [(v[e], v) for v in big for e in ("evaluator1", "evaluator2")]
    to_gap = max(abs(pct(x, v["top1gap"])) for x, v in ev)
    to_all = [pct(x, v["all"]) for x, v in ev]
    return (f"8192³: {min(apart['8192']):.1f}–{max(apart['8192']):.1f} % apart in {len(big)} repeats "
            f"(4096³: {min(apart['4096']):.1f}–{max(apart['4096']):.1f} %); the evaluator's lt-auto within "
            f"{to_gap:.1f} % of the gapped reference, {max(to_all):+.1f} to {min(to_all):+.1f} % from the default one")


def trust_runs(metric, paths):
    """One trust metric over several runs of the same day, the newest first: every run shown, so a
    run that met the line stands beside the runs that missed it."""
    first, *rest = paths
    text = metric(first)
    if rest:
        text += " · the day's runs before it, newest first: " + " · ".join(metric(p) for p in rest)
    return text


def trust_rated(path):
    """The evaluator's lt-auto and the standalone timer's clocks run, both at the rated clock
    (each replay's time × its stamped SM clock / the rated clock)."""
    rows = read_csv(path)
    worst = max(rows, key=lambda r: abs(float(r["rated_diff_pct"])))
    return (f"within {abs(float(worst['rated_diff_pct'])):.2f} % at {len(rows)}/{len(rows)} shapes "
            f"(largest {float(worst['rated_diff_pct']):+.2f} % at {worst['shape']}³)")


def sweep_headroom():
    rows = read_csv("sweep_headroom_h200_2026-11-27/headroom.csv")
    r = [float(x["ratio"]) for x in rows]
    s3 = sum(float(x["sweep3_speedup"]) for x in rows) / len(rows)
    full = sum(float(x["full_speedup"]) for x in rows) / len(rows)
    return (f"faster by ≥ 2 % at {sum(x >= 1.02 for x in r)}/{len(r)} shapes (up to {(max(r) - 1) * 100:.1f} %); "
            f"mean {s3:.3f}× → {full:.3f}× over lt-auto-max")


def lift_small():
    d = json.loads((DATA / "lift_small_h100_2026-11-27/summary.json").read_text())
    return (f"{d['mean_before']:.3f}× → {d['mean_after']:.3f}× ({d['lift'] * 100:+.1f} %; target +10 %: {'met' if d['lift'] >= 0.10 else 'missed'}); "
            f"{'met' if d['mean_after'] >= 1.0 else 'missed'} the ≥ 1.0× target; ≥ 2 % faster than the sweep's best at "
            f"{round(d['share_after_beats_sweep_2pct'] * d['shapes'])}/{d['shapes']} (copies of hgemm_small variants "
            f"the sweep did not pick, chosen before RL); novelty {d['novelty_after'] * 100:.0f} %")


def lift_explore():
    d = json.loads((DATA / "lift_explore_h100_2026-11-27/summary.json").read_text())
    rows = [json.loads(x) for x in (DATA / "lift_explore_h100_2026-11-27/per_shape.jsonl").read_text().splitlines() if x.strip()]
    n = sum(r["samples"] for r in rows)
    passed = [sum(r[f"{side}_passed"] for r in rows) * 100 / n for side in ("before", "after")]
    return (f"{d['mean_before']:.3f}× → {d['mean_after']:.3f}× ({d['lift'] * 100:+.1f} %; target +10 %: {'met' if d['lift'] >= 0.10 else 'missed'}), "
            f"the lift from a lower before side (passing samples {passed[0]:.0f} % → {passed[1]:.0f} %); below 2^27 ≥ 1.0×: "
            f"{'met' if d['mean_after'] >= 1.0 else 'missed'}; ≥ 2 % faster than the sweep's best at "
            f"{round(d['share_after_beats_sweep_2pct'] * d['shapes'])}/{d['shapes']} (not re-verified); novelty {d['novelty_after'] * 100:.0f} %")


def rl_scaling(run="rl_scaling_h200x2_2026-11-27/run1_before_sharded_seeding"):
    def samples_per_s(name):  # bench/multigpu_table.py's: median rows / median step after step 1
        recs = [json.loads(x) for x in (DATA / run / f"{name}_metrics.jsonl").read_text().splitlines() if x.strip()]
        recs = [r for r in recs if r.get("stage") == "hgemm_rl"][1:]
        return (statistics.median(r["candidates"] for r in recs) / statistics.median(r["step_s"] for r in recs),
                len(recs))
    one, n1 = samples_per_s("rl1")
    strong, n2 = samples_per_s("rl2")
    weak, n2w = samples_per_s("rl2w")
    return (f"weak (8 × 8 a step) {weak / one:.2f}× (target ≥ 1.8×), strong (4 × 8) {strong / one:.2f}× "
            f"(target ≥ 1.5×): missed; {one:.2f} samples/s on 1 GPU ({n1}, {n2}, {n2w} measured steps)")


def compile_rate():
    rows = [r for r in read_csv("compile_throughput_h100host.csv") if r["label"].startswith("after:")]
    out = []
    for fam in ("hgemm_cutlass", "hgemm_wgmma"):
        v = [r for r in rows if r["label"] == f"after:{fam}"]
        wall = max(float(r["done_at_s"]) for r in v)
        out.append(f"{fam} {len(v) / wall * 60:.1f}/min")
    return ", ".join(out) + " (32 distinct sources each, 16 jobs, cold cache)"


# ---- the table ----------------------------------------------------------------------------
# (area, metric, value: a function or a quoted value, card, date, timing protocol, command,
#  source: a docs/data file or a docs/history file, quote for history sources)
ROWS = [
    dict(area="timing", metric="evaluator's cuBLASLt-autotuned time against a standalone graph timer (no shared code), 64³–16384³",
         value=lambda: trust_runs(trust_agree, ["trust_h100_2026-11-27e.csv", "trust_h100_2026-11-27d.csv",
                                                "trust_h100_2026-11-27c.csv", "trust_h100_2026-11-27b.csv"]),
         card=H100, date="2026-11-27", protocol=DEVICE,
         command="`bash bench/gpu_integrity.sh B $OUT trust`", source="docs/data/trust_h100_2026-11-27e.csv"),
    dict(area="timing", metric="the same kernel evaluated twice",
         value=lambda: trust_runs(trust_repeat, ["trust_h100_2026-11-27e.csv", "trust_h100_2026-11-27d.csv",
                                                 "trust_h100_2026-11-27c.csv", "trust_h100_2026-11-27b.csv"]),
         card=H100, date="2026-11-27", protocol=DEVICE,
         command="`bash bench/gpu_integrity.sh B $OUT trust`", source="docs/data/trust_h100_2026-11-27e.csv"),
    dict(area="timing", metric="evaluator's cuBLASLt-autotuned time against the standalone timer's, both at the rated "
         "clock (each replay's SM clock stamped), 64³–16384³",
         value=lambda: trust_runs(trust_rated, ["trust_h100_2026-11-27e.csv", "trust_h100_2026-11-27d.csv"]),
         card=H100, date="2026-11-27", protocol=DEVICE + " at the rated clock",
         command="`bash bench/gpu_integrity.sh B $OUT trust`", source="docs/data/trust_h100_2026-11-27e.csv"),
    dict(area="timing", metric="the standalone reference against itself at the 700 W cap: its top cuBLASLt algorithm, "
         "with and without a near-idle 30 ms gap before each timed replay",
         value=reference_neighbors, card=H100, date="2026-11-27", protocol=DEVICE,
         command="`NB_EVAL_BUILD=B SEQ_REPEATS=3 bash bench/gpu_trust_neighbors.sh $OUT 4096,8192`",
         source="docs/data/trust_h100_2026-11-27c/neighbors_run2/neighbors.csv"),
    dict(area="timing", metric="evaluator's cuBLASLt-autotuned time against a standalone graph timer (no shared code), 64³–16384³",
         value=lambda: trust_agree("trust_h200_2026-11-27.csv"), card="H200", date="2026-11-27", protocol=DEVICE,
         command="`bash bench/gpu_integrity.sh B $OUT trust`", source="docs/data/trust_h200_2026-11-27.csv"),
    dict(area="timing", metric="the same kernel evaluated twice",
         value=lambda: trust_repeat("trust_h200_2026-11-27.csv"), card="H200", date="2026-11-27", protocol=DEVICE,
         command="`bash bench/gpu_integrity.sh B $OUT trust`", source="docs/data/trust_h200_2026-11-27.csv"),
    dict(area="timing", metric="evaluator throughput, 240 distinct naive HGEMM candidates, cold compile cache",
         value="621 candidates/minute", card="H200", date="2026-11-22", protocol="wall time (16 cores)",
         command="`bench/bench_evaluator 240 256x256x256`",
         source="docs/history/2026-11-22-reward-evaluator.md",
         quote="**23.2 s wall → 621 candidates/minute**"),
    dict(area="timing", metric="evaluator throughput, 240 distinct naive HGEMM candidates, cold compile cache: the protocol before issue 38 (v3) → v4, one build, one call",
         value="256³ 148.9 → 171.2 candidates/minute, 64³ 159.7 → 191.2 (target ≥ 600: missed); worker 0.390 → 0.344 s and 0.363 → 0.307 s a candidate",
         card="H200", date="2026-11-28", protocol="wall time (16 cores)",
         command="`bash bench/gpu_evaluator_v4.sh $OUT build,bench 240`",
         source="docs/history/2026-11-28-evaluator-v4-issue38.md",
         quote="Throughput, 240 candidates, v3 → v4 in one call: 256³ 148.9 → 171.2 candidates/minute, 64³ 159.7 → 191.2 (target ≥ 600: missed); worker 0.390 → 0.344 s and 0.363 → 0.307 s a candidate."),
    dict(area="timing", metric="cold-L2 fixtures (inputs loaded with L2 evict_last; the next timing set prefetched) against the plain tiled kernel they modify",
         value="old protocol −22.1 % and −15.3 % at 64³, −25.2 % and −16.7 % at 256³; v4 +0.8 % and +4.7 %, +0.5 % and −0.1 % (no gain); a second run: +1.7 % and +5.4 %, +0.2 % and −2.5 % (prefetch at 256³: missed)",
         card="H200", date="2026-11-28", protocol="device time",
         command="`tests/test_reward_l2_gpu` (`bash bench/gpu_evaluator_v4.sh $OUT build,l2test`)",
         source="docs/history/2026-11-28-evaluator-v4-issue38.md",
         quote="old protocol −22.1 % and −15.3 % at 64³, −25.2 % and −16.7 % at 256³; v4 +0.8 % and +4.7 %, +0.5 % and −0.1 % (no gain); a second run: +1.7 % and +5.4 %, +0.2 % and −2.5 % (prefetch at 256³: missed"),
    dict(area="timing", metric="evaluator throughput, 120 distinct naive HGEMM candidates, cold compile cache: the context-free capture runner (`reward.capture: shim`, opt-in) against the context runner, one call, beside 3 busy GPUs",
         value="256³ 111.6 → 238.5 candidates/minute, 64³ 128.4 → 379.2 (target ≥ 600: missed); worker 0.448 → 0.206 s and 0.365 → 0.123 s a candidate",
         card="4 × H200", date="2026-11-28", protocol="wall time (64 cores, 4 lanes)",
         command="`bash bench/gpu_issue38_x4.sh $OUT 120 545`",
         source="docs/history/2026-11-28-session18-shim-x4.md",
         quote="Throughput, 120 candidates, context → shim capture in one call beside 3 busy GPUs: 256³ 111.6 → 238.5 candidates/minute, 64³ 128.4 → 379.2 (target ≥ 600: missed); worker 0.448 → 0.206 s and 0.365 → 0.123 s a candidate."),
    dict(area="timing", metric="evaluator's cuBLASLt-autotuned time against the standalone timer's at the rated clock, 64³–16384³, evaluator v4 (context capture)",
         value="within 1.5 % at 8/12 shapes (64³–512³ +1.52 % to +2.17 %: missed); as run within 3 % at 12/12",
         card="H200", date="2026-11-28", protocol="device time",
         command="`bash bench/gpu_evaluator_v2.sh B $OUT trust`",
         source="docs/history/2026-11-28-session18-shim-x4.md",
         quote="Trust, evaluator v4 with context capture, at the rated clock: within 1.5 % at 8/12 shapes (64³–512³ +1.52 % to +2.17 %: missed); as run within 3 % at 12/12."),
    dict(area="timing", metric="the catalog's small-shape winners (8 of 174 below 2^27) under evaluator v4 against v3, same card, same call",
         value="within 3 % at 8/8 (−1.84 % to +2.21 %)",
         card="H200", date="2026-11-28", protocol="device time",
         command="`bash bench/gpu_catalog_small.sh B $OUT 8 2`",
         source="docs/history/2026-11-28-session18-shim-x4.md",
         quote="The catalog's small-shape winners under v4 against v3: within 3 % at 8/8 (−1.84 % to +2.21 %)."),
    dict(area="families", metric="best family per shape against lt-auto-max, 1,000-shape `full` grid (nn)",
         value=grid_all, card=H100, date="2026-11-24/26", protocol=DEVICE,
         command="`bash bench/gpu_family_grid.sh`, `bench/merge_family_grids.py`",
         source="docs/data/family_grid_h100.csv"),
    dict(area="families", metric="the same below 2^27 multiply-adds",
         value=grid_small, card=H100, date="2026-11-26", protocol=DEVICE,
         command="`bash bench/gpu_family_grid.sh` (`FAMILIES=hgemm_small`)",
         source="docs/data/family_grid_h100.csv"),
    dict(area="families", metric="4096³ and 8192³, nn and tn: best variant against lt-auto",
         value=grid_large, card=H100, date="2026-11-24", protocol=DEVICE,
         command="`bash bench/gpu_family_grid.sh`", source="docs/data/family_large_h100.csv"),
    dict(area="families", metric="64³: hgemm_small 32x32x64 against cuBLASLt autotuned (standalone bench)",
         value=small_64, card=H100, date="2026-11-26", protocol=DEVICE,
         command="`bash bench/gpu_small_profile.sh`", source="docs/data/small_bench_h100.csv"),
    dict(area="catalog", metric="catalog from the grid's results stores",
         value=catalog, card=H100, date="2026-11-26", protocol=DEVICE,
         command="`kernelrl catalog build`, `bench/merge_catalogs.py`",
         source="docs/data/catalog_h100_grid_issue24.json.xz"),
    dict(area="catalog", metric="exported catalog through `torch.ops.kernelrl.hgemm` at its 87 winner shapes, against its own autotuned cuBLASLt",
         value=catalog_torch, card=H100, date="2026-11-26", protocol=DEVICE + " (same operands each replay)",
         command="`bash bench/gpu_catalog_grid.sh`", source="docs/data/catalog_grid_torch_h100.csv"),
    dict(area="rl", metric="GPU quickstart (exemplars seeded from the family grid), HGEMM stage: correct samples and best speedup, steps 1 → 5 of 8 (cut by the call's time)",
         value="56 % → 97 %; best 1.04× → 1.21×", card=H100, date="2026-11-27", protocol=DEVICE,
         command="`bash bench/gpu_quickstart.sh`", source="docs/history/2026-11-27-gpu-session-issues-22-23-25-26.md",
         quote="GPU quickstart, HGEMM steps 1 → 5: correct 56 % → 97 %; best 1.04× → 1.21×."),
    dict(area="rl", metric="GPU quickstart, best policy kernel per shape against lt-auto-max (64³–512³)",
         value="3 of 4 shapes beat cuBLASLt (1.11×–1.21×), two of them exact copies of the hgemm_small variants the prompts showed; 64³ 1.21× where that family's best reached 1.42×",
         card=H100, date="2026-11-27", protocol=DEVICE,
         command="`bash bench/gpu_quickstart.sh`", source="docs/history/2026-11-27-gpu-session-issues-22-23-25-26.md",
         quote="3 of 4 shapes beat cuBLASLt (1.11×–1.21×), two of them exact copies of the hgemm_small variants the prompts showed; 64³ 1.21× where that family's best reached 1.42×"),
    dict(area="rl", metric="GPU quickstart, HGEMM step wall time (4 prompts × 8 samples)",
         value="127 s, then 65–70 s (compile 50–60 s of each), 13 s once samples repeat cached sources: 5 steps in 5 min 41 s (target 8 in 4 min: missed)",
         card=H100, date="2026-11-27", protocol="wall time (16 cores)",
         command="`bash bench/gpu_quickstart.sh`", source="docs/history/2026-11-27-gpu-session-issues-22-23-25-26.md",
         quote="127 s, then 65–70 s (compile 50–60 s of each), 13 s once samples repeat cached sources: 5 steps in 5 min 41 s (target 8 in 4 min: missed)"),
    dict(area="rl", metric="CPU quickstart (`configs/quickstart-cpu.yaml`): the policy's own samples correct, mean of steps 1-4 → 5-8",
         value="7 % → 11 %: not learning", card="2 pinned cores (Intel Xeon, device host)",
         date="2026-11-26", protocol="host time",
         command="`kernelrl train configs/quickstart-cpu.yaml` under `taskset -c 0,1`",
         source="docs/history/2026-11-26-lift-issue25.md",
         quote="mean of steps 1–4 → 5–8: correct\n7 % → 11 %"),
    dict(area="rl", metric="CPU quickstart at lr 1e-4 after 2 warmup steps, 12 HGEMM steps, demonstrations off: the policy's own samples correct, mean of steps 1-6 → 7-12",
         value="seed 1: 62 % → 89 % (learned); seed 0: 41 % → 49 % (not)", card="2-core CPU host (Intel Xeon), loaded (load 7-11)",
         date="2026-11-27", protocol="host time",
         command="`kernelrl train configs/quickstart-cpu.yaml run.seed=N rollout.demonstrations=0`",
         source="docs/history/2026-11-27-cpu-quickstart-issue25.md",
         quote="seed 1: 62 % → 89 % (learned); seed 0: 41 % → 49 % (not)"),
    dict(area="rl", metric="CPU quickstart, 12 HGEMM steps, demonstrations off: the fixed probe's correct rate (4 training shapes × 8 samples, the same prompts and seeds), before → after RL",
         value="seed 0: 31 % → 88 %; seed 1: 50 % → 88 % (both learned)", card="2-core CPU host (Intel Xeon), quiet (load 1.5-2.3)",
         date="2026-11-27", protocol="host time",
         command="`kernelrl train configs/quickstart-cpu.yaml run.seed=N`",
         source="docs/history/2026-11-27-cpu-quickstart-two-seeds-issue25.md",
         quote="seed 0: 31 % → 88 %; seed 1: 50 % → 88 % (both learned)"),
    dict(area="rl", metric="CPU quickstart (`scripts/quickstart.sh` without a GPU, after the build): data, pretraining and 12 HGEMM RL steps, wall time",
         value="286 s", card="2-core CPU host (Intel Xeon), quiet (load 1.6-1.8)",
         date="2026-11-27", protocol="wall time",
         command="`kernelrl data synth` + `kernelrl train configs/quickstart-cpu.yaml`",
         source="docs/history/2026-11-27-cpu-quickstart-two-seeds-issue25.md",
         quote="286 s all in"),
    dict(area="lift", metric="HGEMM RL lift on 10 held-out shapes: mean best-of-16 against lt-auto, before → after 6 RL steps (8.4M policy, exemplars from the sweep grid)",
         value="0.519× → 0.505× (−2.6 %); 0 of 10 beat the sweep's best variant; novelty 0 %", card=H100,
         date="2026-11-26", protocol=DEVICE,
         command="`LIFT_CONFIG=configs/lift-session.yaml MAX_SHAPES=10 bash bench/gpu_rl_lift.sh`",
         source="docs/history/2026-11-26-lift-session-issue25.md",
         quote="10 shapes. Mean best-of-16: **before 0.519×, after 0.505× (lift −2.6 %)**, sweep 0.825×,\n"
               "exemplar 0.473×. Share ≥ 1.0×: 0 % before and after. After beats the sweep at 0 of 10, the\n"
               "exemplar shown at 4 of 10. Novelty 0 %"),
    dict(area="lift", metric="HGEMM RL lift on the 18 held-out shapes below 2^27: mean best-of-16 against lt-auto, before → after 16 RL steps (8.4M policy, `configs/lift-small.yaml`)",
         value=lift_small, card=H100, date="2026-11-27", protocol=DEVICE,
         command="`LIFT_CONFIG=configs/lift-small.yaml MAX_SHAPES=18 bash bench/gpu_rl_lift.sh B $OUT`",
         source="docs/data/lift_small_h100_2026-11-27/summary.json"),
    dict(area="lift", metric="the same 18 shapes, sampled at temperature 1.0 with a KL tether (0.04) to the pretrained policy, 28 RL steps (`configs/lift-explore.yaml`)",
         value=lift_explore, card=H100, date="2026-11-27", protocol=DEVICE,
         command="`LIFT_CONFIG=configs/lift-explore.yaml MAX_SHAPES=18 bash bench/gpu_rl_lift.sh B $OUT`",
         source="docs/data/lift_explore_h100_2026-11-27/summary.json"),
    dict(area="lift", metric="the bar RL is judged against: hgemm_small's whole list (132 variants) against the sweep's 3 picks per family, held-out shapes below 2^27",
         value=sweep_headroom, card="H200", date="2026-11-27", protocol=DEVICE,
         command="`bash bench/gpu_sweep_headroom.sh B $OUT`",
         source="docs/data/sweep_headroom_h200_2026-11-27/headroom.csv"),
    dict(area="lift", metric="HGEMM RL step (lift-session: 4 prompts × 8 samples), wall time, steps 1 → 6",
         value="187 s → 25–57 s (steps 3–6); pool seeding 83 s → 9–15 s, compile 57 s → 4–5 s", card=H100,
         date="2026-11-26", protocol="wall time (16 cores)",
         command="`LIFT_CONFIG=configs/lift-session.yaml bash bench/gpu_rl_lift.sh`",
         source="docs/history/2026-11-26-lift-session-issue25.md",
         quote="a step took 187 s at step 1 and 25–57 s at steps 3–6 (of 6); pool seeding 83 s → 9–15 s,\n"
               "compile 57 s → 4–5 s."),
    dict(area="compile", metric="candidates compiled per minute, 16-CPU host",
         value=compile_rate, card="H100 host (16 CPUs)", date="2026-11-26", protocol="wall time",
         command="`bash bench/gpu_compile.sh`", source="docs/data/compile_throughput_h100host.csv"),
    dict(area="pretrain", metric="HGEMM RL samples/s on 2 GPUs against 1 (`configs/lift-small.yaml`'s RL stage from its 8.4M pretrained policy, median step after the first)",
         value=rl_scaling, card="2 × H200", date="2026-11-27", protocol="wall time (32 cores)",
         command="`RL_CONFIG=configs/lift-small.yaml RL_STAGE=1 PHASES=\"policy rl\" bash bench/gpu_multigpu.sh`",
         source="docs/data/rl_scaling_h200x2_2026-11-27/run1_before_sharded_seeding/multigpu.md"),
    dict(area="pretrain", metric="HGEMM RL samples/s on 4 GPUs against 1 (the same RL stage and policy; median step after the first)",
         value="weak (16 × 8 a step) 1.33× (target ≥ 3.4×: missed; 1.53× by the mean, 3 steps), 0.95× before the runners saw only their own GPU; strong (4 × 8) 1.35×",
         card="4 × H200", date="2026-11-27", protocol="wall time (64 cores)",
         command="`RL_CONFIG=configs/lift-small.yaml RL_STAGE=1 PHASES=\"policy rl\" bash bench/gpu_multigpu.sh`",
         source="docs/history/2026-11-27-gpu-session14.md",
         quote="Summary: 4 GPUs, weak (16 × 8 a step): 1.33× by the median step (1.53× by the mean, 3 steps; target ≥ 3.4×: missed), 0.95× before the runners saw only their own GPU; strong (4 × 8): 1.35×."),
    dict(area="pretrain", metric="a fresh process's CUDA context and stream (each candidate runner's start)",
         value="260 ms seeing its own GPU, 643 ms seeing all 4; four at once, one per GPU: 1,097 ms each (serialized host-wide)",
         card="4 × H200", date="2026-11-27", protocol="wall time, median of 10 rounds",
         command="`bash bench/gpu_context_init.sh $OUT`",
         source="docs/history/2026-11-27-gpu-session14.md",
         quote="A fresh process's CUDA context and stream: 260 ms seeing its own GPU, 643 ms seeing all 4; four at once, one per GPU: 1,097 ms each."),
    dict(area="pretrain", metric="HGEMM RL step on one GPU with spare runners (`reward.spare_runners` 16, started while the batch compiles): candidates' wait for their runners to start",
         value="0.045 s a step (median of 28 steps, 0.03–0.30 s); 594 of 596 runners were spares; a spare-less step was not timed beside it",
         card=H100, date="2026-11-27", protocol="wall time (16 cores)",
         command="`LIFT_CONFIG=configs/lift-explore.yaml MAX_SHAPES=18 bash bench/gpu_rl_lift.sh B $OUT` (metric `runner_start_s`)",
         source="docs/history/2026-11-27-lift-explore-issue25.md",
         quote="Summary: with spare runners, candidates waited 0.045 s a step for their runners to start (median of 28 HGEMM RL steps, 0.03–0.30 s; 594 of 596 runners were spares)."),
    dict(area="pretrain", metric="pretraining step, preset `base` (114M), 32 × 2048 tokens",
         value="264,713 tokens/s, MFU 21.4 %, 1.15× HF eager", card=H100, date="2026-11-22",
         protocol="wall time, 20 steps", command="`bash bench/bench_pretrain.sh`",
         source="docs/history/2026-11-22-pretrain-throughput.md",
         quote="| cxx_b32 | kernelrl | eager | fused | off | 32 x 2048 | 264,713 | 247.6 | 21.4 % | 55.0 | 1.15x |"),
    dict(area="pretrain", metric="generation, preset `base`, batch 64, prompt 512, 512 new tokens (CUDA-graph decode)",
         value="~30.8k tok/s: 4.8× HF `generate` (dynamic cache), 1.7× (static, compiled)", card="H200",
         date="2026-11-22", protocol="wall time, warm runs", command="`bench/bench_generate --cuda-graph 1`",
         source="docs/history/2026-11-22-model-generation.md",
         quote="kernelrl (graph, median ~30.8k tok/s) is **4.8x** HF dynamic-cache `generate` (6.4k) and\n"
               "  **1.7x** HF static-cache `generate`"),
    dict(area="import", metric="Qwen2-1.5B-shaped HF import: bf16 logits against transformers; generation",
         value="max abs Δlogit 0; 2.06× HF `generate`", card=H100, date="2026-11-24", protocol="wall time",
         command="`bash bench/gpu_hf_policy.sh`", source="docs/history/2026-11-24-hf-policy-gpu.md",
         quote="| Qwen2 1.5B-shaped, full fine-tune | 0 / 0 | 100 % | 0 | 9,371 | 4,553 | **2.06×** |"),
    dict(area="import", metric="Llama-3.1-8B-shaped HF import: bf16 logits against transformers (reference loaded back from the checkpoint); generation",
         value="max abs Δlogit 0, argmax 100 %, KL 0 (was 0.328 before the RoPE fix); 2.49× HF `generate`",
         card=H100, date="2026-11-27", protocol="wall time", command="`HF_POLICY_SHAPES=llama3-8b bash bench/gpu_hf_policy.sh`",
         source="docs/history/2026-11-27-gpu-session-issues-22-23-25-26.md",
         quote="max abs Δlogit 0, argmax 100 %, KL 0 (was 0.328 before the RoPE fix); 2.49× HF `generate`"),
    dict(area="build", metric="`.ci/run` on a clean clone, 2 quiet cores, no ccache, no pip cache",
         value="1,803 s: 368/369 passed (setup and build ~732 s, tests 1,071 s); target ≤ 20 min: missed",
         card="2-core CPU host", date="2026-11-28", protocol="wall time",
         command="`PIP_NO_CACHE_DIR=1 CCACHE_DISABLE=1 CI=true bash .ci/run`",
         source="docs/history/2026-11-28-session18-shim-x4.md",
         quote="1,803 s wall: setup and build ~732 s,\n`ctest -j2` 1,071 s; 368 of 369 passed, 1 failed. **The 20-minute target is missed.**"),
    dict(area="build", metric="`bash scripts/test.sh` on a clean clone (`.ci/run`), 2 cores, no ccache",
         value="1,848 s: 228/228 passed (setup + build 1,407 s, tests 441 s)", card="2-core CPU host (AMD EPYC)",
         date="2026-11-26", protocol="wall time", command="`CI=true bash .ci/run`",
         source="docs/history/2026-11-24-ci-time.md",
         quote="**228/228 passed, 1,848 s wall**\n(setup, configure and build 1,407 s; `ctest -j2` 441 s)"),
    dict(area="build", metric="`bash scripts/test.sh` on a fresh clone, 2 quiet cores, no ccache, a new venv from PyPI (no pip cache), unity builds",
         value="13 min 22.3 s, 13 min 17.1 s and 12 min 33.7 s in three runs, every test passing",
         card="2-core CPU host (Intel Xeon)", date="2026-11-27", protocol="wall time",
         command="`PIP_NO_CACHE_DIR=1 CCACHE_DISABLE=1 bash scripts/test.sh`",
         source="docs/history/2026-11-27-fresh-clone-issue26.md",
         quote="Three fresh clones all in: 13 min 22.3 s, 13 min 17.1 s and 12 min 33.7 s, every test passing in\neach, the last on the code as submitted."),
]

AREAS = {"timing": "[Timing and trust](#timing-and-trust)",
         "families": "[HGEMM families and the grid](#hgemm-families-and-the-grid)",
         "catalog": "[Catalog](#catalog)",
         "rl": "[RL and the quickstart](#rl-and-the-quickstart)",
         "compile": "[Compile throughput](#compile-throughput)",
         "pretrain": "[Pretraining, generation, multi-GPU](#pretraining-generation-multi-gpu)",
         "lift": "[RL lift](#rl-lift)",
         "import": "[Model import](#model-import)",
         "build": "[Build and test time](#build-and-test-time)"}

NUM = re.compile(r"\d[\d,]*(?:\.\d+)?")


def norm(s):
    return " ".join(s.split())


def row_value(r):
    return r["value"]() if callable(r["value"]) else r["value"]


def source_link(src):
    return f"[{Path(src).name}]({Path(src).relative_to('docs').as_posix()})"


def render(rows=ROWS):
    out = ["| area | metric | value | card | date | protocol | command | source |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| " + " | ".join([AREAS[r["area"]], r["metric"], row_value(r), r["card"], r["date"],
                                      r["protocol"], r["command"], source_link(r["source"])]) + " |")
    return "\n".join(out)


def check_quotes(rows=ROWS):
    errors = []
    for r in rows:
        if not (ROOT / r["source"]).exists():
            errors.append(f"{r['metric']}: source {r['source']} does not exist")
            continue
        if callable(r["value"]):
            continue
        text = norm((ROOT / r["source"]).read_text())
        quote = norm(r["quote"])
        if quote not in text:
            errors.append(f"{r['metric']}: the quote is not in {r['source']}: {quote[:80]}...")
        for n in NUM.findall(r["value"]):
            if n not in quote:
                errors.append(f"{r['metric']}: value's number {n} is not in its quote")
    return errors


# A measured number in README: a value with a unit (%, ×, µs, s, minutes, tok/s ...).
README_NUM = re.compile(r"~?\d[\d,]*(?:\.\d+)?(?:\s?[-–]\s?\d[\d,]*(?:\.\d+)?)?\s?"
                        r"(?:%|×|µs|us\b|s\b|min\b|minutes?\b|tok/s|tokens/s|candidates/min)")


def check_readme(table, readme_text):
    errors = []
    table_n = norm(table)
    for m in README_NUM.finditer(readme_text):
        n = m.group(0)
        key = re.sub(r"\s+", " ", n).lstrip("~")
        if key not in table_n and key.replace(" ", "") not in table_n.replace(" ", ""):
            line = readme_text[:m.start()].count("\n") + 1
            errors.append(f"README.md:{line}: '{n}' is not in the headline table of docs/benchmarks.md")
    return errors


def check_sections(doc, table):
    """Every measured number in the area sections after the table (a value with a unit, not a
    target written with ≥ or ≤) is in the table or in a report the section links."""
    errors = []
    body = doc.split(END, 1)[1] if END in doc else doc
    for sec in re.split(r"\n(?=## )", body):
        title = sec.strip().split("\n")[0]
        texts = [norm(table)]
        for link in re.findall(r"\]\(([^)#]+\.md)\)", sec):
            path = ROOT / "docs" / link
            if not path.exists():
                errors.append(f"docs/benchmarks.md, {title}: link {link} does not exist")
                continue
            texts.append(norm(path.read_text()))
        for m in README_NUM.finditer(sec):
            if re.search(r"[≥≤<>]\s*$", sec[max(0, m.start() - 3):m.start()]):
                continue  # a target, not a measurement
            for n in NUM.findall(m.group(0)):
                if not any(re.search(r"(?<![\d.,])" + re.escape(n) + r"(?![\d,]|\.\d)", t) for t in texts):
                    errors.append(f"docs/benchmarks.md, {title}: '{m.group(0)}' is in neither the table "
                                  f"nor a report the section links")
    return errors


def current_table(doc):
    if BEGIN not in doc or END not in doc:
        return None
    return doc.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def check(doc, readme_text, rows=ROWS):
    errors = check_quotes(rows)
    want = render(rows)
    have = current_table(doc)
    if have is None:
        errors.append(f"docs/benchmarks.md: no {BEGIN} ... {END} block")
    elif have != want:
        w, h = want.split("\n"), have.split("\n")
        for i in range(max(len(w), len(h))):
            a = w[i] if i < len(w) else "(none)"
            b = h[i] if i < len(h) else "(none)"
            if a != b:
                errors.append(f"docs/benchmarks.md headline row {i - 1}: the data gives\n    {a}\n  the table has\n    {b}")
    errors += check_readme(want, readme_text)
    errors += check_sections(doc, want)
    return errors


def self_test(doc, readme_text):
    """Each kind of drift must make check() fail."""
    base = check(doc, readme_text)
    assert not base, "the committed table does not check:\n" + "\n".join(base)
    failures = []
    # 1. a value edited by hand in the table
    table = current_table(doc)
    first = next(l for l in table.split("\n")[2:] if re.search(r"\d\.\d{3}×", l))
    doc2 = doc.replace(first, re.sub(r"(\d\.\d{3})×", lambda m: f"{float(m.group(1)) + 0.1:.3f}×", first, count=1))
    if not check(doc2, readme_text):
        failures.append("an edited value in the table passed")
    # 2. the data changed under the table (a computed row's value function returns another value)
    rows = [dict(r) for r in ROWS]
    i = next(k for k, r in enumerate(rows) if callable(r["value"]))
    f = rows[i]["value"]
    rows[i]["value"] = lambda: f().replace("1", "2", 1)
    if not check(doc, readme_text, rows):
        failures.append("changed data passed")
    # 3. a quote that is not in its source, and a value number not in its quote
    rows = [dict(r) for r in ROWS]
    j = next(k for k, r in enumerate(rows) if not callable(r["value"]))
    rows[j]["quote"] = rows[j]["quote"] + " 12345"
    if not check_quotes(rows):
        failures.append("a quote missing from its source passed")
    rows = [dict(r) for r in ROWS]
    rows[j]["value"] = rows[j]["value"] + " (9876 s)"
    if not check_quotes(rows):
        failures.append("a value number outside its quote passed")
    # 4. an area section quoting a number neither the table nor its reports have
    doc3 = doc.replace("\n## Catalog\n", "\n## Catalog\n\nIt took 4321 s.\n", 1)
    if doc3 == doc or not check(doc3, readme_text):
        failures.append("an area-section number outside the table and its reports passed")
    # 5. README quoting a number the table does not have
    if not check(doc, readme_text + "\nIt took 4321 s.\n"):
        failures.append("a README number outside the table passed")
    return failures


def main(argv):
    mode = argv[1] if len(argv) > 1 else "--check"
    bench = ROOT / "docs" / "benchmarks.md"
    doc = bench.read_text()
    readme_text = (ROOT / "README.md").read_text()
    if mode == "--write":
        if current_table(doc) is None:
            sys.exit(f"headline.py: docs/benchmarks.md has no {BEGIN} ... {END} block")
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        bench.write_text(head + BEGIN + "\n" + render() + "\n" + END + tail)
        errors = check_quotes() + check_readme(render(), readme_text)
    elif mode == "--check":
        errors = check(doc, readme_text)
    elif mode == "--self-test":
        errors = self_test(doc, readme_text)
    else:
        sys.exit(f"headline.py: unknown option '{mode}' (known: --check, --write, --self-test)")
    for e in errors:
        print("headline.py:", e, file=sys.stderr)
    if errors:
        print("headline.py: run `python3 scripts/headline.py --write` after changing data, "
              "or fix the quote/README", file=sys.stderr)
        return 1
    print(f"headline.py: {mode[2:]}: {len(ROWS)} rows ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
