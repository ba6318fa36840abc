#!/usr/bin/env bash
# GPU acceptance of a pretrained-shape policy (issue 13): for a Qwen2.5-1.5B-shaped and a
# Llama-3.1-8B-shaped model with random weights made by transformers on the GPU machine
# (bench/hf_policy_ref.py):
#   - bf16 logits parity of the HF import against transformers (same bf16 weights, same tokens),
#   - generation: tokens/s of our KV-cache sampler (CUDA-graph decode) against HF `generate`
#     with a warmed static cache, batch 64, prompt 512, 512 new tokens,
#   - one GRPO step (bench/bench_hf_policy.cpp): the 8B with LoRA rank 16 on every projection,
#     the 1.5B fully fine-tuned, 32 rows (4 groups of 8) of 4096 prompt + 512 new tokens
#     (the quickstart's 4608 context), activation checkpointing, chunked log-softmax; its time
#     split and peak CUDA memory. Rewards are random (the evaluator is not part of it).
# Writes OUT_DIR/hf_policy.md (tables) and the raw JSON and logs beside it.
#   usage: bash bench/gpu_hf_policy.sh BUILD_DIR OUT_DIR
# On the device machine (no package registry): on the CPU machine first run
#   bash scripts/device_prepare.sh
# then call the device tool with carry [".device"] and
#   rm -f /tmp/deps/.done; source .device/env.sh && bash bench/gpu_hf_policy.sh build-gpu $OUT
# Expected to take 6-8 minutes on an H100/H200 (a clean build is ~2 of them).
set -uo pipefail
B=${1:-build-gpu}
OUT=${2:-${OUT:-/tmp/hf_policy_out}}
W=${HF_POLICY_WORK:-/tmp/hf_policy_work}
mkdir -p "$OUT" "$W"
t_start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t_start )) s] $*"; }

stamp "build"
if [[ ! -f "$B/build.ninja" && ! -f "$B/Makefile" ]]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 ||
    { tail -30 "$OUT/cmake.log"; exit 1; }
fi
cmake --build "$B" --target bench_hf_policy > "$OUT/build.log" 2>&1 ||
  { grep -m 20 -B2 -A8 "error" "$OUT/build.log"; tail -20 "$OUT/build.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1

run_shape() {  # SHAPE LORA_RANK
  local shape=$1 rank=$2
  stamp "$shape: transformers model, reference logits, HF generate"
  python3 bench/hf_policy_ref.py "$shape" "$W/$shape" > "$OUT/${shape}_hf.log" 2>&1 ||
    { tail -20 "$OUT/${shape}_hf.log"; return 1; }
  cp "$W/$shape/hf.json" "$OUT/${shape}_hf.json"
  stamp "$shape: KernelRL import, parity, generation, GRPO step (lora rank $rank)"
  "$B/bench/bench_hf_policy" --hf "$W/$shape/model" --ref "$W/$shape/ref.safetensors" \
    --lora-rank "$rank" --out "$OUT/${shape}_kernelrl.json" > "$OUT/${shape}_kernelrl.log" 2>&1 ||
    { tail -20 "$OUT/${shape}_kernelrl.log"; return 1; }
  rm -rf "$W/$shape"  # 16 GB for the 8B
}
rc=0
shapes=${HF_POLICY_SHAPES:-qwen2-1.5b llama3-8b}  # a subset when one device call cannot hold both
for s in $shapes; do
  case $s in
    qwen2-1.5b) run_shape qwen2-1.5b 0 || rc=1 ;;
    llama3-8b) run_shape llama3-8b 16 || rc=1 ;;
    *) echo "unknown shape $s" >&2; rc=2 ;;
  esac
done

stamp "tables"
python3 - "$OUT" "$shapes" > "$OUT/hf_policy.md" <<'EOF'
import json, os, sys
out = sys.argv[1]
ran = sys.argv[2].split()  # HF_POLICY_SHAPES: a shape left out is "not run", not "failed"
def load(p):
    p = os.path.join(out, p)
    return json.load(open(p)) if os.path.exists(p) else None
gpu = open(os.path.join(out, "gpu.txt")).read().strip() if os.path.exists(os.path.join(out, "gpu.txt")) else "?"
print(f"GPU: {gpu}\n")
print("| model | load s | max abs Δlogit | mean abs Δlogit | max abs logit | argmax agree | mean KL(HF‖ours) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
shapes = [s for s in ("qwen2-1.5b", "llama3-8b") if s in ran]
for s in shapes:
    k = load(f"{s}_kernelrl.json")
    if not k or "parity" not in k:
        print(f"| {s} | failed | | | | | |"); continue
    p = k["parity"]
    print(f"| {s} ({k['model']}) | {k['load_s']:.0f} | {p['max_abs_diff']:.3g} | {p['mean_abs_diff']:.3g} | "
          f"{p['max_abs_logit']:.3g} | {100 * p['argmax_agree']:.2f}% | {p['mean_kl']:.3g} |")
print("\nGeneration, batch 64, prompt 512, 512 new tokens, sampling at temperature 1, every row the full budget "
      "(tokens/s = generated tokens / wall s, prefill included):\n")
print("| model | KernelRL (CUDA-graph decode) tok/s | HF generate (static cache, warmed) tok/s | ratio | KernelRL peak GiB |")
print("| --- | --- | --- | --- | --- |")
for s in shapes:
    k, h = load(f"{s}_kernelrl.json"), load(f"{s}_hf.json")
    if not k or "generate" not in k or not h or "generate" not in h:
        print(f"| {s} | failed | | | |"); continue
    a, b = k["generate"]["tokens_per_s"], h["generate"]["tokens_per_s"]
    print(f"| {s} | {a:.0f} | {b:.0f} | {a / b:.2f}x | {k['generate'].get('peak_allocated_gib', 0):.1f} |")
print("\nOne GRPO step (32 rows = 4 groups of 8, 4096 prompt + 512 new tokens, micro-batch 4, "
      "activation checkpointing, chunked log-softmax, random rewards):\n")
print("| model | training | trainable params | sample s | π_old + ref logprobs s | update s | step s | peak allocated GiB | peak reserved GiB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for s in shapes:
    k = load(f"{s}_kernelrl.json")
    if not k or "grpo" not in k:
        print(f"| {s} | failed | | | | | | | |"); continue
    g = k["grpo"]
    mode = "LoRA r16, bf16 base" if g["lora"] else "full, fp32 master"
    print(f"| {s} | {mode} | {g['trainable_params'] / 1e6:.1f}M | {g['sample_s']:.1f} | {g['logprobs_s']:.1f} | "
          f"{g['update_s']:.1f} | {g['step_s']:.1f} | {g.get('peak_allocated_gib', 0):.1f} | {g.get('peak_reserved_gib', 0):.1f} |")
EOF
cat "$OUT/hf_policy.md"
stamp "done (exit $rc)"
exit $rc
