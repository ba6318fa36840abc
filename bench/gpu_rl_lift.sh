#!/usr/bin/env bash
# The lift experiment of issue 25 (configs/lift.yaml: its comments give the plan and the time),
# as resumable chunks: run it again, with the same BUILD_DIR and OUT_DIR, until it prints
# "lift: done". From the repository root:
#   bash bench/gpu_rl_lift.sh BUILD_DIR OUT_DIR [BUDGET_S=540] [PREV_DIR]
# On the device tool: carry [".device"] (CUTLASS headers, as bench/gpu_family_grid.sh) and, on a
# fresh machine after the first one went back, the previous call's files (e.g. ".lift-prev"):
#   source .device/env.sh && bash bench/gpu_rl_lift.sh /tmp/b $OUT 540 [.lift-prev]
# Each call stops starting work BUDGET_S - 60 s after it began. Phases, each resumed where the
# last call stopped (the run directory runs/lift stays on the machine while it is held):
#   1. build kernelrl and the worker; data: `data synth`, `data build` over the CUDA headers,
#      `lift annotate` (docs/data/family_grid_h100.csv, the catalog's entries and every hgemm_small
#      variant of docs/data/small_variants_h100.csv, training shapes only)
#      -> runs/data/annotated_h100.jsonl
#   2. pretraining (`kernelrl train configs/lift.yaml --stages pretrain`; killed at the budget,
#      resumed from its last checkpoint)
#   3. `lift measure --phase before`: the prompts of MAX_SHAPES (32) held-out shapes and the
#      pretrained policy's SAMPLES (16) samples each -> runs/lift-measure/prompts.jsonl
#   4. hgemm_rl on the training split (a checkpoint every step: exact resume)
#   5. `lift measure`: the after policy's samples with the same prompts and seed, evaluated with
#      the before samples, the sweep's best variant (named by the family-grid CSV) and the
#      exemplars shown, one evaluator batch per shape (resumable per shape); `lift promote`:
#      after-RL kernels >= 2 % faster than the sweep and than every variant of its family at the
#      shape (FAMILY_LIST), re-verified in a fresh evaluation, into
#      runs/lift-measure/catalog_rl.json with provenance rl
#   6. plots (bench/plot_lift.py)
# OUT_DIR gets, every call: lift.log, metrics.jsonl, results.tgz (lift.md, summary.json,
# per_shape.jsonl, samples.jsonl (every sample's verdict), curves.csv, catalog_rl.json, the PNG
# plots, the best kernels as .cu files);
# once phase 4 is done also state.tar.xz.part-* (the after policy's weights, the run's config,
# tokenizer and metrics, prompts.jsonl): with PREV_DIR a fresh machine restores them and goes on
# with phase 5 (phases 1-4 need the optimizer state, which does not travel: a machine lost
# before phase 4 ends means starting over). Environment: LIFT_CONFIG (configs/lift.yaml),
# MAX_SHAPES, SAMPLES, SWEEP_CSV, SWEEP_DEVICE, CATALOG_XZ, VARIANTS_CSV, FAMILY_LIST, MEASURE_SET (space-separated
# key.path=value overrides of the run's job for `lift measure` and `lift promote`, e.g. the
# evaluator's default timing where the config's RL stage timed coarser), and LIFT_NO_CORPUS=1 to
# skip `data build` (a CPU dry run), LIFT_STOP_AFTER=pretrain to stop after phase 2.
set -uo pipefail
build=${1:?usage: gpu_rl_lift.sh BUILD_DIR OUT_DIR [BUDGET_S] [PREV_DIR]}
out=${2:?usage: gpu_rl_lift.sh BUILD_DIR OUT_DIR [BUDGET_S] [PREV_DIR]}
budget=${3:-540}
prev=${4:-}
config=${LIFT_CONFIG:-configs/lift.yaml}
max_shapes=${MAX_SHAPES:-32}
samples=${SAMPLES:-16}
sweep_csv=${SWEEP_CSV:-docs/data/family_grid_h100.csv}
sweep_device=${SWEEP_DEVICE:-NVIDIA H100 80GB HBM3}
catalog_xz=${CATALOG_XZ:-docs/data/catalog_h100_grid.json.xz}
variants_csv=${VARIANTS_CSV-docs/data/small_variants_h100.csv}
family_list=${FAMILY_LIST-0}
measure_set=()
for kv in ${MEASURE_SET:-}; do measure_set+=(--set "$kv"); done
run=runs/lift
lift=runs/lift-measure
margin=60
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
left() { echo $((budget - $(el) - margin)); }
mkdir -p "$out" runs/data "$lift"
log=$out/lift.log
kr=$build/kernelrl
say() { echo "[$(el) s] $*" | tee -a "$log"; }

