#!/usr/bin/env bash
# Reward integrity v3 on the GPU machine (issue 22), in phases that each fit one device call:
#   build   configure (if needed) and build the evaluator (kernelrl, the worker, the candidate
#           runner), the GPU tests and the trust bench into BUILD
#   tests   the reward GPU tests (adversarial fixtures old and new, sandbox, timing, clock) and
#           the Hopper families' samples with their negative controls -> OUT/gpu_tests.log
#   trust   bench/gpu_evaluator_v2.sh's trust phase at the current defaults (standalone timer vs
#           the evaluator at 12 shapes, the same kernel twice, busy pool) -> OUT/trust*
#   peer    the sweep's CUTLASS variants at the two shapes where a parameter word of theirs fell
#           inside another timing set's buffer (2026-11-26): kernelrl eval, result and
#           metrics.peer_words -> OUT/peer_*.json
#   gpu     build everything, then every GPU test (ctest -L gpu) -> OUT/gpu_all.log
#   usage: bash bench/gpu_integrity.sh BUILD OUT build,tests,peer,trust,gpu
# On the device tool (after scripts/device_prepare.sh here): carry [".device"], command
#   rm -f /tmp/deps/.done; source .device/env.sh && bash bench/gpu_integrity.sh /tmp/b $OUT build,tests
set -uo pipefail
build=${1:?usage: gpu_integrity.sh BUILD OUT PHASES}
out=${2:?usage: gpu_integrity.sh BUILD OUT PHASES}
phases=${3:-build,tests}
mkdir -p "$out"
if [[ -z "${KERNELRL_CUTLASS_INCLUDE:-}" && -f .device/cutlass-include.tgz ]]; then
  [[ -d /tmp/cutlass/include/cute ]] || { mkdir -p /tmp/cutlass && tar -C /tmp/cutlass -xzf .device/cutlass-include.tgz; }
  export KERNELRL_CUTLASS_INCLUDE=/tmp/cutlass/include
fi
echo "gpu_integrity.sh $* ($(date -u '+%Y-%m-%d %H:%M UTC'))"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [[ ,$phases, == *,build,* ]]; then
  t0=$(date +%s)
  if [[ ! -f "$build/build.ninja" ]]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/gi_cmake.log 2>&1 ||
      { tail -40 /tmp/gi_cmake.log; exit 1; }
  fi
  # GI_EXTRA_TARGETS: more targets to build (e.g. test_model_gpu), for GI_TESTS to name.
  cmake --build "$build" --target kernelrl kernelrl_eval_worker kernelrl_candidate_runner test_reward_gpu \
    test_families_gpu test_unit bench_timing_trust ${GI_EXTRA_TARGETS:-} > /tmp/gi_build.log 2>&1 ||
    { grep -E "error|FAILED" /tmp/gi_build.log | head -30; tail -20 /tmp/gi_build.log; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
fi
if [[ ,$phases, == *,tests,* ]]; then
  t0=$(date +%s)
  (cd "$build" && ctest -R "${GI_TESTS:-RewardGpu|SandboxGpu|GraphImage|Fatbin|FamiliesGpu}" --output-on-failure \
    --timeout 400) > "$out/gpu_tests.log" 2>&1
  grep -E "^\[[a-z_ .0-9-]+\] |REPEAT|DRIFT|CLOCK|RUNNER|tests passed|Failed|FAILED|Passed|Expected|Which is|actual" \
    "$out/gpu_tests.log" | cut -c1-240
  echo "tests: $(( $(date +%s) - t0 )) s"
fi
if [[ ,$phases, == *,peer,* ]]; then
  t0=$(date +%s)
  rm -rf /tmp/gi_emit && "$build/kernelrl" data synth --families hgemm_cutlass --n 2000 --out /tmp/gi_emit.jsonl \
    --emit-dir /tmp/gi_emit > /dev/null
  for case in 128x8192x16384:bm64_bn128_bk64_cm1_cn1_sched1_raster0_swizzle1 \
              512x16384x16384:bm128_bn256_bk64_cm1_cn1_sched0_raster0_swizzle1; do
    shape=${case%%:*}
    "$build/kernelrl" eval "/tmp/gi_emit/hgemm_cutlass_nn_accf32_${case#*:}.cu" --shape "$shape" \
      --store /tmp/gi_peer.sqlite --cache-dir /tmp/gi_cache --json "$out/peer_$shape.json" 2>&1 | tail -3
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); m=r.get('metrics',{}); print(sys.argv[2], r.get('status'), r.get('check'), r.get('reason','')[:300]); print(' peer_words_verified', m.get('peer_words_verified')); [print(' ', w) for w in m.get('peer_words',[])[:6]]" \
      "$out/peer_$shape.json" "$shape"
  done
  echo "peer: $(( $(date +%s) - t0 )) s"
fi
if [[ ,$phases, == *,gpu,* ]]; then
  t0=$(date +%s)
  cmake --build "$build" > /tmp/gi_build_all.log 2>&1 || { grep -E "error|FAILED" /tmp/gi_build_all.log | head -30; exit 1; }
  echo "build all: $(( $(date +%s) - t0 )) s"
  (cd "$build" && ctest -L gpu --output-on-failure --timeout 400) > "$out/gpu_all.log" 2>&1
  grep -E "tests passed|Failed|FAILED|Passed|\*\*\*" "$out/gpu_all.log" | cut -c1-200 | tail -40
  echo "gpu tests: $(( $(date +%s) - t0 )) s"
fi
if [[ ,$phases, == *,trust,* ]]; then
  bash bench/gpu_evaluator_v2.sh "$build" "$out" trust "${GI_SHAPES:-64,128,256,512,768,1024,1536,2048,3072,4096,8192,16384}"
fi
