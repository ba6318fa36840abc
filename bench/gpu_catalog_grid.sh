#!/usr/bin/env bash
# The grid catalog of session 5 (docs/data/catalog_h100_grid.json.xz: the full grid's H100 stores)
# exported and run on the GPU, from the repository root of a configured build:
#   bash bench/gpu_catalog_grid.sh BUILD OUT
# 1. `kernelrl catalog export --only-winners --arch sm_90a`: the shapes where a catalog kernel
#    beat lt-auto in the catalog dispatch to it, every other shape to the library's autotuned
#    cuBLASLt; the package built with the PyTorch operator (16 jobs);
# 2. bench/bench_catalog_torch.py on those winner shapes: the dispatched kernel vs the library's
#    own cuBLASLt vs torch.matmul, device time (CUDA-graph replays), every output checked.
# OUT gets winners.txt, the logs' tails, catalog_torch.{csv,md}.
set -uo pipefail
build=$1
out=$2
mkdir -p "$out"
work=/tmp/catgrid
rm -rf "$work" && mkdir -p "$work"
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*"; }
cmake --build "$build" --target kernelrl > /tmp/catgrid_build.log 2>&1 || { tail -20 /tmp/catgrid_build.log; exit 1; }
stamp "kernelrl built"
xz -dkc docs/data/catalog_h100_grid.json.xz > "$work/catalog.json"
python3 - "$work/catalog.json" "$out/winners.txt" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
w = sorted((e for e in c["entries"] if e["speedup"] > 1), key=lambda e: e["m"] * e["n"] * e["k"])
with open(sys.argv[2], "w") as f:
    for e in w:
        f.write(f'{e["m"]}x{e["n"]}x{e["k"]} {e["layout"]}  # catalog: {e["speedup"]:.3f}x over lt-auto, {e["device_us"]:.2f} us\n')
print(f"{len(w)} winner shapes of {len(c['entries'])}")
PY
"$build/kernelrl" catalog export "$work/catalog.json" --out "$work/pkg" --arch sm_90a --only-winners \
  ${KERNELRL_CUTLASS_INCLUDE:+--cutlass-include "$KERNELRL_CUTLASS_INCLUDE"} 2>&1 | tail -3
cmake -S "$work/pkg" -B "$work/pkg-build" -DCMAKE_BUILD_TYPE=Release -DKERNELRL_CATALOG_TORCH=ON \
  > /tmp/catgrid_pkg.log 2>&1 && cmake --build "$work/pkg-build" -j 16 >> /tmp/catgrid_pkg.log 2>&1
rc=$?
stamp "package build: exit $rc"
((rc == 0)) || { tail -30 /tmp/catgrid_pkg.log; exit 1; }
python3 bench/bench_catalog_torch.py --lib "$work/pkg-build/libkernelrl_catalog_torch.so" \
  --grid "$out/winners.txt" --out "$out" --rounds 9 --budget-s 0.5 2>&1 | tee "$out/bench_catalog_torch.log" | tail -95
stamp "bench: exit ${PIPESTATUS[0]}"
