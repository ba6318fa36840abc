#!/usr/bin/env bash
# Issue 38 on a 4-GPU machine in one device call (~9 minutes): build once, then one lane per GPU
# (CUDA_VISIBLE_DEVICES), each lane's log under OUT:
#   GPU 0  every GPU test but the 2-GPU ones (ctest -L gpu -E Distributed), capture: context
#          -> OUT/lane0_gpu_tests.log
#   GPU 1  the reward, L2, family and shim GPU tests with KERNELRL_TEST_CAPTURE=shim
#          -> OUT/lane1_shim_tests.log
#   GPU 2  bench_evaluator N (default 120) at 256^3 and 64^3, capture context (v4) and shim
#          (v4-shim) interleaved per shape -> OUT/bench_*.log; then bench/gpu_catalog_small.sh
#          (the catalog's small-shape winners, v3 vs v4) -> OUT/catalog_small.csv
#   GPU 3  the trust phase (bench/gpu_evaluator_v2.sh trust: standalone timer vs the evaluator at
#          12 shapes) -> OUT/trust/
# Lanes run side by side: the context-mode bench shares the host's driver with the other lanes'
# CUDA contexts (lanes 0, 1 and 3 start runners too), so its rate is a lower bound; the shim
# runner creates none.
#   usage: bash bench/gpu_issue38_x4.sh OUT [N=120] [DEADLINE_S=540]
set -uo pipefail
out=${1:?usage: gpu_issue38_x4.sh OUT [N] [DEADLINE_S]}
n=${2:-120}
deadline=${3:-540}
t_start=$(date +%s)
mkdir -p "$out"
if [[ -z "${KERNELRL_CUTLASS_INCLUDE:-}" && -f .device/cutlass-include.tgz ]]; then
  [[ -d /tmp/cutlass/include/cute ]] || { mkdir -p /tmp/cutlass && tar -C /tmp/cutlass -xzf .device/cutlass-include.tgz; }
  export KERNELRL_CUTLASS_INCLUDE=/tmp/cutlass/include
fi
echo "gpu_issue38_x4.sh $* ($(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores)"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
b=/tmp/b-cur
t0=$(date +%s)
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/x4_cmake.log 2>&1 &&
  cmake --build $b --target kernelrl kernelrl_eval_worker kernelrl_candidate_runner kernelrl_shim_runner \
    bench_evaluator bench_timing_trust test_reward_gpu test_reward_l2_gpu test_families_gpu test_shim_capture \
    > /tmp/x4_build.log 2>&1 ||
  { grep -E "error|FAILED" /tmp/x4_build.log | head -30; tail -30 /tmp/x4_cmake.log /tmp/x4_build.log; exit 1; }
# Every GPU test executable (the names ninja knows once configured).
gpu_targets=$(cd $b && ninja -t targets all | grep -oE '^test_[a-z0-9_]+:' | tr -d : | grep -E 'gpu|shim' | sort -u)
cmake --build $b --target $gpu_targets > /tmp/x4_build2.log 2>&1 || { grep -E "error|FAILED" /tmp/x4_build2.log | head; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s ($gpu_targets)"
left() { echo $(( deadline - ($(date +%s) - t_start) )); }

( export CUDA_VISIBLE_DEVICES=0
  cd $b && timeout $(( $(left) - 10 )) ctest -L gpu -E 'Distributed' --output-on-failure --timeout 400 ) > "$out/lane0_gpu_tests.log" 2>&1 &
l0=$!
( export CUDA_VISIBLE_DEVICES=1 KERNELRL_TEST_CAPTURE=shim
  cd $b && timeout $(( $(left) - 10 )) ctest -R 'RewardGpu|RewardL2Gpu|FamiliesGpu|ShimCapture' --output-on-failure --timeout 400 ) \
  > "$out/lane1_shim_tests.log" 2>&1 &
l1=$!
( export CUDA_VISIBLE_DEVICES=2
  PROTOS="v4 v4-shim" BENCH_TIMEOUT=150 timeout $(( $(left) - 200 )) bash bench/gpu_evaluator_v4.sh "$out" bench "$n"
  timeout $(( $(left) - 10 )) bash bench/gpu_catalog_small.sh $b "$out" 8 2 ) > "$out/lane2_bench.log" 2>&1 &
l2=$!
( export CUDA_VISIBLE_DEVICES=3
  timeout $(( $(left) - 10 )) bash bench/gpu_evaluator_v2.sh $b "$out/trust" trust ) > "$out/lane3_trust.log" 2>&1 &
l3=$!
wait $l0 $l1 $l2 $l3
echo "== lanes done at $(( $(date +%s) - t_start )) s"
echo "== lane 0 (context, every GPU test but Distributed)"; grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" "$out/lane0_gpu_tests.log" | head -30
echo "== lane 1 (shim)"; grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" "$out/lane1_shim_tests.log" | head -30
echo "== lane 2 (bench, catalog)"; grep -E "wall|/min|profile|^shape|%|missing" "$out/lane2_bench.log" | head -40
echo "== lane 3 (trust)"; tail -25 "$out/lane3_trust.log"
# The device tool returns at most 8 files: everything in one archive.
tar -C "$out" -czf /tmp/x4_out.tgz . && rm -rf "${out:?}"/* && mv /tmp/x4_out.tgz "$out/issue38_x4.tgz"
echo "== total $(( $(date +%s) - t_start )) s"
