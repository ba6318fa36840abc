#!/usr/bin/env bash
# Issue 40's multi-GPU table in one call on a 4-GPU host (H200 or H100):
#   bash bench/gpu_issue40.sh BUILD_DIR OUT_DIR
# BUILD_DIR must hold a built kernelrl and kernelrl_eval_worker (the lead's batch builds first).
#   scaling  bench/gpu_multigpu.sh's RL phase (PHASES="policy rl": no pretraining tokens/s row)
#            on configs/lift-small.yaml's hgemm_rl stage (RL_CONFIG, RL_STAGE) from its policy
#            (pretrained here on 1 GPU by bench/gpu_rl_lift.sh unless RL_POLICY names one; with
#            RL_CONFIG=configs/quickstart.yaml the quickstart's 2000-step policy, 89 s on an H200), RL_STEPS (2) steps a run (the
#            table measures the steps after the first): rl1 (1 GPU, 4 prompts x 8), rl2 / rl4
#            (the same global batch: strong scaling), rl2w / rl4w (2 and 4 times the prompts:
#            weak scaling). Exemplar pools are seeded ahead (before step 1), so no step seeds.
#   split    policy on GPU 0, evaluation workers on GPUs 1-3 (reward.gpus=[1,2,3]): a policy
#            with the Qwen2.5-1.5B body (d 1536, 28 layers, heads 12/2, ff 8960; ~1.3B
#            parameters with the quickstart tokenizer's vocabulary) and random weights (one
#            pretraining step writes its checkpoint), SPLIT_STEPS (4) hgemm_rl steps with
#            rollout.overlap=1 (with reward.gpus the timing runs beside the next generation),
#            rollout.demonstrations=2 (a random policy writes no kernel; two rows a group are
#            the pool's best, so every step compiles and updates), 1024 new tokens a row.
#            nvidia-smi samples every GPU's utilization (the share of each 1/6 s window in which
#            a kernel ran) every 200 ms from the first RL step to the end: the policy GPU's busy
#            fraction is the mean over GPU 0's samples, beside the evaluation GPUs' means.
# ARMS (default "scaling split") picks parts, so a call that runs short can be followed by one
# for the rest on the warm machine. Writes OUT_DIR/issue40.md (the scaling table from
# bench/multigpu_table.py with rl_guard's verdict per run, the split arm's row and its guard) and
# OUT_DIR/files-*.tgz (logs, metrics, utilization samples). Exits 1 when a guard failed.
# Measured (4 x H200, 2026-11-28, with the quickstart job then the default): the policy 89 s, seeding
# ahead 38-41 s a run, steps 45-60 s (compile-bound); the scaling arm did not fit one 420 s call.
# With lift-small, expect its pretraining to take a call of its own (bench/gpu_rl_lift.sh resumes).
set -uo pipefail
build=${1:?usage: gpu_issue40.sh BUILD_DIR OUT_DIR}
out=${2:?usage: gpu_issue40.sh BUILD_DIR OUT_DIR}
arms=${ARMS:-scaling split}
root=${ROOT:-runs/issue40}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$out" "$root"
t_start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t_start )) s] $*"; }
ngpu=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader > "$out/gpus.txt"
(( ngpu >= 4 )) || { echo "gpu_issue40.sh: needs 4 GPUs, this host shows $ngpu" >&2; exit 2; }
kr=$(realpath "$build/kernelrl")
rc=0

if [[ " $arms " == *" scaling "* ]]; then
  # 2 GPUs: rl1, rl2, rl2w; then 4 GPUs: rl4, rl4w (rl1 is shared). Each call packs its own files.
  stamp "scaling: 1 and 2 GPUs"
  # The RL job: lift-small's (RL_CONFIG/RL_STAGE override), whose 8.4M policy writes kernels that
  # compile in seconds, as the 2026-11-27 scaling rows. The quickstart's policy writes CUTLASS-
  # heavy kernels: on 4 H200s (2026-11-28) its steps waited 40-49 s on the slowest nvcc, so GPU
  # count could not show.
  export RL_CONFIG=${RL_CONFIG:-configs/lift-small.yaml} RL_STAGE=${RL_STAGE:-1}
  NGPU=2 PHASES="policy rl" ROOT=$root RL_STEPS=${RL_STEPS:-2} RL_TIMEOUT=${RL_TIMEOUT:-240} \
    bash "$here/gpu_multigpu.sh" "$build" "$out/scale2" > "$out/scale2.log" 2>&1
  stamp "scaling: 4 GPUs"
  NGPU=4 PHASES="rl" RL_RUNS="rl4 rl4w" ROOT=$root RL_STEPS=${RL_STEPS:-2} RL_TIMEOUT=${RL_TIMEOUT:-240} \
    bash "$here/gpu_multigpu.sh" "$build" "$out/scale4" > "$out/scale4.log" 2>&1
  runs=()
  for v in "rl1:1 GPU, 4 x 8" "rl2:2 GPUs, 4 x 8 (strong)" "rl2w:2 GPUs, 8 x 8 (weak)" \
           "rl4:4 GPUs, 4 x 8 (strong)" "rl4w:4 GPUs, 16 x 8 (weak)"; do
    [[ -f $root/${v%%:*}/metrics.jsonl ]] && runs+=("$v")
  done
  python3 "$here/multigpu_table.py" "$root" "$out/scaling.md" "$out/gpus.txt" "${runs[@]}" > /dev/null || rc=1
  stamp "scaling done (${#runs[@]} runs)"
