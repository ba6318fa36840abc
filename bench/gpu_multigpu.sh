#!/usr/bin/env bash
# Data-parallel scaling on one host with N GPUs (issues 12 and 23): 1 GPU against N in the same
# call, the quickstart model and data.
#   bash bench/gpu_multigpu.sh BUILD_DIR OUT_DIR
# Builds BUILD_DIR first when it has no kernelrl (cmake + ninja, a few minutes more). Then:
#   data      the quickstart corpus (CUDA headers + kernel families), a tokenizer (once)
#   pretrain  the quickstart pretrain stage (preset small, seq 4608, global batch 8), 40 steps,
#             on 1 GPU and on N (`kernelrl train --nproc N`, NCCL): tokens/s as the median of
#             steps 11-40 (metrics.jsonl tokens_per_s, global tokens)
#   policy    RL needs a policy whose candidates compile: a 40-step one writes none (issue 23:
#             128 candidates, 0 compiled, 0 updates). RL_POLICY=DIR takes a pretrain checkpoint
#             (e.g. a finished quickstart's runs/quickstart/checkpoints/pretrain/step_2000, with
#             its tokenizer.model beside the run: RL_TOKENIZER); else the quickstart's 2000-step
#             pretraining runs here on 1 GPU (~75 s on an H100)
#   rl        hgemm_rl from that policy, RL_STEPS (3) steps: on 1 GPU (4 prompts x 8), on N GPUs
#             at the same global batch (strong scaling) and, with WEAK=1 (default), at N times
#             the prompts (weak scaling); steps/s and samples/s after the first step, and where
#             a step's time goes (generate / compile / compile wait / time / update).
#             RL_CONFIG (configs/quickstart.yaml) is the job the RL runs take, RL_STAGE (2) the
#             index of its hgemm_rl stage; e.g. RL_CONFIG=configs/lift-small.yaml RL_STAGE=1
#             (candidates that compile in seconds, issue 23), whose policy phase is
#             `LIFT_CONFIG=$RL_CONFIG LIFT_STOP_AFTER=pretrain bash bench/gpu_rl_lift.sh` (the
#             tokenizer: the checkpoint's) unless RL_POLICY names one. RL_RUNS picks
#             runs of "rl1 rlN rlNw" (all by default), so the runs can be split over calls on a
#             warm machine; the guard and the table take every run of ROOT that has metrics.
#             Each run has its own results store and compile cache (its run dir): a run that
#             repeats another's samples (same seed, same rows on any number of ranks) must not
#             find them compiled. RL_SET adds overrides to every RL run (e.g.
#             RL_SET="reward.spare_runners=0" with its own ROOT, against the default's).
# Every RL run must have measured RL: bench/rl_guard.py prints a line per measured step without
# an update or a compiled candidate; the table (bench/multigpu_table.py) shows each run's guard,
# gives a failed run no ratio, and the bench then exits 1.
# Writes OUT_DIR/multigpu.md (per GPU count: steps/s, samples/s, weak and strong scaling against
# 1 GPU beside issue 40's targets, the step split generate / compile / compile wait / time (runner
# starts) / wait / update, the guard; the command, machine and date); the logs and
# every run's metrics go into OUT_DIR/files-HHMMSS.tgz (the device tool returns 8 files a call).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0): it can take a shared host's GPUs out of
# service. PHASES (default "pretrain policy rl") picks phases; ROOT (runs/multigpu) keeps the
# runs, so a later call on a warm machine can run the next phase (ROOT=/tmp/... to survive a
# carried folder's replacement). NGPU defaults to the GPUs visible; one GPU does for RL_RUNS=rl1
# alone (no pretrain phase).
set -uo pipefail
build=${1:?usage: gpu_multigpu.sh BUILD_DIR OUT_DIR}
out=${2:?usage: gpu_multigpu.sh BUILD_DIR OUT_DIR}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
phases=${PHASES:-pretrain policy rl}
root=${ROOT:-runs/multigpu}
rl_steps=${RL_STEPS:-3}
mkdir -p "$out" runs/data "$root"
t_start=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$out/gpus.txt"
ngpu=${NGPU:-$(nvidia-smi -L | wc -l)}
# One GPU does for the 1-GPU RL run alone (RL_RUNS=rl1, e.g. comparing settings with RL_SET).
if (( ngpu < 2 )) && [[ ${RL_RUNS:-} != rl1 || " $phases " == *" pretrain "* ]]; then
  echo "gpu_multigpu.sh: needs 2 GPUs, this host shows $ngpu (one does only for RL_RUNS=rl1 without pretrain)" >&2
  exit 2
