#!/usr/bin/env bash
# Data-parallel scaling on one host with 2 GPUs (issue 12): 1 GPU against 2 GPUs in the same
# call, the quickstart model and data.
#   bash bench/gpu_multigpu.sh BUILD_DIR OUT_DIR
# Builds BUILD_DIR first when it has no kernelrl (cmake + ninja, a few minutes more). Then:
#   data      the quickstart corpus (CUDA headers + kernel families), a tokenizer (once)
#   pretrain  the quickstart pretrain stage (preset small, seq 4608, global batch 8), 40 steps,
#             on 1 GPU and on 2 GPUs (`kernelrl train --nproc 2`, NCCL): tokens/s as the median
#             of steps 11-40 (metrics.jsonl tokens_per_s, global tokens)
#   rl        hgemm_rl from the 1-GPU pretrain checkpoint, 4 steps of the quickstart's global
#             batch (4 prompts x 8), on 1 and on 2 GPUs: RL steps/s (median step_s after the
#             first step) and candidates evaluated per minute (all ranks)
# Writes OUT_DIR/multigpu.md (the table, with the command, machine and date) and the logs.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0): it can take a shared host's GPUs out of
# service. About 7-8 minutes once built on 2 H200s.
set -uo pipefail
build=${1:?usage: gpu_multigpu.sh BUILD_DIR OUT_DIR}
out=${2:?usage: gpu_multigpu.sh BUILD_DIR OUT_DIR}
export NCCL_NVLS_ENABLE=0
mkdir -p "$out" runs/data
t_start=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$out/gpus.txt"
ngpu=$(nvidia-smi -L | wc -l)
if (( ngpu < 2 )); then echo "gpu_multigpu.sh: needs 2 GPUs, this host shows $ngpu" >&2; exit 2; fi

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

root=runs/multigpu
rm -rf $root
pre=(configs/quickstart.yaml --stages pretrain trainer.stages.0.steps=40 trainer.stages.0.batch_size=8
     trainer.stages.0.eval_every=0 trainer.stages.0.checkpoint_every=40)
quiet() { grep -v "^  \|trainer_interface\|unigram\|bpe_model\|^}\|^trainer_spec\|^normalizer\|^denormalizer\|sentencepiece_trainer"; }

# The tokenizer once (part of the first run's data phase, not of its steps' times).
timeout 300 $kr train "${pre[@]}" trainer.stages.0.steps=1 --run-dir $root/tok 2>&1 | quiet > "$out/tokenizer.log"
tok=$root/tok/tokenizer.model
[[ -s $tok ]] || { echo "no tokenizer"; tail -20 "$out/tokenizer.log"; exit 1; }

# ---- pretraining: 1 GPU, then 2 -------------------------------------------------------------
CUDA_VISIBLE_DEVICES=0 timeout 240 $kr train "${pre[@]}" data.tokenizer=$tok --run-dir $root/pre1 2>&1 | quiet > "$out/pretrain_1gpu.log"
echo "pretrain 1 GPU: exit ${PIPESTATUS[0]}, $(( $(date +%s) - t_start )) s"
CUDA_VISIBLE_DEVICES=0,1 timeout 240 $kr train "${pre[@]}" data.tokenizer=$tok --nproc 2 --run-dir $root/pre2 2>&1 | quiet > "$out/pretrain_2gpu.log"
echo "pretrain 2 GPUs: exit ${PIPESTATUS[0]}, $(( $(date +%s) - t_start )) s"

# ---- RL: hgemm_rl from the 1-GPU checkpoint, 1 GPU then 2 -------------------------------------
ck=$root/pre1/checkpoints/pretrain/step_40
rl=(configs/quickstart.yaml --stages hgemm_rl trainer.stages.2.steps=4 trainer.stages.2.checkpoint_every=0)
for n in 1 2; do
  d=$root/rl$n
  mkdir -p $d/checkpoints/pretrain && cp -r $ck $d/checkpoints/pretrain/ && echo step_40 > $d/checkpoints/pretrain/latest
  cp $root/pre1/config.yaml $d/config.yaml
  devs=0; [[ $n == 2 ]] && devs=0,1
  CUDA_VISIBLE_DEVICES=$devs timeout 200 $kr train "${rl[@]}" --nproc $n --run-dir $d --resume 2>&1 | quiet > "$out/rl_${n}gpu.log"
  echo "hgemm_rl $n GPU(s): exit ${PIPESTATUS[0]}, $(( $(date +%s) - t_start )) s"
done

for f in $root/pre1 $root/pre2 $root/rl1 $root/rl2; do cp $f/metrics.jsonl "$out/$(basename $f)_metrics.jsonl" 2>/dev/null; done
python3 - "$out" "$root" <<'PY'
import json, os, statistics, sys, datetime, platform
out, root = sys.argv[1], sys.argv[2]
def recs(run, stage):
    p = os.path.join(root, run, "metrics.jsonl")
    if not os.path.exists(p): return []
    return [r for r in map(json.loads, filter(None, open(p).read().splitlines())) if r.get("stage") == stage]
def med(xs): return statistics.median(xs) if xs else float("nan")
p1 = med([r["tokens_per_s"] for r in recs("pre1", "pretrain")[10:]])
p2 = med([r["tokens_per_s"] for r in recs("pre2", "pretrain")[10:]])
def rl(run):
    rs = recs(run, "hgemm_rl")[1:]
    step = med([r["step_s"] for r in rs])
    cands = med([r.get("candidates", 32) / r["step_s"] * 60 for r in rs]) if rs else float("nan")
    return 1 / step if step == step else float("nan"), cands, len(rs) + 1
r1, c1, n1 = rl("rl1"); r2, c2, n2 = rl("rl2")
gpus = open(os.path.join(out, "gpus.txt")).read().strip().replace("\n", "; ")
lines = [f"Data-parallel scaling, `bash bench/gpu_multigpu.sh BUILD OUT`, {datetime.date.today()}, {gpus}, "
         f"NCCL_NVLS_ENABLE=0; quickstart model (preset small) and data.", "",
         "| measure | 1 GPU | 2 GPUs | 2 / 1 | target |", "|---|---|---|---|---|",
         f"| pretrain tokens/s (global batch 8 x 4608, median of steps 11-40) | {p1:,.0f} | {p2:,.0f} | {p2 / p1:.2f}x | >= 1.8x |",
         f"| hgemm_rl steps/s (4 x 8 completions per step, median after step 1) | {r1:.4f} | {r2:.4f} | {r2 / r1:.2f}x | >= 1.8x |",
         f"| candidates evaluated per minute (all GPUs) | {c1:.0f} | {c2:.0f} | {c2 / c1:.2f}x | |",
         "", f"RL steps measured: {n1} and {n2} (the first step, with the exemplar seeding, left out)."]
open(os.path.join(out, "multigpu.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
echo "total: $(( $(date +%s) - t_start )) s"
