#!/usr/bin/env bash
# The Hopper families (hgemm_wgmma, hgemm_cutlass) over the 1,000-shape grid on one GPU (issue
# 11), resumable across device calls, from the repository root:
#   bash bench/gpu_family_grid.sh BUILD_DIR OUT_DIR [BUDGET_S=540] [PREV_DIR]
# Environment: FAMILIES (default hgemm_wgmma,hgemm_cutlass), GRID (default full: a grid name or
# file), LARGE=0 skips step 3, TESTS (the gtest filter of step 1, default the Cutlass and Wgmma
# tests), PER_FAMILY (default 3), ORDER (spread, the default, or grid: the file's order).
# On the device tool (after scripts/device_prepare.sh here): carry [".device"] (and the previous
# call's files, e.g. ".grid-prev"), command
#   rm -f /tmp/deps/.done; source .device/env.sh && bash bench/gpu_family_grid.sh /tmp/b $OUT 540 [.grid-prev]
# 1. configures (if needed) and builds kernelrl and the evaluator's worker in BUILD_DIR (CUTLASS
#    headers from .device/cutlass-include.tgz or $KERNELRL_CUTLASS_INCLUDE when set, else the
#    nvidia-cutlass wheel of .venv); on the first call (no PREV_DIR; FAMILY_TESTS=0 skips it)
#    also test_families_gpu's Cutlass and Wgmma tests (samples + negative controls, ~2-3 min);
# 2. PREV_DIR (the OUT_DIR files of an earlier call, carried back in): its CSVs are resumed and
#    its compile_cache.tar unpacked into the compile cache, so nothing is compiled twice;
# 3. the large shapes (configs/grids/hopper_large.txt: 4096^3 and 8192^3, nn and tn) with every
#    candidate of both families' lists through the Evaluator, device timing, 10+ rounds
#    -> OUT_DIR/large.{csv,md} (skipped once complete);
# 4. `kernelrl bench --families ... --grid full`: PER_FAMILY (default 3) variants per family per
#    shape, device timing against lt-auto and lt-auto-max, stops starting shapes when BUDGET_S
#    is near -> OUT_DIR/family_grid.{csv,md};
# 5. the compile cache -> OUT_DIR/compile_cache.tar for the next call, and this call's results
#    store -> OUT_DIR/family_store_<UTC stamp>.sqlite.xz (input for `kernelrl catalog build`).
# OUT_DIR also gets family_grid.log (every command's output). Expected: the first call spends
# ~2-3 min building and ~2-3 min compiling the 48 distinct variants on 16 cores, then sweeps;
# later calls (with PREV_DIR) build and sweep. Run it until family_grid.md says 1000 of 1000.
set -uo pipefail
build=${1:?usage: gpu_family_grid.sh BUILD_DIR OUT_DIR [BUDGET_S] [PREV_DIR]}
out=${2:?usage: gpu_family_grid.sh BUILD_DIR OUT_DIR [BUDGET_S] [PREV_DIR]}
budget=${3:-540}
prev=${4:-}
per_family=${PER_FAMILY:-3}
fams=${FAMILIES:-hgemm_wgmma,hgemm_cutlass}
grid=${GRID:-full}
test_filter=${TESTS:-FamiliesGpu.Cutlass*:FamiliesGpu.Wgmma*}
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
mkdir -p "$out"
log=$out/family_grid.log
if [[ -z "${KERNELRL_CUTLASS_INCLUDE:-}" && -f .device/cutlass-include.tgz ]]; then
  [[ -d /tmp/cutlass/include/cute ]] ||
    { mkdir -p /tmp/cutlass && tar -C /tmp/cutlass -xzf .device/cutlass-include.tgz; }
  export KERNELRL_CUTLASS_INCLUDE=/tmp/cutlass/include
fi
{
  echo "gpu_family_grid.sh $* ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null))"
  echo "CUTLASS headers: ${KERNELRL_CUTLASS_INCLUDE:-the .venv wheel}"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
  nproc
} 2>&1 | tee -a "$log"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/gfg_cmake.log 2>&1 ||
    { tail -30 /tmp/gfg_cmake.log | tee -a "$log"; exit 1; }
