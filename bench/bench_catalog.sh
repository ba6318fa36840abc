#!/usr/bin/env bash
# The kernel catalog on the GPU (issue 11), from the repository root of a configured build:
#   bash bench/bench_catalog.sh BUILD_DIR OUT_DIR
# 1. builds kernelrl, the worker and test_catalog_gpu; runs the GPU test (a catalog from a
#    kernel directory, exported, built with CMake, its hgemm checked on catalog and unseen shapes);
# 2. `kernelrl catalog build` from three double-buffered mma.sync variants (128x128 tiles;
#    64x128 with split-K 2; 128x64 with split-K 4) on 8 of the M = 128 shapes of
#    configs/grids/llm.txt (decode-size projections; CATALOG_SHAPES=all for the 15; the M = 4096
#    half is left to cuBLASLt: mma.sync reaches ~57 % of it at 4096^3), `catalog show`,
#    `catalog export`, the package built with the PyTorch operator;
# 3. bench/bench_catalog_torch.py: torch.ops.kernelrl.hgemm vs torch.matmul on all 30 llm shapes.
# Everything lands in OUT_DIR (logs, catalog.json, show.txt, catalog_torch.{csv,md}).
set -uo pipefail
build=${1:-build-gpu}
out=${2:-${OUT:-/tmp/catalog-bench}}
mkdir -p "$out"
work=$(mktemp -d)
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }

cmake --build "$build" --target kernelrl kernelrl_eval_worker test_catalog_gpu 2>&1 | tail -1
stamp "build done"
timeout 150 "$build/tests/test_catalog_gpu" > "$out/test_catalog_gpu.log" 2>&1
stamp "test_catalog_gpu: exit $? ($(grep -c '^\[       OK' "$out/test_catalog_gpu.log") ok)"
tail -3 "$out/test_catalog_gpu.log"

# Kernel directory: three mma.sync variants (nn, fp32 accumulation, double-buffered main loop).
"$build/kernelrl" data synth --families hgemm_mma --n 600 --out "$work/mma.jsonl" > /dev/null
mkdir -p "$work/k"
python3 - "$work/mma.jsonl" "$work/k" <<'EOF'
import json, sys
want = ["hgemm_mma_nn_accf32_bm128_bn128_bk32_wm64_wn64_stages4_splitk1_group8_vec8_epi1_minb1_dbuf1",
        "hgemm_mma_nn_accf32_bm64_bn128_bk32_wm32_wn64_stages4_splitk2_group8_vec8_epi0_minb1_dbuf1",
        "hgemm_mma_nn_accf32_bm128_bn64_bk32_wm64_wn32_stages4_splitk4_group8_vec8_epi0_minb1_dbuf1"]
found = {}
for line in open(sys.argv[1]):
    t = json.loads(line)
    name = t["id"].removeprefix("family:")
    if name in want and name not in found:
        found[name] = t["code"]
for name, code in found.items():
    open(f"{sys.argv[2]}/{name}.cu", "w").write(code)
print(f"kernel dir: {len(found)} of {len(want)} variants")
EOF
# M = 128 rows of llm.txt, one per (N, K) pair of Llama-2-7B, Llama-3-70B and Qwen2.5-7B's
# larger projections (CATALOG_SHAPES=all takes all 15).
if [[ ${CATALOG_SHAPES:-some} == all ]]; then
  grep '^128x' configs/grids/llm.txt > "$work/llm_m128.txt"
else
  grep -E '^128x(12288x4096|4096x4096|22016x4096|4096x11008|57344x8192|8192x28672|37888x3584|3584x18944) ' \
    configs/grids/llm.txt > "$work/llm_m128.txt"
fi
timeout 200 "$build/kernelrl" catalog build --kernels "$work/k" --grid "$work/llm_m128.txt" \
  --out "$out/catalog.json" --reference lt-auto --baselines lt-auto --backend gpu \
  --cache-dir "$work/cache" > "$out/catalog_build.log" 2>&1
stamp "catalog build: exit $?"
tail -2 "$out/catalog_build.log"
"$build/kernelrl" catalog show "$out/catalog.json" | tee "$out/show.txt"
"$build/kernelrl" catalog export "$out/catalog.json" --out "$work/pkg" | tee "$out/export.log"
cmake -S "$work/pkg" -B "$work/pkg-build" -DKERNELRL_CATALOG_TORCH=ON > "$out/pkg_cmake.log" 2>&1 &&
  cmake --build "$work/pkg-build" -j 16 >> "$out/pkg_cmake.log" 2>&1
stamp "package build: exit $?"
timeout 150 python3 bench/bench_catalog_torch.py --lib "$work/pkg-build/libkernelrl_catalog_torch.so" \
  --grid configs/grids/llm.txt --out "$out" --rounds 7 --budget-s 1.0 2>&1 | tee "$out/bench_catalog_torch.log"
stamp "bench: exit ${PIPESTATUS[0]}"
rm -rf "$work"
