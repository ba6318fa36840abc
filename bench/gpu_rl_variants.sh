#!/usr/bin/env bash
# The quickstart's hgemm_rl stage run again from one finished run's general_rl checkpoint, once per
# variant (issue 14's comparisons: rollout.overlap on/off, 2 turns against 1 at equal samples),
# each variant in its own copy of the run directory with its own results store and compile cache,
# so no variant reuses another's compiles or stored results:
#   bash bench/gpu_rl_variants.sh BUILD OUT BASE_RUN 'NAME=override ...' ['NAME=override ...']...
# e.g. bash bench/gpu_rl_variants.sh /tmp/build $OUT runs/quickstart-gpu base= \
#        'overlap=rollout.overlap=1' 'turns2=rollout.turns=2 rollout.group_size=4'
# BASE_RUN: a run of configs/quickstart.yaml (bench/gpu_quickstart.sh writes runs/quickstart-gpu).
# Writes OUT/variant-NAME.log, OUT/variant-NAME-best.md (bench/quickstart_best.py: the best
# policy-sampled kernel per shape in device and call time) and OUT/rl_variants.md: per variant,
# the steps, the wall time per step and its split, reward and correct rate per step.
set -uo pipefail
build=$1
out=$2
base=$3
shift 3
kr=$build/kernelrl
mkdir -p "$out"
for spec in "$@"; do
  name=${spec%%=*}
  overrides=${spec#*=}
  dir=runs/variant-$name
  rm -rf "$dir"
  cp -r "$base" "$dir"
  rm -rf "$dir/checkpoints/hgemm_rl" "$dir/tensorboard/hgemm_rl" "$dir"/results.sqlite* "$dir/cache"
  t0=$(date +%s)
  # shellcheck disable=SC2086  # the overrides are words
  timeout "${VARIANT_TIMEOUT:-240}" "$kr" train configs/quickstart.yaml --run-dir "$dir" --resume \
    --stages hgemm_rl reward.store="$dir/results.sqlite" reward.cache_dir="$dir/cache" $overrides \
    > "$out/variant-$name.log" 2>&1
  echo "variant $name ($overrides): exit $? after $(( $(date +%s) - t0 )) s"
  # Best policy-sampled kernel per shape (seed exemplars excluded), device and call times.
  python3 bench/quickstart_best.py "$dir" runs/data/hgemm_families.jsonl --scope hgemm_rl \
    > "$out/variant-$name-best.md" 2>&1
  cp "$dir/metrics.jsonl" "$out/variant-$name-metrics.jsonl"
done
# Every variant run present (earlier calls on the same machine included).
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
names = sorted(os.path.basename(d)[len("variant-"):] for d in glob.glob("runs/variant-*") if os.path.isdir(d))
lines = ["| variant | steps | step s (median) | generate / compile / compile wait / time / update s (medians) | reward step 1 -> last | correct step 1 -> last | per-turn correct (last step) |",
         "|---|---|---|---|---|---|---|"]
for n in names:
    d = f"runs/variant-{n}"
    recs = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if l.strip()]
    recs = [r for r in recs if r.get("stage") == "hgemm_rl"]
    if not recs:
        lines.append(f"| {n} | 0 | - | - | - | - | - |")
        continue
    med = lambda k: statistics.median(r.get(k, 0) for r in recs)
    turns = ", ".join(f"{k.split('_')[0]} {recs[-1][k]:.0%}" for k in sorted(recs[-1]) if k.endswith("_correct_rate") and k.startswith("turn")) or "-"
    lines.append(f"| {n} | {len(recs)} | {med('step_s'):.1f} | {med('generate_s'):.1f} / {med('compile_s'):.1f} / "
                 f"{med('compile_wait_s'):.1f} / {med('time_s'):.1f} / {med('update_s'):.1f} | "
                 f"{recs[0]['reward_mean']:.3f} -> {recs[-1]['reward_mean']:.3f} | "
                 f"{recs[0]['correct_rate']:.0%} -> {recs[-1]['correct_rate']:.0%} | {turns} |")
    lines.append("")
    lines.append(f"{n}, per step: " + "; ".join(f"{i+1}: {r['step_s']:.1f} s, reward {r['reward_mean']:.3f}, correct {r['correct_rate']:.0%}" for i, r in enumerate(recs)))
    lines.append("")
open(os.path.join(out, "rl_variants.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
