#!/usr/bin/env bash
# Characters and tokens per kernel-family variant under the quickstart's tokenizer (CPU only),
# now and at a baseline commit, from the repository root of a configured build:
#   bash bench/family_tokens.sh BUILD_DIR OUT_DIR [BASELINE_COMMIT]
# Builds kernelrl and family_tokens, makes the quickstart's pretraining data (`kernelrl data
# build` from the CUDA toolkit headers, `kernelrl data synth --families all --n 3000`, as
# scripts/quickstart.sh) and trains the 8192-piece tokenizer on it the way the pretrain stage
# does. With BASELINE_COMMIT (b6fdebf: the last commit whose generators wrote each variant's own
# code as text templates) it builds that commit's kernelrl in a scratch worktree in BUILD_DIR
# (ccache makes this quick) and writes all its variants (`data synth --families all --n 7000`: 500 rounds of
# the round robin, more than any family has variants). Writes OUT_DIR/family_tokens.md (per
# family: variants, code chars and tokens before / after, how many fit the quickstart's
# completion and prompt budgets) and OUT_DIR/family_tokens.csv (one row per variant).
set -euo pipefail
build=${1:-build}
out=${2:-/tmp/family-tokens}
baseline=${3:-}
mkdir -p "$out"
cmake --build "$build" --target kernelrl family_tokens > /dev/null
cuda_include=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/include
[[ -s "$out/corpus.jsonl" ]] || "$build/kernelrl" data build --from "$cuda_include" --out "$out/corpus.jsonl"
"$build/kernelrl" data synth --families all --n 3000 --out "$out/synth.jsonl"
args=()
if [[ -n "$baseline" ]]; then
  if [[ ! -s "$out/baseline-$baseline.jsonl" ]]; then
    # In the build folder: under CCACHE_BASEDIR like the tree (a checkout elsewhere, e.g. /tmp,
    # misses the cache and rebuilds everything: ~30 min on 2 cores).
    src="$(cd "$build" && pwd)/family-tokens-baseline-src"
    git worktree remove --force "$src" 2> /dev/null || true
    git worktree add --detach "$src" "$baseline" > /dev/null
    cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$(grep -E '^CMAKE_PREFIX_PATH' "$build/CMakeCache.txt" | cut -d= -f2-)" \
      -DKERNELRL_PYTHON="$(grep -E '^KERNELRL_PYTHON' "$build/CMakeCache.txt" | cut -d= -f2-)" \
      -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON > /dev/null
    cmake --build "$src/build" --target kernelrl > /dev/null
    "$src/build/kernelrl" data synth --families all --n 7000 --out "$out/baseline-$baseline.jsonl"
    git worktree remove --force "$src"
  fi
  args=(--baseline "$out/baseline-$baseline.jsonl")
fi
"$build/bench/family_tokens" --train-from "$out/corpus.jsonl,$out/synth.jsonl" \
  --tokenizer "$out/tokenizer.model" --vocab-size 8192 "${args[@]}" \
  --out "$out/family_tokens.md" --csv "$out/family_tokens.csv"
