#!/usr/bin/env bash
# Pretraining throughput, KernelRL's C++ step against PyTorch (issue 5), run on the GPU machine
# from the repository root after the build (bench_pretrain is one of its targets):
#   bash bench/bench_pretrain.sh BUILD_DIR OUT_DIR
# Model preset base (d 768, 12 layers, GQA 12/4, ff 2560, vocab 32000, tied), seq 2048,
# 3 warm-up + 20 timed optimizer steps per row, each row its own process:
#   batch 16: kernelrl (fused AdamW, stock AdamW, activation checkpointing); PyTorch + HF
#             LlamaForCausalLM eager (fused AdamW, foreach AdamW, checkpointing), compiled;
#             the self-contained PyTorch module eager (the HF-free reference);
#   batch 32: kernelrl and HF eager (the larger batch that fits; BATCH2=... to change it).
# Writes OUT_DIR/pretrain_throughput.jsonl (one JSON line per row; a failed row is a line with
# "error") and OUT_DIR/pretrain_throughput.md (the table). About 3-4 minutes on an H200 (the
# compiled row alone ~1-1.5 min). PYTHON=... picks the interpreter (default python3);
# COMPILE_BATCH2=1 adds the compiled row at batch 32 (+1 min). For a smoke test on a CPU:
#   PRESET=tiny VOCAB=512 SEQ=64 BATCH1=2 BATCH2=4 DEVICE=cpu WARMUP=1 STEPS=2 bash ... 
set -uo pipefail
build=${1:?usage: bench_pretrain.sh BUILD_DIR OUT_DIR}
out=${2:?usage: bench_pretrain.sh BUILD_DIR OUT_DIR}
py=${PYTHON:-python3}
batch1=${BATCH1:-16}
batch2=${BATCH2:-32}
steps=${STEPS:-20}
warmup=${WARMUP:-3}
mkdir -p "$out"
jsonl="$out/pretrain_throughput.jsonl"
: >"$jsonl"
common=(--preset "${PRESET:-base}" --vocab "${VOCAB:-32000}" --seq-len "${SEQ:-2048}"
        --device "${DEVICE:-auto}" --warmup "$warmup" --steps "$steps")
start=$(date +%s)

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
  2>/dev/null | tee "$out/gpu.txt"
"$py" -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda)
try:
    import transformers; print("transformers", transformers.__version__)
except ImportError: print("transformers: missing (rows use the self-contained module)")' \
  2>&1 | tee -a "$out/gpu.txt"

# run LABEL TIMEOUT_S CMD...: appends the command's JSON line, or an error line.
run() {
  local label=$1 limit=$2
  shift 2
  local t0=$(date +%s) line rc
  echo "== $label: $*" >&2
  line=$(timeout "$limit" "$@" 2>"$out/$label.err" | tail -1)
  rc=$?
  if [[ $rc -eq 0 && $line == \{* ]]; then
    echo "$line" >>"$jsonl"
  else
    local why
    why=$(tail -3 "$out/$label.err" | tr '\n"\\' '   ' | tr -d '\000-\037' | cut -c1-300)
    echo "{\"label\": \"$label\", \"error\": \"exit $rc: $why\"}" >>"$jsonl"
  fi
  echo "   $(($(date +%s) - t0)) s: ${line:-failed (see $out/$label.err)}" >&2
}

cxx="$build/bench/bench_pretrain"
pyb=("$py" bench/bench_pretrain.py --impl auto)
b1=$batch1
b2=$batch2
run cxx_b${b1} 120 "$cxx" "${common[@]}" --batch "$b1" --label cxx_b${b1}
run cxx_b${b1}_stockadam 120 "$cxx" "${common[@]}" --batch "$b1" --fused-adamw 0 \
  --label cxx_b${b1}_stockadam
run cxx_b${b1}_ckpt 120 "$cxx" "${common[@]}" --batch "$b1" --ckpt 1 --label cxx_b${b1}_ckpt
run cxx_b${b2} 150 "$cxx" "${common[@]}" --batch "$b2" --label cxx_b${b2}
run hf_eager_b${b1} 150 "${pyb[@]}" "${common[@]}" --batch "$b1" --label hf_eager_b${b1}
run hf_eager_foreach_b${b1} 150 "${pyb[@]}" "${common[@]}" --batch "$b1" --optimizer foreach \
  --label hf_eager_foreach_b${b1}
run hf_eager_b${b1}_ckpt 150 "${pyb[@]}" "${common[@]}" --batch "$b1" --ckpt 1 \
  --label hf_eager_b${b1}_ckpt
run hf_eager_b${b2} 150 "${pyb[@]}" "${common[@]}" --batch "$b2" --label hf_eager_b${b2}
run torch_eager_b${b1} 150 "${pyb[@]}" "${common[@]}" --impl torch --batch "$b1" \
  --label torch_eager_b${b1}
run hf_compile_b${b1} 300 "${pyb[@]}" "${common[@]}" --mode compile --batch "$b1" \
  --label hf_compile_b${b1}
if [[ ${COMPILE_BATCH2:-0} == 1 ]]; then
  run hf_compile_b${b2} 300 "${pyb[@]}" "${common[@]}" --mode compile --batch "$b2" \
    --label hf_compile_b${b2}
fi

"$py" - "$jsonl" "$out/pretrain_throughput.md" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ok = [r for r in rows if "error" not in r]
def ref(r):  # HF (or the module) eager, fused AdamW, same batch and checkpointing
    for q in ok:
        if (q["impl"].startswith("pytorch") and q["mode"] == "eager" and q["optimizer"] == "fused"
                and q["batch"] == r["batch"] and q["ckpt"] == r["ckpt"]
                and q["impl"] == ("pytorch-hf" if any(x["impl"] == "pytorch-hf" for x in ok)
                                  else "pytorch-torch")):
            return q
lines = ["| row | impl | mode | AdamW | ckpt | batch x seq | params | tokens/s | step ms | MFU | "
         "peak GiB | loss first -> last | vs PyTorch eager |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    if "error" in r:
        lines.append(f"| {r['label']} | failed: {r['error'][:120]} |" + " |" * 11)
        continue
    q = ref(r)
    mfu = f"{100 * r['mfu']:.1f} %" if r.get("mfu") is not None else "n/a"
    mem = f"{r['peak_mem_gib']:.1f}" if r.get("peak_mem_gib") is not None else "n/a"
    rel = f"{r['tokens_per_s'] / q['tokens_per_s']:.2f}x" if q else "n/a"
    lines.append(
        f"| {r['label']} | {r['impl']} | {r['mode']} | {r['optimizer']} | "
        f"{'on' if r['ckpt'] else 'off'} | {r['batch']} x {r['seq_len']} | "
        f"{r['params_total']:,} | {r['tokens_per_s']:,.0f} | {r['step_ms']:.1f} | {mfu} | "
        f"{mem} | {r['loss_first']:.3f} -> {r['loss_last']:.3f} | {rel} |")
dev = ok[0]["device"] if ok else "?"
flops = ok[0]["flops_per_token"] if ok else 0
head = (f"Device {dev}; model FLOPs/token {flops / 1e6:.1f}M "
        "(6*N_matmul + 6*L*T*d, causal attention halved); MFU against 989.4 TFLOP/s dense bf16.\n")
open(sys.argv[2], "w").write(head + "\n" + "\n".join(lines) + "\n")
print(head)
print("\n".join(lines))
EOF
echo "bench_pretrain.sh: $(($(date +%s) - start)) s wall; $jsonl" >&2
