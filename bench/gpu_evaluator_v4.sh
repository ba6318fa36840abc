#!/usr/bin/env bash
# Evaluator v4 on the GPU machine (issue 38), in phases that fit one device call each:
#   build     this tree into /tmp/b-cur (worker, runner, bench_evaluator, GPU tests)
#   before    the pre-issue-38 tree carried in .before/ (git archive 4672aad) into /tmp/b-bef
#             (only for a second build; the bench's v3 protocol is the same build's before)
#   bench     bench_evaluator N at 256^3 and 64^3, v3 (before) and v4 interleaved per shape,
#             with the profile split (metrics.profile_s) -> OUT/bench_*.log
#   nvcc      nvcc -time phases of 8 bench kernels and 8 hgemm_small variants (.c38/small/*.cu
#             when carried), under the pool's flags and the candidates tried -> OUT/nvcc.csv
#   l2test    tests/gpu/test_reward_l2_gpu (the cold-L2 fixtures, the PDL pair) -> OUT/l2_tests.log
#   tests     tests/gpu/test_reward_gpu (old adversarial and sandbox fixtures) -> OUT/gpu_tests.log
#   usage: bash bench/gpu_evaluator_v4.sh OUT phases [N=240]
#   PROTOS=v4-shim (or "v3 v4 v4-shim"): the bench with reward.capture: shim
#   (KERNELRL_BENCH_CAPTURE=shim), the context-free capture runner.
set -uo pipefail
out=$1
phases=$2
n=${3:-240}
mkdir -p "$out"
if [[ -z "${KERNELRL_CUTLASS_INCLUDE:-}" && -f .device/cutlass-include.tgz ]]; then
  [[ -d /tmp/cutlass/include/cute ]] || { mkdir -p /tmp/cutlass && tar -C /tmp/cutlass -xzf .device/cutlass-include.tgz; }
  export KERNELRL_CUTLASS_INCLUDE=/tmp/cutlass/include
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
date -u
targets="kernelrl_eval_worker kernelrl_candidate_runner kernelrl_shim_runner bench_evaluator"
build() {  # build SRC DIR TARGETS...
  local src=$1 dir=$2
  shift 2
  local t0=$(date +%s)
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release > "/tmp/$(basename "$dir").cmake.log" 2>&1 &&
    cmake --build "$dir" --target "$@" > "/tmp/$(basename "$dir").build.log" 2>&1 ||
    { tail -40 "/tmp/$(basename "$dir").cmake.log" "/tmp/$(basename "$dir").build.log"; return 1; }
  echo "build $dir: $(( $(date +%s) - t0 )) s"
}
if [[ ,$phases, == *,build,* ]]; then
  build . /tmp/b-cur $targets ${EXTRA_TARGETS:-} || exit 1
fi
if [[ ,$phases, == *,before,* ]]; then
  build .before /tmp/b-bef $targets || exit 1
fi
if [[ ,$phases, == *,bench,* ]]; then
  # Before and after in one build, interleaved per shape: v3 = the protocol before issue 38
  # (KERNELRL_TIMING_DIAG=v3,fixed_sets and KERNELRL_L2_FLUSH=memset: timing.h), v4 = this tree's.
  for shape in ${SHAPES:-256x256x256 64x64x64}; do
    for proto in ${PROTOS:-v3 v4}; do
      if [[ $proto == v3 ]]; then envs="KERNELRL_TIMING_DIAG=v3,fixed_sets KERNELRL_L2_FLUSH=memset"; else envs=""; fi
      if [[ $proto == v4-shim ]]; then envs="KERNELRL_BENCH_CAPTURE=shim"; fi
      echo "== $proto $shape"
      env $envs KERNELRL_BENCH_DUMP=/tmp/bench_src timeout ${BENCH_TIMEOUT:-200} /tmp/b-cur/bench/bench_evaluator "$n" "$shape" 2>&1 |
        grep -v "^20..-..-.. " | tee "$out/bench_${proto}_${shape%%x*}.log" | grep -E "wall|profile|ok|/"
    done
  done
fi
if [[ ,$phases, == *,nvcc,* ]]; then
  inc=/tmp/nvinc && mkdir -p $inc && cp kernels/kernel_abi.h $inc/
  base="-O3 -DNDEBUG -std=c++17 -shared -Xcompiler -fPIC -lineinfo -cudart shared --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -I $inc"
  files=$(ls /tmp/bench_src/bench_{0,7,19,33,58,101,150,222}.cu 2>/dev/null; ls .c38/small/*.cu 2>/dev/null | head -8)
  echo "file,variant,wall_s,cpu_s" > "$out/nvcc.csv"
  rm -f /tmp/nvtime.csv
  for f in $files; do
    src=/tmp/nvsrc.cu
    { echo '#include "kernel_abi.h"'; echo '#line 1 "candidate"'; cat "$f"; } > $src
    for v in base ${NVCC_VARIANTS:-}; do
      flags=$base
      [[ $v == base ]] || flags=$(eval echo "\$$v")
      s=$( { /usr/bin/time -f "%e %U %S" nvcc $flags -time /tmp/nvtime.csv -o /tmp/nv.so $src > /dev/null 2>/tmp/nv.err; } 2>&1; tail -1 /tmp/nv.err)
      echo "$(basename $f),$v,$(echo $s | awk '{print $1","$2+$3}')" >> "$out/nvcc.csv"
    done
  done
  cp /tmp/nvtime.csv "$out/nvcc_phases.csv"
  python3 - "$out" <<'PY'
import csv, sys, collections
out = sys.argv[1]
ph = collections.defaultdict(list)
for row in csv.reader(open(out + "/nvcc_phases.csv")):
    if len(row) >= 8 and row[7].strip() == "ms":
        ph[row[1].strip()].append(float(row[6]))
print("nvcc phases (ms, mean over runs):")
for k, v in sorted(ph.items(), key=lambda kv: -sum(kv[1])):
    print(f"  {k:28s} {sum(v)/len(v):8.1f}  (n={len(v)})")
by = collections.defaultdict(list)
for r in csv.DictReader(open(out + "/nvcc.csv")):
    by[r["variant"]].append(float(r["cpu_s"]))
for k, v in by.items():
    print(f"nvcc {k}: mean cpu {sum(v)/len(v):.3f} s over {len(v)} files")
PY
fi
if [[ ,$phases, == *,l2test,* ]]; then
  timeout ${L2_TIMEOUT:-240} /tmp/b-cur/tests/test_reward_l2_gpu 2>&1 | grep -v "^20..-..-.. " | tee "$out/l2_tests.log" |
    grep -E "^\[|OK|FAILED|Failure|Expected|Which is|error" | cut -c1-220
fi
if [[ ,$phases, == *,tests,* ]]; then
  timeout ${TESTS_TIMEOUT:-300} /tmp/b-cur/tests/test_reward_gpu ${GTEST_ARGS:-} 2>&1 | grep -v "^20..-..-.. " > "$out/gpu_tests.log"
  grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |tests ran|Failure" "$out/gpu_tests.log" | tail -60 | cut -c1-200
fi
date -u
