#!/usr/bin/env bash
# Kernel families on the GPU (issue 5), from the repository root of a configured build:
#   bash bench/bench_family_eval.sh BUILD_DIR OUT_DIR [bench_family_eval flags...]
# 1. builds kernelrl_eval_worker and bench_family_eval in BUILD_DIR (nothing else is needed:
#    the variants come from data/families.h, no `kernelrl data synth` step);
# 2. bench_family_eval through reward/'s Evaluator: general families on their suite tasks, an
#    fp16-accumulation sample, mma.sync at 4096^3, every HGEMM family on the small shapes ->
#    OUT_DIR/family_eval.{md,csv,log} (stops starting work after --time-budget-s 200);
# 3. the 4 fastest mma.sync variants per layout at 4096^3 again with the standalone
#    bench/bench_families.sh (own correctness shapes, cuBLASLt autotuned over its heuristic
#    list, CUDA events, 15 interleaved rounds) -> OUT_DIR/bench_families/, a second instrument
#    for the % of cuBLASLt.
# Expected: about 3-4 minutes on an H200 with 16 cores.
set -uo pipefail
build=${1:-build-gpu}
out=${2:-${OUT:-/tmp/family-eval}}
shift $(( $# < 2 ? $# : 2 ))
mkdir -p "$out"
start=$(date +%s)
cmake --build "$build" --target kernelrl_eval_worker bench_family_eval 2>&1 | tail -1
echo "build: $(( $(date +%s) - start )) s"
emit=$(mktemp -d)
timeout 330 "$build/bench/bench_family_eval" --out "$out" --time-budget-s 200 \
  --emit-dir "$emit/mma_top" --emit-top 4 "$@" 2>&1 | tee "$out/family_eval.log"
rc=${PIPESTATUS[0]}
echo "bench_family_eval: exit $rc after $(( $(date +%s) - start )) s"
if ls "$emit"/mma_top/*.cu > /dev/null 2>&1; then
  timeout 150 bash bench/bench_families.sh "$emit/mma_top" "$out/bench_families" 4096 4096 4096 \
    > "$out/bench_families.log" 2>&1
  grep -v "^  FAIL\|general CUDA variants\|^variant " "$out/bench_families.log" | tail -20
fi
rm -rf "$emit"
echo "total: $(( $(date +%s) - start )) s"
exit "$rc"
