#!/usr/bin/env bash
# Issue 24 on one GPU: what the fixed cost of a small HGEMM is, and whether hgemm_small passes.
#   bash bench/gpu_small_profile.sh BUILD_DIR OUT_DIR [BUDGET_S=560]
# On the device tool: carry [".device"] (CUTLASS headers from .device/cutlass-include.tgz or
# $KERNELRL_CUTLASS_INCLUDE), command
#   rm -f /tmp/deps/.done; source .device/env.sh && bash bench/gpu_small_profile.sh /tmp/b $OUT
# 1. builds kernelrl, the evaluator's worker and test_families_gpu in BUILD_DIR (background) and
#    bench/bench_small_gemm.cu with one CUTLASS kernel (nvcc, in parallel);
# 2. bench_small_gemm: device time (20-call graphs, cold L2, held stream, interleaved, median)
#    of cuBLASLt autotuned, the grid's small-shape leaders, hgemm_small variants and the two
#    floors (empty kernel, one cold DRAM round trip) at 9 shapes below 2^27 (+2 tn)
#    -> OUT_DIR/small_bench.csv;
# 3. nsys (if installed): one replay per contender behind marker kernels -> OUT_DIR/nsys_trace.csv
#    (every kernel's start and duration: which kernels a call runs and the gaps between them);
# 4. ncu: one eager call per profiled contender (launch statistics, duration, SM cycles, DRAM
#    bytes, warp stall breakdown; clocks not locked) -> OUT_DIR/ncu.csv;
# 5. test_families_gpu: every CUDA family's sample (the refactored families) and hgemm_small's
#    sample with its negative control -> OUT_DIR/tests.log;
# Environment: SHAPES and ROUNDS of step 2, LEADERS=0 leaves the wgmma/CUTLASS leaders out of the
# bench (faster to build), PROFILE=0 skips steps 3-4, SWEEP=0 step 6.
# 6. with what is left of BUDGET_S: `kernelrl bench --families hgemm_small --per-family 0` over
#    the 9 shapes (every nn variant through the evaluator) -> OUT_DIR/small_sweep.{csv,md} and
#    the results store.
set -uo pipefail
build=${1:?usage: gpu_small_profile.sh BUILD_DIR OUT_DIR [BUDGET_S]}
out=${2:?usage: gpu_small_profile.sh BUILD_DIR OUT_DIR [BUDGET_S]}
budget=${3:-560}
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
mkdir -p "$out"
log=$out/profile.log
if [[ -z "${KERNELRL_CUTLASS_INCLUDE:-}" && -f .device/cutlass-include.tgz ]]; then
  [[ -d /tmp/cutlass/include/cute ]] ||
    { mkdir -p /tmp/cutlass && tar -C /tmp/cutlass -xzf .device/cutlass-include.tgz; }
  export KERNELRL_CUTLASS_INCLUDE=/tmp/cutlass/include
fi
{
  echo "gpu_small_profile.sh $* ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
  nvcc --version | tail -1
} 2>&1 | tee -a "$log"

(
  if [[ ! -f "$build/build.ninja" ]]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release || exit 1
  fi
  cmake --build "$build" --target kernelrl kernelrl_eval_worker test_families_gpu
) > /tmp/sp_build.log 2>&1 &
bpid=$!
bench=/tmp/bench_small_gemm
cut_flags=()
if [[ "${LEADERS:-1}" == 1 ]]; then
  cut_flags=(-DBENCH_LEADERS)
  [[ -n "${KERNELRL_CUTLASS_INCLUDE:-}" ]] && cut_flags+=(-DBENCH_CUTLASS -I "$KERNELRL_CUTLASS_INCLUDE")
fi
nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo \
  -Ikernels "${cut_flags[@]}" bench/bench_small_gemm.cu -lcublasLt -o $bench > /tmp/sp_bench.log 2>&1 ||
  { tail -20 /tmp/sp_bench.log | tee -a "$log"; }
echo "[$(el) s] bench built" | tee -a "$log"

shapes=${SHAPES:-64x64x64:nn,128x128x128:nn,256x256x256:nn,512x512x256:nn,64x2048x512:nn,1024x1024x64:nn,12288x64x64:nn,128x128x1024:nn,64x64x16384:nn,256x256x256:tn,128x128x1024:tn}
if [[ -x $bench ]]; then
  timeout 200 $bench --shapes "$shapes" --rounds "${ROUNDS:-25}" > "$out/small_bench.csv" 2>> "$log"
  echo "[$(el) s] bench: exit $?" | tee -a "$log"
  python3 - "$out/small_bench.csv" <<'EOF' | tail -20 | tee -a "$log"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) >= 9 and r[5] == "ok"]
