#!/usr/bin/env bash
# What the 3-per-family sweep leaves inside hgemm_small at the lift split's held-out shapes below
# 2^27 (issue 25; the offline estimate from older runs is bench/sweep_headroom.py). One call, one
# machine, one timer:
#   1. `kernelrl bench --families hgemm_small --per-family 3` (what the family grid measured);
#   2. `kernelrl bench --families hgemm_small --per-family 0` (the family's whole candidate list)
#      at the same shapes, with what is left of the budget;
#   3. per shape, from the second run's store: the fastest of the first run's picks against the
#      fastest of all, both timed in the second run (each against its own interleaved lt-auto)
#      -> OUT/headroom.md, OUT/headroom.csv.
#   usage: bash bench/gpu_sweep_headroom.sh BUILD OUT [BUDGET_S=520]   (MAX_SHAPES: the first N)
# On the device tool: carry [".device"]; source .device/env.sh first.
set -uo pipefail
build=${1:?usage: gpu_sweep_headroom.sh BUILD OUT [BUDGET_S]}
out=${2:?usage: gpu_sweep_headroom.sh BUILD OUT [BUDGET_S]}
budget=${3:-520}
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
mkdir -p "$out"
log=$out/headroom.log
{
  echo "gpu_sweep_headroom.sh $* ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null))"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"
} | tee "$log"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/gsh_cmake.log 2>&1 ||
    { tail -30 /tmp/gsh_cmake.log | tee -a "$log"; exit 1; }
fi
cmake --build "$build" --target kernelrl kernelrl_eval_worker kernelrl_candidate_runner > /tmp/gsh_build.log 2>&1 ||
  { tail -30 /tmp/gsh_build.log | tee -a "$log"; exit 1; }
echo "[$(el) s] built" | tee -a "$log"

# The held-out shapes below 2^27 of configs/lift.yaml's split (hash-fixed).
grid=$out/heldout_small.txt
# SHAPES=FILE: these shapes instead (e.g. the ones a cut-off call did not reach).
if [[ -n "${SHAPES:-}" ]]; then cp "$SHAPES" "$grid"; else
"$build/kernelrl" lift split configs/lift.yaml 2> /dev/null | grep -E '^[0-9]+x[0-9]+x[0-9]+ ' |
  awk '{split($1, d, "x"); if (log(d[1] * d[2] * d[3]) / log(2) < 27) print $1, $2, $3}' |
  head -n "${MAX_SHAPES:-100}" > "$grid"; fi
echo "[$(el) s] $(wc -l < "$grid") held-out shapes below 2^27" | tee -a "$log"
# FAMILY and BACKEND_ARGS (e.g. "hgemm_host" and "--backend host") make a CPU dry run.
common=(--families "${FAMILY:-hgemm_small}" --grid "$grid" --cache-dir /tmp/gsh_cache --order grid
        ${BACKEND_ARGS:---timing device --l2 cold})
"$build/kernelrl" bench "${common[@]}" --per-family 3 --time-budget-s 150 --out "$out/pick3.csv" \
  --store "$out/pick3.sqlite" >> "$log" 2>&1
echo "[$(el) s] per-family 3: exit $?" | tee -a "$log"
left=$((budget - $(el) - 40))
"$build/kernelrl" bench "${common[@]}" --per-family 0 --time-budget-s "$left" --out "$out/all.csv" \
  --store "$out/all.sqlite" >> "$log" 2>&1
echo "[$(el) s] per-family 0: exit $?" | tee -a "$log"

python3 - "$out" <<'EOF' | tee -a "$log"
import sqlite3, sys, os
out = sys.argv[1]
def rows(db):
    c = sqlite3.connect(os.path.join(out, db))
    return c.execute("select task, hash, speedup, t_cand_us, reference from candidates "
                     "where status = 'ok' and speedup > 0").fetchall()
picks, allr = {}, {}
for task, h, s, t, ref in rows("pick3.sqlite"):
    picks.setdefault(task, {})[h] = s
for task, h, s, t, ref in rows("all.sqlite"):
    allr.setdefault(task, {})[h] = (s, t, ref)
lines = ["| shape | variants timed (all) | sweep's picks: best here (their own run) | all: best | ratio | reference |",
         "|---|---|---|---|---|---|"]
csv = ["task,variants,picks_best_in_all_run,picks_best_own_run,all_best,ratio"]
ratios = []
for task in sorted(allr):
    if task not in picks:
        continue
    a = allr[task]
    common = [h for h in picks[task] if h in a]
    if not common:
        continue
    pb = max(a[h][0] for h in common)
    ab = max(v[0] for v in a.values())
    r = ab / pb
    ratios.append(r)
    lines.append(f"| {task} | {len(a)} | {pb:.3f}× ({max(picks[task].values()):.3f}×) | {ab:.3f}× | {r:.3f} | {next(iter(a.values()))[2]} |")
    csv.append(f"{task},{len(a)},{pb:.4f},{max(picks[task].values()):.4f},{ab:.4f},{r:.4f}")
# Every timed variant of the per-family 0 run (the store itself may be too large to bring back).
with open(os.path.join(out, "all_variants.csv"), "w") as f:
    f.write("task,hash,speedup,t_cand_us,reference,in_sweep_picks\n")
    for task in sorted(allr):
        for h, (s, t, ref) in sorted(allr[task].items(), key=lambda kv: -kv[1][0]):
            f.write(f"{task},{h},{s:.5f},{t:.4f},{ref},{int(h in picks.get(task, {}))}\n")
open(os.path.join(out, "headroom.md"), "w").write("\n".join(lines) + "\n")
open(os.path.join(out, "headroom.csv"), "w").write("\n".join(csv) + "\n")
print("\n".join(lines))
if ratios:
    print(f"{len(ratios)} shapes: the family's fastest beats the fastest of the sweep's 3 picks (both timed in the "
          f"per-family 0 run) by >= 2 % at {sum(r >= 1.02 for r in ratios)}, >= 5 % at {sum(r >= 1.05 for r in ratios)}")
EOF
echo "[$(el) s] done" | tee -a "$log"
