#!/usr/bin/env bash
# Tokens per kernel-family variant under the quickstart's tokenizer (CPU only), from the
# repository root of a configured build:
#   bash bench/family_tokens.sh BUILD_DIR OUT_DIR
# Builds kernelrl and family_tokens, makes the quickstart's pretraining data (`kernelrl data
# build` from the CUDA toolkit headers, `kernelrl data synth --families all --n 3000`, as
# scripts/quickstart.sh), trains the 8192-piece tokenizer on it the way the pretrain stage does,
# and writes OUT_DIR/family_tokens.md (per family: variants, code tokens min / median / max).
set -euo pipefail
build=${1:-build}
out=${2:-/tmp/family-tokens}
mkdir -p "$out"
cmake --build "$build" --target kernelrl family_tokens > /dev/null
cuda_include=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/include
[[ -s "$out/corpus.jsonl" ]] || "$build/kernelrl" data build --from "$cuda_include" --out "$out/corpus.jsonl"
[[ -s "$out/synth.jsonl" ]] || "$build/kernelrl" data synth --families all --n 3000 --out "$out/synth.jsonl"
"$build/bench/family_tokens" --train-from "$out/corpus.jsonl,$out/synth.jsonl" \
  --tokenizer "$out/tokenizer.model" --vocab-size 8192 --out "$out/family_tokens.md"