fi
devs=$(seq -s, 0 $((ngpu - 1)))
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ -z "${KERNELRL_CUTLASS_INCLUDE:-}" && -f .device/cutlass-include.tgz ]]; then  # CUTLASS seeds
  [[ -d /tmp/cutlass/include/cute ]] ||
    { mkdir -p /tmp/cutlass && tar -C /tmp/cutlass -xzf .device/cutlass-include.tgz; }
  export KERNELRL_CUTLASS_INCLUDE=/tmp/cutlass/include
fi
if [[ ! -x $build/kernelrl ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/cmake.log" 2>&1 &&
    cmake --build "$build" --target kernelrl kernelrl_eval_worker > "$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - t_start )) s"
fi
kr=$(realpath "$build/kernelrl")

# ---- data -----------------------------------------------------------------------------------
[[ -s runs/data/synth.jsonl ]] || $kr data synth --families all --n 3000 --out runs/data/synth.jsonl > "$out/data.log" 2>&1
[[ -s runs/data/corpus.jsonl ]] || $kr data build --from /usr/local/cuda/include --out runs/data/corpus.jsonl >> "$out/data.log" 2>&1
echo "data: $(( $(date +%s) - t_start )) s"

pre=(configs/quickstart.yaml --stages pretrain trainer.stages.0.steps=40 trainer.stages.0.batch_size=8
     trainer.stages.0.eval_every=0 trainer.stages.0.checkpoint_every=40)
quiet() { grep -v "^  \|trainer_interface\|unigram\|bpe_model\|^}\|^trainer_spec\|^normalizer\|^denormalizer\|sentencepiece_trainer"; }

rl_config=${RL_CONFIG:-configs/quickstart.yaml}
rl_stage=${RL_STAGE:-2}
quickstart_rl=0
[[ $rl_config == configs/quickstart.yaml ]] && quickstart_rl=1

# The quickstart's tokenizer once (part of the first run's data phase, not of its steps' times):
# pretraining's, and the RL runs' when they take the quickstart's job.
tok=$root/tok/tokenizer.model
((quickstart_rl)) && tok=${RL_TOKENIZER:-$tok}
if [[ " $phases " == *" pretrain "* ]] || ((quickstart_rl)); then
  if [[ ! -s $tok ]]; then
    timeout 300 $kr train "${pre[@]}" trainer.stages.0.steps=1 --run-dir $root/tok --overwrite 2>&1 | quiet > "$out/tokenizer.log"
  fi
  [[ -s $tok ]] || { echo "no tokenizer"; tail -20 "$out/tokenizer.log"; exit 1; }
fi

# ---- pretraining: 1 GPU, then N ---------------------------------------------------------------
if [[ " $phases " == *" pretrain "* ]]; then
  CUDA_VISIBLE_DEVICES=0 timeout 240 $kr train "${pre[@]}" data.tokenizer=$tok --run-dir $root/pre1 --overwrite 2>&1 | quiet > "$out/pretrain_1gpu.log"
  echo "pretrain 1 GPU: exit ${PIPESTATUS[0]}, $(( $(date +%s) - t_start )) s"
  CUDA_VISIBLE_DEVICES=$devs timeout 240 $kr train "${pre[@]}" data.tokenizer=$tok --nproc $ngpu --run-dir $root/pre$ngpu --overwrite 2>&1 | quiet > "$out/pretrain_${ngpu}gpu.log"
  echo "pretrain $ngpu GPUs: exit ${PIPESTATUS[0]}, $(( $(date +%s) - t_start )) s"
fi

# ---- a policy whose candidates compile ----------------------------------------------------------
if ((quickstart_rl)); then
  policy=${RL_POLICY:-$root/policy/checkpoints/pretrain/step_2000}
  if [[ " $phases " == *" policy "* && -z ${RL_POLICY:-} && ! -d $policy ]]; then
    CUDA_VISIBLE_DEVICES=0 timeout 420 $kr train configs/quickstart.yaml --stages pretrain data.tokenizer=$tok \
      trainer.stages.0.eval_every=0 --run-dir $root/policy --overwrite 2>&1 | quiet > "$out/policy.log"
    echo "policy (quickstart pretraining, 1 GPU): exit ${PIPESTATUS[0]}, $(( $(date +%s) - t_start )) s"
  fi
else
  # Another job's policy is its own pretraining (a lift config: the speed-annotated data first),
  # by bench/gpu_rl_lift.sh into runs/lift; a budget it does not finish in ends the call, and the
  # next call on the warm machine goes on from its checkpoint.
  if [[ " $phases " == *" policy "* && -z ${RL_POLICY:-} && ! -f runs/lift/.pretrain_done ]]; then
    LIFT_CONFIG=$rl_config LIFT_STOP_AFTER=pretrain bash "$here/gpu_rl_lift.sh" "$build" "$out/policy" \
      "${POLICY_BUDGET_S:-540}" | tail -3
    [[ -f runs/lift/.pretrain_done ]] ||
      { echo "gpu_multigpu.sh: the policy's pretraining is not done; run again (PHASES may drop pretrain)" >&2; exit 1; }
    echo "policy ($rl_config pretraining, 1 GPU): $(( $(date +%s) - t_start )) s"
  fi
  policy=${RL_POLICY:-runs/lift/checkpoints/pretrain/$(cat runs/lift/checkpoints/pretrain/latest 2>/dev/null)}
  tok=${RL_TOKENIZER:-$policy/tokenizer.model}  # the checkpoint carries its tokenizer
fi

# ---- RL: hgemm_rl from the policy, 1 GPU then N (strong, weak) ---------------------------------
variants=("rl1:1 GPU, 4 x 8:1:4")
((ngpu > 1)) && variants+=("rl${ngpu}:$ngpu GPUs, 4 x 8 (strong):$ngpu:4")
[[ ${WEAK:-1} == 1 ]] && ((ngpu > 1)) && variants+=("rl${ngpu}w:$ngpu GPUs, $((4 * ngpu)) x 8 (weak):$ngpu:$((4 * ngpu))")
if [[ " $phases " == *" rl "* ]]; then
  [[ -d $policy ]] || { echo "gpu_multigpu.sh: no policy checkpoint at $policy (run the policy phase or set RL_POLICY)" >&2; exit 1; }
  rl=("$rl_config" --stages hgemm_rl data.tokenizer=$tok trainer.stages.$rl_stage.steps=$rl_steps
      trainer.stages.$rl_stage.checkpoint_every=0)
  for v in "${variants[@]}"; do
    IFS=: read -r name label n prompts <<< "$v"
    [[ -n ${RL_RUNS:-} && " ${RL_RUNS//N/$ngpu} " != *" $name "* ]] && continue
    d=$root/$name
    # The policy's run (checkpoints/pretrain/step_N three levels up) gives config.yaml to resume.
    rm -rf $d && mkdir -p $d/checkpoints/pretrain && cp -r $policy $d/checkpoints/pretrain/ &&
      basename $policy > $d/checkpoints/pretrain/latest &&
      cp "$(dirname "$(dirname "$(dirname "$policy")")")/config.yaml" $d/config.yaml
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) timeout ${RL_TIMEOUT:-900} $kr train "${rl[@]}" \
      rollout.prompts_per_step=$prompts reward.cache_dir=$d/compile_cache ${RL_SET:-} --nproc $n --run-dir $d --resume \
      2>&1 | quiet > "$out/${name}.log"
    echo "hgemm_rl $label: exit ${PIPESTATUS[0]}, $(( $(date +%s) - t_start )) s"
  done
fi
# Every RL run of ROOT (this call's and a warm machine's earlier calls'), rl1 first.
runs=()
for v in "${variants[@]}"; do
  IFS=: read -r name label n prompts <<< "$v"
  [[ -f $root/$name/metrics.jsonl ]] || continue
  cp $root/$name/metrics.jsonl "$out/${name}_metrics.jsonl"
  runs+=("$name:$label")
done
# No ratio from runs that measured nothing: the guard's lines here, and the table gives such a
# run no ratio (its rl_guard column says why) and exits 1.
for r in "${runs[@]}"; do
  python3 "$here/rl_guard.py" "$root/${r%%:*}" hgemm_rl --skip 1 --min-steps 1
done

for f in $root/pre*; do [[ -f $f/metrics.jsonl ]] && cp $f/metrics.jsonl "$out/$(basename $f)_metrics.jsonl"; done
table_rc=0
RL_CONFIG=${rl_config} python3 "$here/multigpu_table.py" "$root" "$out/multigpu.md" "$out/gpus.txt" "${runs[@]}" ||
  { table_rc=$?; echo "gpu_multigpu.sh: an RL run measured no RL (above): no ratio for it" >&2; }
# The device tool brings back at most 8 files: all but the table go into one archive per call
# (each call's its own, so a second call on the warm machine adds one, not overwrites it).
( cd "$out" && find . -type f ! -name multigpu.md ! -name '*.tgz' -printf '%P\n' |
    tar -czf "files-$(date +%H%M%S).tgz" -T - --remove-files ) || echo "gpu_multigpu.sh: could not pack $out" >&2
echo "total: $(( $(date +%s) - t_start )) s"
exit $table_rc
