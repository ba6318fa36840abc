#!/usr/bin/env bash
# How far the standalone reference (bench_lt_graph.cu) itself moves with what runs beside its
# timed replays, at the shapes where an H100 sits at its power cap (issue 22's last trust line,
# docs/benchmarks.md "Timing and trust"). The same cuBLASLt timer, one thing changed per variant:
#   all      as the trust bench runs it: every heuristic algorithm interleaved, best one's median
#   top1     the heuristic's first algorithm alone, its replays back to back
#   top1gap  the same with a ~GAP_US one-block spin (near-idle power) before each timed replay, as
#            a slower, low-power contender beside it in the evaluator's rounds would be
# The sequence runs SEQ_REPEATS times (all top1 top1gap all top1 top1gap ...), so a variant's
# spread between its repeats is the machine's drift and its difference to another variant is
# what ran beside it. nvidia-smi logs clock, power and temperature every 500 ms beside it.
# With NB_EVAL_BUILD=BUILD (a build with bench_timing_trust, the worker and the runner) each
# repeat ends with the evaluator's trust run at the same shapes (variant `evaluator`: its lt-auto
# in the first and second evaluation of the trust kernel, device-mode defaults, 15 rounds), so
# the reference's variants and the evaluator are compared in one run.
#   usage: bash bench/gpu_trust_neighbors.sh OUT [shapes]      (shapes default 4096,8192,16384)
set -uo pipefail
out=${1:?usage: gpu_trust_neighbors.sh OUT [shapes]}
shapes=${2:-4096,8192,16384}
mkdir -p "$out"
nvcc -O2 -std=c++17 -arch=sm_90 bench/bench_lt_graph.cu -lcublasLt -o /tmp/bench_lt_graph_nb || exit 1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 500 > "$out/smi.csv" 2>/dev/null &
smi=$!
trap 'kill $smi 2>/dev/null' EXIT
# sm_mhz / rated_us: the SM clock stamped around each timed replay and the time at the rated
# clock (bench_lt_graph --clocks 1; the evaluator's own stamps for its rows).
echo "variant,repeat,start_utc,end_utc,M,N,K,algos,device_us,sm_mhz,rated_us" > "$out/neighbors.csv"
for rep in $(seq 1 "${SEQ_REPEATS:-2}"); do
  for v in all top1 top1gap; do
    case $v in
      all) args=() ;;
      top1) args=(--algos 1) ;;
      top1gap) args=(--algos 1 --gap-us "${GAP_US:-30000}") ;;
    esac
    t0=$(date -u +%H:%M:%S.%N | cut -c1-12)
    /tmp/bench_lt_graph_nb --shapes "$shapes" --layout nn --rounds 15 --clocks 1 "${args[@]}" > "/tmp/nb_$v$rep.csv" || exit 1
    t1=$(date -u +%H:%M:%S.%N | cut -c1-12)
    # The timer's rows: M,N,K,layout,algos,best_algo,device_us,call_us,tflops,sm_mhz,rated_us.
    awk -F, -v v=$v -v r=$rep -v a="$t0" -v b="$t1" 'NR > 2 { print v "," r "," a "," b "," $1 "," $2 "," $3 "," $5 "," $7 "," $10 "," $11 }' \
      "/tmp/nb_$v$rep.csv" >> "$out/neighbors.csv"
    echo "$v repeat $rep ($t0-$t1 UTC): $(awk -F, 'NR > 2 { printf "%s³ %s us (%s algos, %s MHz, rated %s us)  ", $1, $7, $5, $10, $11 }' "/tmp/nb_$v$rep.csv")"
  done
  if [[ -n "${NB_EVAL_BUILD:-}" ]]; then
    rm -rf "/tmp/nb_eval$rep"
    t0=$(date -u +%H:%M:%S.%N | cut -c1-12)
    "$NB_EVAL_BUILD/bench/bench_timing_trust" --shapes "$shapes" --busy-shapes "" --min-rounds 15 \
      --out "/tmp/nb_eval$rep" > "$out/eval$rep.log" 2>&1 || { tail -20 "$out/eval$rep.log"; exit 1; }
    t1=$(date -u +%H:%M:%S.%N | cut -c1-12)
    python3 - "/tmp/nb_eval$rep/trust.csv" "$rep" "$t0" "$t1" "$out/neighbors.csv" <<'PY'
import csv, sys
path, rep, t0, t1, out = sys.argv[1:]
with open(out, "a") as f:
    for r in csv.DictReader(open(path)):
        for run, key, rkey in (("1", "lt_auto_us", "lt_auto_rated_us"), ("2", "lt_auto_run2_us", "lt_auto_run2_rated_us")):
            f.write(f"evaluator{run},{rep},{t0},{t1},{r['M']},{r['M']},{r['M']},,{r[key]},{r['lt_auto_mhz'] if run == '1' else ''},{r[rkey]}\n")
        print(f"evaluator repeat {rep} ({t0}-{t1} UTC): {r['M']}³ lt-auto {r['lt_auto_us']} / {r['lt_auto_run2_us']} us at {r['lt_auto_mhz']} MHz")
PY
  fi
done
