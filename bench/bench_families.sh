#!/usr/bin/env bash
# GPU check and timing of the kernel families (issue 5), standalone (nvcc, cuBLASLt, PyTorch).
#   kernelrl data synth --families hgemm_tiled,hgemm_wmma,hgemm_mma,elementwise,reduction,softmax,norm,transpose,gather_scatter,matmul \
#       --n 4000 --out /tmp/s.jsonl --emit-dir EMIT_DIR          # here, then on the GPU machine:
#   bash bench/bench_families.sh EMIT_DIR OUT_DIR [M N K]
# Compiles every CUDA variant to a shared library, runs bench_families.cu over the HGEMM variants
# (correctness on partial-tile shapes, timing against cuBLASLt autotuned) for each layout and
# accumulator, then check_general_families.py over the general variants.
set -uo pipefail
SRC=$1
OUT=$2
M=${3:-4096}; N=${4:-4096}; K=${5:-4096}
ARCH=${ARCH:-sm_90a}
SO=$(mktemp -d)
mkdir -p "$OUT"
echo "compiling $(ls "$SRC"/*.cu | wc -l) CUDA variants for $ARCH with $(nproc) jobs"
start=$(date +%s)
ls "$SRC"/*.cu | xargs -P "$(nproc)" -I{} bash -c \
  'n=$(basename {} .cu); nvcc -std=c++17 -O3 -arch='"$ARCH"' -Ikernels -Xcompiler -fPIC -shared -o '"$SO"'/$n.so {} > '"$SO"'/$n.log 2>&1 || { echo "COMPILE_FAIL $n"; head -5 '"$SO"'/$n.log; }' \
  | tee "$OUT/compile.txt"
echo "compiled in $(( $(date +%s) - start )) s; failures: $(grep -c COMPILE_FAIL "$OUT/compile.txt")"
nvcc -std=c++17 -O3 -arch="$ARCH" -I. bench/bench_families.cu -o "$SO/bench_families" -lcublasLt -ldl || exit 1
for layout in nn tn; do
  for acc in f32 f16; do
    libs=$(ls "$SO"/hgemm_*_"${layout}"_acc"${acc}"_*.so 2>/dev/null)
    [ -n "$libs" ] || continue
    "$SO/bench_families" "$M" "$N" "$K" "$layout" "$acc" $libs | tee "$OUT/hgemm_${layout}_${acc}.txt"
  done
done
for f in "$OUT"/hgemm_*.txt; do
  echo "== $f: $(grep -c ' ok ' "$f") ok, $(grep -c 'FAIL' "$f") FAIL lines; best 5 by TFLOP/s:"
  grep ' ok ' "$f" | sort -k5 -g -r | head -5
done
python3 bench/check_general_families.py "$SRC/manifest.jsonl" "$SO" | tee "$OUT/general.txt"