fi
# The GPU family tests (a sample of each Hopper family through the Evaluator, with negative
# controls) run on the first call (no PREV_DIR) unless FAMILY_TESTS=0.
tests=0
[[ -z "$prev" && "${FAMILY_TESTS:-1}" == 1 ]] && tests=1
targets=(kernelrl kernelrl_eval_worker)
((tests)) && targets+=(test_families_gpu)
cmake --build "$build" --target "${targets[@]}" > /tmp/gfg_build.log 2>&1 ||
  { tail -40 /tmp/gfg_build.log | tee -a "$log"; exit 1; }
echo "[$(el) s] built" | tee -a "$log"
if ((tests)); then
  timeout 360 "$build/tests/test_families_gpu" --gtest_filter="$test_filter" >> "$log" 2>&1
  rc=$?
  echo "[$(el) s] test_families_gpu ($test_filter): exit $rc" | tee -a "$log"
  grep -E "^hgemm_|^\[ +(OK|FAILED|PASSED|SKIPPED) +\]|Failure" "$log" | cut -c1-200 | tail -24
fi

cache=$build/family-cache
mkdir -p "$cache"
if [[ -n "$prev" ]]; then
  for f in large.csv family_grid.csv; do
    [[ -f "$prev/$f" && ! -f "$out/$f" ]] && cp "$prev/$f" "$out/$f"
  done
  [[ -f "$prev/family_grid.log" ]] && cat "$prev/family_grid.log" "$log" > /tmp/gfg_log && mv /tmp/gfg_log "$log"
  [[ -f "$prev/compile_cache.tar" ]] && tar -xf "$prev/compile_cache.tar" -C "$cache"
  echo "[$(el) s] resumed from $prev: $(ls "$cache" | grep -c '\.so$') compiled variants" | tee -a "$log"
fi
common=(--families "$fams" --cache-dir "$cache" --timing device --l2 cold)

# Each stage starts no shape later than BUDGET_S - 60 s: the last shape (the largest take
# ~20-30 s) and the tar fit in the margin.
margin=60
# Large shapes: the whole candidate lists (24 per layout), more rounds.
left=$((budget - $(el) - margin))
if ((left > 0)) && [[ "${LARGE:-1}" == 1 ]]; then
  "$build/kernelrl" bench "${common[@]}" --grid configs/grids/hopper_large.txt --per-family 0 \
    --min-rounds 10 --max-rounds 50 --timing-budget-ms 400 --seeds 3 --time-budget-s "$left" \
    --out "$out/large.csv" --store /tmp/gfg_store.sqlite >> "$log" 2>&1
  rc=$?
  echo "[$(el) s] large shapes: exit $rc" | tee -a "$log"
fi
cat "$out/large.csv" 2>/dev/null | cut -d, -f1-4,8,9,11-16,18

# The grid, with what is left of the budget.
left=$((budget - $(el) - margin))
if ((left > 20)); then
  "$build/kernelrl" bench "${common[@]}" --grid "$grid" --per-family "$per_family" \
    --order "${ORDER:-spread}" \
    --time-budget-s "$left" --out "$out/family_grid.csv" --store /tmp/gfg_store.sqlite \
    >> "$log" 2>&1
  rc=$?
  echo "[$(el) s] grid: exit $rc" | tee -a "$log"
fi
head -30 "$out/family_grid.md" 2>/dev/null
grep -E "not started|evaluated in this run|compiled " "$log" | tail -4

tar -cf "$out/compile_cache.tar" -C "$cache" . 2>/dev/null
size=$(stat -c %s "$out/compile_cache.tar" 2>/dev/null || echo 0)
if ((size > 15000000)); then
  # Only the shared objects (no logs) when the whole cache is over the 16 MiB file limit.
  (cd "$cache" && tar -cf "$out/compile_cache.tar" ./*.so)
fi
# This call's results store (every evaluation with its source: `kernelrl catalog build --from`
# takes each call's file), compressed: the sources repeat, so it shrinks ~10-50x.
if [[ -f /tmp/gfg_store.sqlite ]]; then
  st=$out/family_store_$(date -u +%Y%m%d%H%M%S).sqlite.xz
  xz -T0 -6 -c /tmp/gfg_store.sqlite > "$st" 2>/dev/null || gzip -c /tmp/gfg_store.sqlite > "${st%.xz}.gz"
  for f in "$st" "${st%.xz}.gz"; do
    [[ -f "$f" ]] && (($(stat -c %s "$f") > 15000000)) && { echo "store too large to return: $f"; rm -f "$f"; }
  done
fi
echo "[$(el) s] done; compile_cache.tar $(stat -c %s "$out/compile_cache.tar") bytes" | tee -a "$log"
