#!/usr/bin/env bash
# Diagnosis of the evaluator's worker-state timing offset (docs/benchmarks.md, "Measurement
# trust"): from a worker's second evaluation on, every contender's device time per call was
# ~0.34 us longer than in its first evaluation and than the standalone timer. Each variant below
# evaluates the same kernel --repeats times at 64^3 in one worker (bench_timing_trust
# --repeat-shapes) and changes one thing:
#   default        as the evaluator runs
#   fresh-worker   every evaluation in a new worker process
#   calls40        reward.graph_calls 40 (a per-replay constant halves per call; a per-call one not)
#   hot            reward.l2 hot (no rotation of input sets, no L2 flush)
#   prereplay      an untimed replay of the same graph right before every timed replay
#   noeager        no eager companion calls between replays
#   nohold         no stream hold before a timed replay
#   twice          everything timed twice in each evaluation, the second pass reported
#   probe          a built-in kernel timed at points of every evaluation (where the state changes)
#   reserveMB      the worker holds MB of device memory from its start (KERNELRL_DIAG_RESERVE_MB)
#   gate           reward.stream_gate on (the legacy-stream gate around checked calls; the
#                  cause: with it, the offset appears after about a dozen gated calls)
#   idle3          the worker started, then 3 s idle before the first evaluation
#   eager-modules  CUDA_MODULE_LOADING=EAGER
#   no-caching     PYTORCH_NO_CUDA_MEMORY_CACHING=1 (every tensor its own cudaMalloc)
#   dot            every captured graph written as verbose Graphviz to OUT/dot (sandbox off)
#   rated          reward.clock_basis rated
#   min-roundsN    reward.min_rounds N
#   DIAG_SHAPE may list several sizes (4096,8192); every repeat line carries, per contender, the
#   SM clock (MHz) its replays ran at and its time rescaled to the rated clock.
#   usage: bash bench/gpu_trust_diag.sh BUILD OUT [variant ...]
set -uo pipefail
build=$1
out=$2
shift 2
variants=("$@")
((${#variants[@]})) || variants=(default fresh-worker calls40 hot prereplay noeager nohold eager-modules no-caching)
mkdir -p "$out"
shape=${DIAG_SHAPE:-64}
repeats=${DIAG_REPEATS:-3}
tt=$build/bench/bench_timing_trust
for v in "${variants[@]}"; do
  args=(--repeat-shapes "$shape" --repeats "$repeats" --out "$out/$v" --cache-dir /tmp/diag-cache)
  envs=()
  case $v in
    default) ;;
    fresh-worker) args+=(--fresh-worker) ;;
    calls40) args+=(--graph-calls 40) ;;
    hot) args+=(--l2 hot) ;;
    prereplay | noeager | nohold | twice | probe) envs=(KERNELRL_TIMING_DIAG=$v) ;;
    idle3) args+=(--idle-before 3) ;;
    gate) args+=(--stream-gate) ;;
    reserve*) envs=(KERNELRL_DIAG_RESERVE_MB=${v#reserve}) ;;
    eager-modules) envs=(CUDA_MODULE_LOADING=EAGER) ;;
    dot) mkdir -p "$out/dot"; envs=(KERNELRL_TIMING_DIAG=dot KERNELRL_DIAG_DIR=$out/dot); args+=(--sandbox off) ;;
    no-caching) envs=(PYTORCH_NO_CUDA_MEMORY_CACHING=1) ;;
    rated) args+=(--clock-basis rated) ;;
    min-rounds*) args+=(--min-rounds "${v#min-rounds}") ;;
    *) echo "unknown variant $v" >&2; exit 2 ;;
  esac
  t0=$(date +%s)
  env "${envs[@]}" "$tt" "${args[@]}" > "$out/$v.log" 2>&1
  rc=$?
  echo "== $v ($(( $(date +%s) - t0 )) s, exit $rc)"
  grep -E "^(repeat|probes)" "$out/$v.log" | sed -E "s/ \[[0-9:. -]+\]//"
done