if [[ -z "${KERNELRL_CUTLASS_INCLUDE:-}" && -f .device/cutlass-include.tgz ]]; then
  [[ -d /tmp/cutlass/include/cute ]] ||
    { mkdir -p /tmp/cutlass && tar -C /tmp/cutlass -xzf .device/cutlass-include.tgz; }
  export KERNELRL_CUTLASS_INCLUDE=/tmp/cutlass/include
fi
{
  echo "gpu_rl_lift.sh $* ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null)), config $config"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"
  nproc
} 2>&1 | tee -a "$log"

# ---- 1. build and data -------------------------------------------------------------------
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/lift_cmake.log 2>&1 ||
    { tail -30 /tmp/lift_cmake.log | tee -a "$log"; exit 1; }
fi
cmake --build "$build" --target kernelrl kernelrl_eval_worker > /tmp/lift_build.log 2>&1 ||
  { tail -40 /tmp/lift_build.log | tee -a "$log"; exit 1; }
say "built"

# A fresh machine with an earlier call's state: the after policy and the prompts come back.
if [[ -n "$prev" && ! -f "$run/.rl_done" ]] && ls "$prev"/state.tar.xz.part-* > /dev/null 2>&1; then
  cat "$prev"/state.tar.xz.part-* | tar -xJf - && say "restored the after policy and prompts from $prev"
  [[ -f "$prev/results.tgz" ]] && tar -xzf "$prev/results.tgz" -C "$lift" per_shape.jsonl samples.jsonl 2>/dev/null
fi

if [[ ! -f "$run/.rl_done" ]]; then
  [[ -s runs/data/synth.jsonl ]] || $kr data synth --families all --n 3000 --out runs/data/synth.jsonl >> "$log" 2>&1
  if [[ "${LIFT_NO_CORPUS:-0}" != 1 && ! -s runs/data/corpus.jsonl ]]; then
    $kr data build --from /usr/local/cuda/include --out runs/data/corpus.jsonl >> "$log" 2>&1
  fi
  if [[ ! -s runs/data/annotated_h100.jsonl ]]; then
    cat_args=()
    if [[ -f "$catalog_xz" ]]; then
      xz -dc "$catalog_xz" > /tmp/lift_catalog.json && cat_args=(--catalog /tmp/lift_catalog.json)
    fi
    # Every hgemm_small variant the small-shapes calibration timed (VARIANTS_CSV; "" = none):
    # ranked examples of which parameters suit which shape, not only each family's winner.
    var_args=()
    [[ -n "$variants_csv" && -f "$variants_csv" ]] && var_args=(--variants-csv "$variants_csv")
    $kr lift annotate "$config" --grid-csv "$sweep_csv" "${var_args[@]}" --device "$sweep_device" "${cat_args[@]}" \
      --out runs/data/annotated_h100.jsonl 2>&1 | tee -a "$log" || exit 1
  fi
  say "data ready"
fi

# ---- 2. pretraining -------------------------------------------------------------------------
train() {  # train STAGES: resumes the run when it has one; killed at the budget
  local resume=()
  [[ -f "$run/config.yaml" ]] && resume=(--resume)
  timeout -s INT "$(left)" "$kr" train "$config" --run-dir "$run" --stages "$1" "${resume[@]}" \
    >> "$log" 2>&1
}
# A stage stopped by the budget (timeout's 124) is continued by the next call; any other failure
# ends the call with its exit status, so that no phase is marked done on a broken run (the H100 run
# of 2026-11-27 marked a failed RL stage "done" under LIFT_RL_CUT and measured a 4-step policy).
stage_failed() {  # stage_failed NAME RC
  (($2 == 0 || $2 == 124)) && return 1
  say "$1 failed (exit $2): the last lines of $log say why"; tail -5 "$log"; return 0
}
if [[ ! -f "$run/.pretrain_done" && ! -f "$run/.rl_done" ]] && (($(left) > 30)); then
  train pretrain; rc=$?
  stage_failed pretraining $rc && exit 1
  ((rc == 0)) && touch "$run/.pretrain_done"
  say "pretraining: $([[ -f $run/.pretrain_done ]] && echo done || echo 'to be continued')"
fi

# LIFT_STOP_AFTER=pretrain: only a pretrained policy is wanted (bench/gpu_multigpu.sh's RL_POLICY).
if [[ "${LIFT_STOP_AFTER:-}" == pretrain ]]; then
  [[ -f "$run/.pretrain_done" ]] && say "lift: stopped after pretraining (LIFT_STOP_AFTER)" && exit 0
  say "lift: pretraining not done; run again"; exit 0
fi