by = collections.defaultdict(list)
for r in rows: by[tuple(r[:4])].append(r)
for k, rs in by.items():
    lt = [r for r in rs if r[4] == "lt-auto"][0]
    fam = [r for r in rs if not r[4].startswith(("lt-", "floor"))]
    if not fam: continue
    best = min(fam, key=lambda r: float(r[7]))
    sm = min([r for r in fam if r[4].startswith("small")], key=lambda r: float(r[7]))
    fl = {r[4]: r[7] for r in rs if r[4].startswith("floor")}
    print("x".join(k[:3]), k[3], "lt", lt[7], "best", best[4], best[7], "small", sm[4], sm[7],
          "floors", fl.get("floor_empty_nn", "-"), fl.get("floor_touch_nn", "-"))
EOF
  [[ "${PROFILE:-1}" == 1 ]] && nsys_bin=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys \
    /usr/local/cuda/nsight-systems-*/bin/nsys 2>/dev/null | head -1)
  if [[ -n "${nsys_bin:-}" ]]; then
    timeout 150 "$nsys_bin" profile --cuda-graph-trace=node --trace=cuda -o /tmp/sp_nsys \
      --force-overwrite true $bench --shapes "$shapes" --mode once --pre 2 > /tmp/sp_once.csv 2>> "$log"
    echo "[$(el) s] nsys: exit $?" | tee -a "$log"
    timeout 90 "$nsys_bin" stats --report cuda_gpu_trace --format csv --force-export true \
      -o /tmp/sp_stats /tmp/sp_nsys.nsys-rep >> "$log" 2>&1
    { cat /tmp/sp_once.csv; echo "#### nsys cuda_gpu_trace"; cat /tmp/sp_stats*cuda_gpu_trace*.csv; } \
      > "$out/nsys_trace.csv"
  else
    echo "no nsys on this machine" | tee -a "$log"
  fi
  [[ "${PROFILE:-1}" == 1 ]] && {
  only="lt-auto,wgmma_m64n128k64_s8_c1_x1_sk1,wgmma_m64n128k64_s8_c1_x1_sk4,cutlass,small_m64n64k64_s3_sk1_pdl1_nn,small_m32n32k64_s4_sk4_pdl1,small_m64n64k64_s3_sk4_pdl1_nn,floor"
  timeout 200 ncu --profile-from-start off --clock-control none --csv --page details \
    --section LaunchStats --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --metrics gpu__time_duration.sum,sm__cycles_active.max,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum \
    $bench --shapes "64x64x64:nn,256x256x256:nn,512x512x256:nn,64x2048x512:nn,1024x1024x64:nn,12288x64x64:nn,128x128x1024:nn,64x64x16384:nn" \
    --mode eager --pre 2 --only "$only" > "$out/ncu.csv" 2>> "$log"
  echo "[$(el) s] ncu: exit $?" | tee -a "$log"
  }
fi

wait $bpid
brc=$?
echo "[$(el) s] build: exit $brc" | tee -a "$log"
((brc)) && { tail -40 /tmp/sp_build.log | tee -a "$log"; exit 1; }
timeout 300 "$build/tests/test_families_gpu" \
  --gtest_filter='FamiliesGpu.VariantsOfEveryCudaFamily*:FamiliesGpu.Small*' > "$out/tests.log" 2>&1
echo "[$(el) s] test_families_gpu (every family, hgemm_small): exit $?" | tee -a "$log"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) +\]|Failure|wrong_answer" "$out/tests.log" | head -30

left=$((budget - $(el) - 40))
if ((left > 60)) && [[ "${SWEEP:-1}" == 1 ]]; then
  printf '%s\n' 64x64x64 128x128x128 256x256x256 512x512x256 64x2048x512 1024x1024x64 \
    12288x64x64 128x128x1024 64x64x16384 > /tmp/sp_grid.txt
  mkdir -p "$build/family-cache"
  "$build/kernelrl" bench --families hgemm_small --grid /tmp/sp_grid.txt --per-family 0 \
    --cache-dir "$build/family-cache" --timing device --l2 cold --time-budget-s "$left" \
    --out "$out/small_sweep.csv" --store /tmp/sp_store.sqlite >> "$log" 2>&1
  echo "[$(el) s] sweep: exit $?" | tee -a "$log"
  head -20 "$out/small_sweep.md" 2>/dev/null
  [[ -f /tmp/sp_store.sqlite ]] && xz -T0 -6 -c /tmp/sp_store.sqlite > "$out/small_store.sqlite.xz"
fi
echo "[$(el) s] done" | tee -a "$log"
