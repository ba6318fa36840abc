#!/usr/bin/env bash
# Issue 39's proof on a multi-GPU machine, in resumable chunks: run it again, with the same
# BUILD_DIR and OUT_DIR, until it prints "proof: done". From the repository root:
#   bash bench/gpu_rl_proof.sh BUILD_DIR OUT_DIR [BUDGET_S=540]
# Before the first call, on the CPU machine: scripts/device_prepare.sh (CUDA deps and CUTLASS
# headers in .device/) and `bash bench/gpu_rl_proof.sh --prepare` (the nvidia-cutlass wheel's
# CUTLASS/CuTe headers, examples and tools as .device/cutlass-src.tgz, the pretraining corpus's
# CUTLASS part). On the device tool, kind nvidia-h200-x4 (3 seeds + 1 GPU for the family list),
# carry [".device"]:
#   source .device/env.sh && bash bench/gpu_rl_proof.sh /tmp/b $OUT 540
# Each call stops starting work BUDGET_S - 60 s after it began; state stays under runs/proof on
# the machine while it is held (a machine lost midway means starting over: the per-seed policies
# and optimizer states do not travel).
# Phases (markers under runs/proof; each resumes where the last call stopped):
#   1. build; data once for all seeds: `data build` over the CUDA headers and CUTLASS's headers,
#      examples and tools, `data synth`, `lift annotate` (training shapes of the RL grid only).
#   2. per seed S in SEEDS, on its own GPU (CUDA_VISIBLE_DEVICES), side by side: pretraining and
#      HGEMM RL (`kernelrl train PROOF_CONFIG run.seed=S`, killed at the budget, resumed from its
#      last checkpoint), then `lift measure` into runs/proof/seedS/<split>_<mode> for split in
#      {grid: GRID_SHAPES, offgrid: OFFGRID_SHAPES} and mode in MODES (exemplars, zero_shot): best
#      of SAMPLES before and after RL, best-of-N of the pre-RL policy at the RL stage's evaluations
#      per training shape (--best-of-n -1), the copied exemplars, the sweep's pick and the family
#      list's winners, one evaluator batch per shape; then `lift promote` (>= 2 % over the sweep
#      and the sweep variant's family list, re-verified in a fresh evaluation: discoveries.jsonl).
#   3. meanwhile, on the spare GPU (GPU number len(SEEDS)), the family list over the grid shapes:
#      `kernelrl bench --families all --per-family FAMILY_LIST` -> runs/proof/family_list.csv,
#      each family's fastest at each shape; measure times those winners in its batches (without a
#      spare GPU, or for off-grid shapes, measure times the portfolio itself).
#   4. `kernelrl lift proof` over every seed x split x mode -> runs/proof/proof (proof.md: arms,
#      pass rates, bootstrap intervals, gains over the controls, each target met or missed;
#      curves_k.csv; per_shape.csv), plots (bench/plot_lift.py --proof).
# OUT_DIR gets, every call (<= 8 files, each < 16 MiB): proof.log, proof.tgz (the proof directory
# and plots), seed<S>.tar.xz per seed (its lift directories: per_shape.jsonl, samples.jsonl (every
# sample's verdict, class and the after side's code), prompts.jsonl, rl.json, discoveries.jsonl,
# lift.md, the best kernels; its metrics.jsonl and train log), family_list.csv.
# Environment: PROOF_CONFIG (configs/lift-proof.yaml), SEEDS ("0 1 2"), SAMPLES (16), MODES
# ("exemplars zero_shot"), GRID_SHAPES (configs/grids/heldout_full.txt), OFFGRID_SHAPES
# (configs/grids/offgrid_llm.txt), MAX_SHAPES (0 = all), FAMILY_LIST (8), SWEEP_CSV,
# SWEEP_DEVICE, VARIANTS_CSV, CATALOG_XZ (as bench/gpu_rl_lift.sh), MEASURE_SET (key=value
# overrides for measure/promote), PROOF_NO_CORPUS=1 (skip `data build`: a CPU dry run).
# Time (docs/lift_proof.md): build + data ~4 min, pretraining ~4 min,
# RL 200 steps ~15 min at a 4.5 s step (the evaluator at its 6 s-per-32 target), the measure the
# rest: the first calls train, the later ones measure.
set -uo pipefail
if [[ "${1:-}" == --prepare ]]; then
  src=$(.venv/bin/python -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source"))')
  mkdir -p .device && tar -C "$src" -czf .device/cutlass-src.tgz include examples tools &&
    echo "prepare: .device/cutlass-src.tgz ($(du -h .device/cutlass-src.tgz | cut -f1))"
  exit $?
fi
build=${1:?usage: gpu_rl_proof.sh BUILD_DIR OUT_DIR [BUDGET_S] | --prepare}
out=$(realpath -m "${2:?usage: gpu_rl_proof.sh BUILD_DIR OUT_DIR [BUDGET_S]}")
budget=${3:-540}
config=${PROOF_CONFIG:-configs/lift-proof.yaml}
read -r -a seeds <<< "${SEEDS:-0 1 2}"
read -r -a modes <<< "${MODES:-exemplars zero_shot}"
samples=${SAMPLES:-16}
grid_shapes=${GRID_SHAPES:-configs/grids/heldout_full.txt}
offgrid_shapes=${OFFGRID_SHAPES:-configs/grids/offgrid_llm.txt}
max_shapes=${MAX_SHAPES:-0}
family_list=${FAMILY_LIST:-8}
sweep_csv=${SWEEP_CSV:-docs/data/family_grid_h100.csv}
sweep_device=${SWEEP_DEVICE:-NVIDIA H100 80GB HBM3}
catalog_xz=${CATALOG_XZ:-docs/data/catalog_h100_grid.json.xz}
variants_csv=${VARIANTS_CSV-docs/data/small_variants_h100.csv}
measure_set=()
for kv in ${MEASURE_SET:-}; do measure_set+=(--set "$kv"); done
root=runs/proof
margin=60
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
left() { echo $((budget - $(el) - margin)); }
mkdir -p "$out" "$root" runs/data
log=$root/proof.log  # every call's lines; copied to OUT_DIR at the end of each call
say() { echo "[$(el) s] $*" | tee -a "$log"; }
kr=$(realpath -m "$build/kernelrl")
shapes_in() { grep -cvE '^\s*(#|$)' "$1"; }

if [[ -z "${KERNELRL_CUTLASS_INCLUDE:-}" && -f .device/cutlass-include.tgz ]]; then
  [[ -d /tmp/cutlass/include/cute ]] ||
    { mkdir -p /tmp/cutlass && tar -C /tmp/cutlass -xzf .device/cutlass-include.tgz; }
  export KERNELRL_CUTLASS_INCLUDE=/tmp/cutlass/include
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
say "gpu_rl_proof.sh $* ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null)), config $config, seeds ${seeds[*]}, $ngpu GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs), $(nproc) cores"
if ((ngpu < ${#seeds[@]})); then
  say "proof: ${#seeds[@]} seeds need ${#seeds[@]} GPUs (one each), this machine has $ngpu"; exit 1
fi

# ---- 1. build and data ------------------------------------------------------------------------
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/proof_cmake.log 2>&1 ||
    { tail -30 /tmp/proof_cmake.log | tee -a "$log"; exit 1; }
fi
cmake --build "$build" --target kernelrl kernelrl_eval_worker > /tmp/proof_build.log 2>&1 ||
  { tail -40 /tmp/proof_build.log | tee -a "$log"; exit 1; }
say "built"
if [[ ! -f "$root/.data_done" ]]; then
  [[ -s runs/data/synth.jsonl ]] || $kr data synth --families all --n 3000 --out runs/data/synth.jsonl >> "$log" 2>&1
  if [[ "${PROOF_NO_CORPUS:-0}" != 1 && ! -s runs/data/corpus.jsonl ]]; then
    from=(--from /usr/local/cuda/include)
    if [[ -f .device/cutlass-src.tgz ]]; then
      mkdir -p /tmp/cutlass-src && tar -C /tmp/cutlass-src -xzf .device/cutlass-src.tgz
      for d in include examples tools; do [[ -d /tmp/cutlass-src/$d ]] && from+=(--from /tmp/cutlass-src/$d); done
    else
      say "no .device/cutlass-src.tgz (bash bench/gpu_rl_proof.sh --prepare): the corpus lacks CUTLASS's sources"
    fi
    $kr data build "${from[@]}" --out runs/data/corpus.jsonl >> "$log" 2>&1 || { say "data build failed"; exit 1; }
  fi
  if [[ ! -s runs/data/annotated_h100.jsonl ]]; then
    cat_args=() var_args=()
    [[ -f "$catalog_xz" ]] && xz -dc "$catalog_xz" > /tmp/proof_catalog.json && cat_args=(--catalog /tmp/proof_catalog.json)
    [[ -n "$variants_csv" && -f "$variants_csv" ]] && var_args=(--variants-csv "$variants_csv")
    $kr lift annotate "$config" --grid-csv "$sweep_csv" "${var_args[@]}" --device "$sweep_device" "${cat_args[@]}" \
      --out runs/data/annotated_h100.jsonl >> "$log" 2>&1 || { say "lift annotate failed"; exit 1; }
  fi
  touch "$root/.data_done"
  say "data ready: $(wc -l < runs/data/corpus.jsonl 2>/dev/null || echo 0) corpus, $(wc -l < runs/data/synth.jsonl) synth, $(wc -l < runs/data/annotated_h100.jsonl) annotated triplets"
fi

# ---- 3. the family list on the spare GPU (started first: it runs beside the seeds' training) --
spare=${#seeds[@]}
if ((ngpu > spare)) && [[ ! -f "$root/.family_list_done" ]] && (($(left) > 60)); then
  (
    CUDA_VISIBLE_DEVICES=$spare timeout -s INT "$(left)" "$kr" bench --families all --grid "$grid_shapes" \
      --per-family "$family_list" --out "$root/family_list.csv" --time-budget-s "$(left)" \
      > "$root/family_list.log" 2>&1
    rc=$?
    ((rc == 0)) && touch "$root/.family_list_done"
    echo "[family list] exit $rc" >> "$log"
  ) &
fi
[[ -f "$root/.family_list_done" ]] || ((ngpu > spare)) || touch "$root/.family_list_done"  # no spare GPU: the portfolio

# ---- 2. one seed per GPU --------------------------------------------------------------------------
lift_dirs() {  # lift_dirs RUN: its lift directories, split x mode
  local split mode
  for split in grid offgrid; do for mode in "${modes[@]}"; do echo "$1/${split}_$mode"; done; done
}
seed_chain() {  # seed_chain SEED GPU
  local s=$1 run=$root/seed$1 rc
  export CUDA_VISIBLE_DEVICES=$2
  local slog=$run/train.log
  mkdir -p "$run"
  stage() {  # stage NAME: trains it (resumed); 0 done, 1 to be continued, 2 failed
    local resume=()
    [[ -f "$run/config.yaml" ]] && resume=(--resume)
    timeout -s INT "$(left)" "$kr" train "$config" "run.seed=$s" --run-dir "$run" --stages "$1" "${resume[@]}" >> "$slog" 2>&1
    rc=$?
    ((rc == 0)) && return 0
    ((rc == 124)) && return 1
    echo "[seed $s] $1 failed (exit $rc): $(tail -3 "$slog")" >> "$log"; return 2
  }
  if [[ ! -f "$run/.pretrain_done" ]] && (($(left) > 30)); then
    stage pretrain; rc=$?
    ((rc == 2)) && return 1
    ((rc == 0)) && touch "$run/.pretrain_done"
  fi
  if [[ -f "$run/.pretrain_done" && ! -f "$run/.rl_done" ]] && (($(left) > 60)); then
    stage hgemm_rl; rc=$?
    ((rc == 2)) && return 1
    ((rc == 0)) && touch "$run/.rl_done"
  fi
  [[ -f "$run/.rl_done" ]] || { echo "[seed $s] training: to be continued" >> "$log"; return 0; }
  # The family list first (the spare GPU's sweep), so that every shape's arm is the same kind.
  while [[ ! -f "$root/.family_list_done" ]] && (($(left) > 120)); do sleep 10; done
  [[ -f "$root/.family_list_done" ]] || return 0
  local list_args=(--family-list "$family_list")
  [[ -s "$root/family_list.csv" ]] && list_args+=(--family-list-csv "$root/family_list.csv" --device "$sweep_device")
  for split in grid offgrid; do
    local file=$grid_shapes
    [[ $split == offgrid ]] && file=$offgrid_shapes
    local want
    want=$(shapes_in "$file")
    ((max_shapes > 0 && max_shapes < want)) && want=$max_shapes
    for mode in "${modes[@]}"; do
      local lift=$run/${split}_$mode
      [[ -f "$lift/.done" ]] && continue
      (($(left) > 60)) || return 0
      "$kr" lift measure --run-dir "$run" --out "$lift" --shapes "$file" --split "$split" --prompt-mode "$mode" \
        --samples "$samples" --best-of-n -1 --seed "$s" --max-shapes "$max_shapes" --sweep-csv "$sweep_csv" \
        --device "$sweep_device" "${list_args[@]}" --time-budget-s "$(left)" "${measure_set[@]}" >> "$slog" 2>&1 ||
        { echo "[seed $s] measure $split $mode failed: $(tail -3 "$slog")" >> "$log"; return 1; }
      local n
      n=$(grep -c . "$lift/per_shape.jsonl" 2>/dev/null || echo 0)
      ((n >= want)) && touch "$lift/.done"
      echo "[seed $s] measure $split $mode: $n of $want shapes" >> "$log"
    done
  done
  for lift in $(lift_dirs "$run"); do
    [[ -f "$lift/.done" && ! -f "$lift/discoveries.jsonl" ]] && (($(left) > 60)) || continue
    "$kr" lift promote --run-dir "$run" --lift "$lift" --sweep-csv "$sweep_csv" --device "$sweep_device" \
      --family-list 0 --out "$lift/catalog_rl.json" "${measure_set[@]}" >> "$slog" 2>&1 ||
      echo "[seed $s] promote $lift failed" >> "$log"
  done
}
gpu=0
for s in "${seeds[@]}"; do
  seed_chain "$s" "$gpu" &
  gpu=$((gpu + 1))
done
wait

# ---- 4. the proof ---------------------------------------------------------------------------------
lifts=()
all_done=1
for s in "${seeds[@]}"; do
  for d in $(lift_dirs "$root/seed$s"); do
    [[ -s "$d/per_shape.jsonl" ]] && lifts+=(--lift "$d")
    [[ -f "$d/.done" ]] || all_done=0
  done
done
if ((${#lifts[@]} > 0)); then
  "$kr" lift proof "${lifts[@]}" --out "$root/proof" > /dev/null 2>> "$log" && say "proof written ($((${#lifts[@]} / 2)) lift directories)"
  python3 bench/plot_lift.py --proof "$root/proof" >> "$log" 2>&1 || say "plots failed (matplotlib?)"
fi

# ---- what comes back ------------------------------------------------------------------------------
[[ -d "$root/proof" ]] && tar -czf "$out/proof.tgz" -C "$root" proof
[[ -f "$root/family_list.csv" ]] && cp "$root/family_list.csv" "$out/"
for s in "${seeds[@]}"; do
  run=$root/seed$s
  [[ -d "$run" ]] || continue
  files=$(cd "$run" && ls -d train.log metrics.jsonl */per_shape.jsonl */samples.jsonl */prompts.jsonl */rl.json \
    */discoveries.jsonl */lift.md */catalog_rl.json */kernels/*_after.* 2>/dev/null)
  [[ -n "$files" ]] || continue
  (cd "$run" && tar -cJf "$out/seed$s.tar.xz" $files)
  if (($(stat -c %s "$out/seed$s.tar.xz") > 15 * 1024 * 1024)); then  # the before side's code is the bulk
    (cd "$run" && tar -cJf "$out/seed$s.tar.xz" $(echo "$files" | grep -v prompts.jsonl))
    say "seed $s: prompts.jsonl left out (over 15 MiB with it)"
  fi
done
if ((all_done)) && [[ -f "$root/proof/proof.md" ]]; then
  say "proof: done"
  tee -a "$log" < "$root/proof/proof.md"
else
  say "proof: not done; run again"
fi
cp "$log" "$out/proof.log"