fi

if [[ " $arms " == *" split "* ]]; then
  d=$root/split
  rm -rf "$d"
  tok=$root/tok/tokenizer.model  # gpu_multigpu.sh's (the quickstart's), made by the scaling arm
  [[ -s $tok ]] || tok=""
  steps=${SPLIT_STEPS:-4}
  body=(model.d_model=1536 model.n_layers=28 model.n_heads=12 model.n_kv_heads=2 model.d_ff=8960)
  stamp "split: policy GPU 0, evaluation GPUs 1-3, ${steps} steps"
  # The sampler: every GPU's utilization every 200 ms, started by the log's first RL step line.
  ( while ! grep -q "exemplar pools seeded ahead" "$out/split.log" 2>/dev/null; do sleep 0.5; done
    exec nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader,nounits -lms 200 \
      > "$out/split_util.csv" ) &
  sampler=$!
  CUDA_VISIBLE_DEVICES=0,1,2,3 timeout ${SPLIT_TIMEOUT:-300} $kr train configs/quickstart.yaml \
    --stages pretrain,hgemm_rl ${tok:+data.tokenizer=$tok} "${body[@]}" \
    trainer.stages.0.steps=1 trainer.stages.0.batch_size=1 trainer.stages.0.eval_every=0 \
    trainer.stages.0.checkpoint_every=1 trainer.stages.2.steps=$steps trainer.stages.2.checkpoint_every=0 \
    'reward.gpus=[1,2,3]' rollout.overlap=1 rollout.demonstrations=2 rollout.sampling.max_new_tokens=1024 \
    reward.cache_dir=$d/compile_cache --run-dir "$d" > "$out/split.log" 2>&1
  echo "split: exit $?" >> "$out/split.log"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  [[ -f $d/metrics.jsonl ]] && cp "$d/metrics.jsonl" "$out/split_metrics.jsonl"
  python3 - "$d/metrics.jsonl" "$out/split_util.csv" > "$out/split.md" <<'EOF' || rc=1
import os, statistics, sys
sys.path.insert(0, "bench")
import rl_guard
metrics, util = sys.argv[1:3]
recs = rl_guard.read_stage(metrics, "hgemm_rl") if os.path.exists(metrics) else []
guard = rl_guard.problems(recs, "split", "hgemm_rl", skip=1, min_steps=1)
rs = recs[1:]
per_gpu = {}
if os.path.exists(util):
    for line in open(util):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[2].isdigit():
            per_gpu.setdefault(int(parts[1]), []).append(int(parts[2]))
med = lambda k: statistics.median([r[k] for r in rs]) if rs and all(k in r for r in rs) else float("nan")
busy = {g: statistics.mean(v) / 100 for g, v in sorted(per_gpu.items()) if v}
rows = med("candidates")
print("| split arm (quickstart hgemm_rl, 1.3B Qwen2.5-1.5B-bodied random policy) | policy GPUs | eval GPUs | steps measured "
      "| step s | samples/s | generate / compile / compile+time wait / time / runner starts / update s (medians) "
      "| seed_s in steps | policy GPU 0 busy | eval GPUs busy (mean) | samples (200 ms) | rl_guard |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
split = " / ".join(f"{med(k):.1f}" for k in ("generate_s", "compile_s", "compile_wait_s", "time_s", "runner_start_s", "update_s"))
ev = [busy[g] for g in (1, 2, 3) if g in busy]
print(f"| split | 1 (GPU 0) | 3 (GPUs 1-3) | {len(rs)} | {med('step_s'):.1f} | {rows / med('step_s'):.2f} | {split} "
      f"| {max((r.get('seed_s', float('nan')) for r in recs), default=float('nan')):.1f} "
      f"| {busy.get(0, float('nan')):.0%} (target >= 80 %) | {statistics.mean(ev) if ev else float('nan'):.0%} "
      f"| {len(per_gpu.get(0, []))} | {'pass' if not guard else 'FAIL: ' + '; '.join(guard)} |")
sys.exit(1 if guard or not rs else 0)
EOF
  stamp "split done"
fi

{ echo "# Issue 40 on $(head -1 "$out/gpus.txt" | cut -d, -f2) x $ngpu, $(date -u +%F)"; echo
  echo "\`bash bench/gpu_issue40.sh BUILD OUT\` (ARMS=\"$arms\")"; echo
  [[ -f $out/scaling.md ]] && cat "$out/scaling.md" && echo
  [[ -f $out/split.md ]] && cat "$out/split.md"; } > "$out/issue40.md"
cat "$out/issue40.md"
( cd "$out" && find . -type f ! -name issue40.md ! -name '*.tgz' -printf '%P\n' |
    tar -czf "files-$(date +%H%M%S).tgz" -T - --remove-files ) || echo "gpu_issue40.sh: could not pack $out" >&2
stamp "total"
exit $rc