# ---- 3. the before side of the measure ---------------------------------------------------------
measure() {  # measure PHASE
  "$kr" lift measure --run-dir "$run" --out "$lift" --phase "$1" --samples "$samples" \
    --max-shapes "$max_shapes" --sweep-csv "$sweep_csv" --device "$sweep_device" \
    --time-budget-s "$(left)" "${measure_set[@]}" >> "$log" 2>&1
}
if [[ -f "$run/.pretrain_done" && ! -f "$lift/.before_done" ]] && (($(left) > 30)); then
  measure before
  n=$(grep -c . "$lift/prompts.jsonl" 2>/dev/null || echo 0)
  ((n >= max_shapes)) && touch "$lift/.before_done"
  say "before side: $n of $max_shapes shapes sampled"
fi

# ---- 4. HGEMM RL -----------------------------------------------------------------------------
if [[ -f "$lift/.before_done" && ! -f "$run/.rl_done" ]] && (($(left) > 60)); then
  train hgemm_rl; rc=$?
  stage_failed hgemm_rl $rc && exit 1
  ((rc == 0)) && touch "$run/.rl_done"
  # LIFT_RL_CUT=1: the machine's time is short; the budget stopped RL and the after policy is
  # its last checkpoint.
  [[ "${LIFT_RL_CUT:-0}" == 1 && $rc == 124 && -f "$run/checkpoints/hgemm_rl/latest" ]] && touch "$run/.rl_done"
  say "hgemm_rl: $([[ -f $run/.rl_done ]] && echo done || echo 'to be continued')"
fi

# ---- 5. the measure and the discoveries ------------------------------------------------------------
if [[ -f "$run/.rl_done" && ! -f "$lift/.measure_done" ]] && (($(left) > 60)); then
  measure all
  n=$(grep -c . "$lift/per_shape.jsonl" 2>/dev/null || echo 0)
  ((n >= max_shapes)) && touch "$lift/.measure_done"
  say "measure: $n of $max_shapes shapes"
fi
if [[ -f "$lift/.measure_done" && ! -f "$lift/catalog_rl.json" ]] && (($(left) > 60)); then
  # FAMILY_LIST (0: the sweep variant's whole family list at the shape; "" = off): a discovery
  # must also beat the fastest variant of its family, not only the sweep's few picks.
  fl_args=()
  [[ -n "$family_list" ]] && fl_args=(--family-list "$family_list")
  "$kr" lift promote --run-dir "$run" --lift "$lift" --sweep-csv "$sweep_csv" "${fl_args[@]}" \
    --device "$sweep_device" --out "$lift/catalog_rl.json" "${measure_set[@]}" 2>&1 | tee -a "$log"
  "$kr" catalog show "$lift/catalog_rl.json" > "$lift/catalog_rl.txt" 2>&1
fi

# ---- 6. what comes back ----------------------------------------------------------------------
[[ -s "$lift/per_shape.jsonl" ]] && "$kr" lift report --run-dir "$run" --lift "$lift" > /dev/null 2>&1
python3 bench/plot_lift.py "$lift" >> "$log" 2>&1 || say "plots failed (matplotlib?)"
cp "$run/metrics.jsonl" "$out/metrics.jsonl" 2>/dev/null
(cd "$lift" && tar -czf "$out/results.tgz" --ignore-failed-read lift.md summary.json per_shape.jsonl \
  curves.csv prompts.jsonl samples.jsonl catalog_rl.json catalog_rl.txt lift_curves.png lift_shapes.png \
  $(ls kernels/*_after.cu kernels/*_before.cu 2>/dev/null)) 2>/dev/null
if [[ -f "$run/.rl_done" && ! -f "$lift/catalog_rl.json" ]]; then
  # The state a fresh machine needs for phase 5: the after policy (weights, no optimizer), the
  # pretrained one is not needed (its samples are in prompts.jsonl), the run's config,
  # tokenizer and metrics, and the marker.
  after=$run/checkpoints/hgemm_rl/$(cat "$run/checkpoints/hgemm_rl/latest")
  tar -cJf - --exclude='optimizer.pt' "$run/config.yaml" "$run/metrics.jsonl" \
    "$run/tokenizer.model" "$run/.rl_done" "$run/.pretrain_done" "$lift/prompts.jsonl" \
    "$lift/.before_done" "$after" "$run/checkpoints/hgemm_rl/latest" 2>/dev/null |
    split -b 15m - "$out/state.tar.xz.part-"
  say "state for another machine: $(du -ch "$out"/state.tar.xz.part-* | tail -1 | cut -f1)"
fi
if [[ -f "$lift/catalog_rl.json" ]]; then
  say "lift: done"
  cat "$lift/lift.md" | tee -a "$log"
else
  say "lift: not done; run again (with PREV_DIR if this machine went back)"
fi
