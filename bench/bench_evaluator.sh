#!/usr/bin/env bash
# GPU benchmarks of the evaluator (issue 4), run on the device machine from the repository root:
#   cmake --build BUILD_DIR --target kernelrl bench_evaluator
#   bash bench/bench_evaluator.sh BUILD_DIR OUT_DIR
# 1. throughput: distinct small candidates per minute through compile + check + time;
# 2. `kernelrl bench` of the reference kernel over the 27-shape `small` grid, wall time.
set -euo pipefail
build=${1:-build}
out=${2:-/tmp/bench-evaluator}
mkdir -p "$out"
echo "== throughput ($(nproc) cores) =="
if [[ -x "$build/bench/bench_evaluator" ]]; then
  "$build/bench/bench_evaluator" 240 256x256x256 2>&1 | tee "$out/throughput.txt" || true
else
  echo "skipped: $build/bench/bench_evaluator is not built"
fi
echo "== kernelrl bench --grid small (reference WMMA kernel) =="
kdir=$(mktemp -d)
for m in 256 4096 16384; do for n in 256 4096 16384; do for k in 256 4096 16384; do
  cp tests/data/kernels/gpu_hgemm_ref.cu "$kdir/${m}_${n}_${k}.cu"
done; done; done
start=$(date +%s)
"$build/kernelrl" bench --kernels "$kdir" --grid small --out "$out/bench_small.csv" \
  --cache-dir "$kdir/cache" 2>&1 | tail -20 | tee "$out/bench_small.txt"
end=$(date +%s)
echo "kernelrl bench --grid small: $((end - start)) s wall" | tee -a "$out/bench_small.txt"
