#!/usr/bin/env python3
"""Best policy-sampled kernel per task of an RL stage, from a run's results store.

usage: quickstart_best.py RUN_DIR FAMILIES_JSONL [--scope hgemm_rl] > best.md

Reads RUN_DIR/results.sqlite (reward/result_store.h: table `candidates`; rollout/exemplar_store.h:
table `exemplars`) and, per task of the stage, reports the fastest correct candidate that the
policy sampled, with its speedup over every baseline the evaluator timed beside it. A candidate
counts as the policy's when its hash is not one of the stage's step-0 seed exemplars; the table
also says whether its source is byte-identical (after trimming) to any kernel-family variant in
FAMILIES_JSONL (`kernelrl data synth` output), so a reader can tell a copy from a new kernel.
"""
import json
import sqlite3
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    run_dir, families = sys.argv[1], sys.argv[2]
    scope = sys.argv[sys.argv.index("--scope") + 1] if "--scope" in sys.argv else "hgemm_rl"
    family_code = set()
    with open(families) as f:
        for line in f:
            family_code.add(json.loads(line)["code"].strip())
    db = sqlite3.connect(f"file:{run_dir}/results.sqlite?mode=ro", uri=True)
    seeds = {h for (h,) in db.execute(
        "select id from exemplars where scope = ? and step = 0", (scope,))}
    tasks = [t for (t,) in db.execute(
        "select distinct task from exemplars where scope = ? order by task", (scope,))]
    print("Times in microseconds per call in the evaluator's timing mode (device = CUDA-graph "
          "replay, the kernel's device time); call = events around one eager call, measured in "
          "the same rounds (host issue cost included).\n")
    print(f"| task | policy candidates | correct | best speedup (t_ref: reward baseline) "
          f"| t_cand us (mode / call) | baselines us (mode / call) | call-time speedup vs lt-auto | "
          f"same as a family variant |")
    print("|---|---|---|---|---|---|---|---|")
    wins = 0
    for task in tasks:
        rows = db.execute(
            "select hash, status, speedup, reference, t_cand_us, times_json, source "
            "from candidates where task = ?", (task,)).fetchall()
        policy = [r for r in rows if r[0] not in seeds]
        passed = [r for r in policy if r[1] == "ok"]
        if not passed:
            print(f"| {task} | {len(policy)} | 0 | - | - | - | - |")
            continue
        best = max(passed, key=lambda r: r[2])
        tj = json.loads(best[5] or "{}")
        times = tj.get("baselines", {})
        cand_call = tj.get("candidate", {}).get("call_median_us", 0)
        mode = tj.get("candidate", {}).get("timing", "") or "call (old store)"
        base = ", ".join(f"{k} {v['median_us']:.2f} / {v.get('call_median_us', 0):.2f}"
                         for k, v in sorted(times.items()))
        call_sp = ", ".join(f"{v['call_median_us'] / cand_call:.3f}x vs {k}"
                            for k, v in sorted(times.items())
                            if k.startswith("lt-auto") and cand_call > 0 and v.get("call_median_us", 0) > 0) or "-"
        beats = {k: v["median_us"] / best[4] for k, v in times.items() if best[4] > 0}
        if any(k.startswith("lt-auto") and s > 1 for k, s in beats.items()):
            wins += 1
        speed = ", ".join(f"{s:.3f}x vs {k}" for k, s in sorted(beats.items()))
        copy = "yes" if (best[6] or "").strip() in family_code else "no"
        print(f"| {task} | {len(policy)} | {len(passed)} | {best[2]:.3f}x vs {best[3]} ({speed}; {mode}) "
              f"| {best[4]:.2f} / {cand_call:.2f} | {base} | {call_sp} | {copy} |")
    if scope == "hgemm_rl":
        print(f"\nTasks whose best policy kernel beats a cuBLASLt-autotuned baseline: "
              f"{wins}/{len(tasks)}")
    # Issue 6's curve criterion: mean reward of the last 20 % of the stage's steps vs the first.
    steps = []
    with open(f"{run_dir}/metrics.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if r.get("stage") == scope and "reward_mean" in r:
                steps.append(r)
    if steps:
        n = max(1, round(0.2 * len(steps)))
        first = sum(r["reward_mean"] for r in steps[:n]) / n
        last = sum(r["reward_mean"] for r in steps[-n:]) / n
        print(f"\n{scope}: {len(steps)} steps; mean reward of the first {n}: {first:.4f}, "
              f"of the last {n}: {last:.4f} ({'rising' if last > first else 'not rising'})")
        print("\n| step | reward mean | max | correct | faster | best speedup | completion |")
        print("|---|---|---|---|---|---|---|")
        for r in steps:
            print(f"| {r['step']} | {r['reward_mean']:.3f} | {r['reward_max']:.3f} "
                  f"| {100 * r['correct_rate']:.0f} % | {100 * r['faster_rate']:.0f} % "
                  f"| {r['best_speedup']:.3f} | {r.get('completion_len', 0):.0f} tok |")


if __name__ == "__main__":
    main()
