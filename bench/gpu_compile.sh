#!/usr/bin/env bash
# Compile throughput of the evaluator's compile pool on this host (issue 23): the families'
# CUTLASS and wgmma samples compiled into a cold cache by the pool before issue 23 and by this
# tree's, one after the other on the same host, then where one CUTLASS candidate's nvcc time goes.
#   bash bench/gpu_compile.sh SOURCES_DIR BASE_DIR OUT_DIR
# SOURCES_DIR  candidate sources: `kernelrl data synth --families hgemm_cutlass,hgemm_wgmma
#              --n 400 --out x.jsonl --emit-dir SOURCES_DIR` (116 CUTLASS, 180 wgmma variants)
# BASE_DIR     the pool to compare against: reward/compile.{h,cpp} and reward/subprocess.{h,cpp}
#              of the base commit (`git show main:reward/compile.cpp > BASE_DIR/reward/...`)
# CUTLASS headers: $KERNELRL_CUTLASS_INCLUDE, else .device/cutlass-include.tgz of the repo root
# (DEVICE_DIR), else the nvidia-cutlass wheel of .venv. COUNT_CUTLASS (32) and COUNT_WGMMA (32)
# sources, evenly spaced over each family's sorted variants; JOBS (0 = every CPU); PROCS=N
# compiles the CUTLASS samples by N processes at once instead (the ranks of one host).
# No GPU is used: a 16-core GPU machine's host is what the target names. About 4 minutes there.
set -uo pipefail
src=$(realpath "${1:?usage: gpu_compile.sh SOURCES_DIR BASE_DIR OUT_DIR}")
base=$(realpath "${2:?usage: gpu_compile.sh SOURCES_DIR BASE_DIR OUT_DIR}")
out=${3:?usage: gpu_compile.sh SOURCES_DIR BASE_DIR OUT_DIR}
mkdir -p "$out" && out=$(realpath "$out")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${WORK_DIR:-/tmp/h23-compile-bench}
jobs=${JOBS:-0}
mkdir -p "$work"
t_start=$(date +%s)

# ---- CUTLASS headers -------------------------------------------------------------------------
inc=${KERNELRL_CUTLASS_INCLUDE:-}
tgz=${DEVICE_DIR:-$root/.device}/cutlass-include.tgz
if [[ -z $inc && -f $tgz ]]; then
  [[ -d $work/cutlass/include/cute ]] || { mkdir -p "$work/cutlass" && tar -C "$work/cutlass" -xzf "$tgz"; }
  inc=$work/cutlass/include
fi
[[ -z $inc ]] && inc=$(ls -d "$root"/.venv/lib/python3*/site-packages/cutlass_library/source/include 2>/dev/null | head -1)
[[ -d $inc/cute ]] || { echo "gpu_compile.sh: no CUTLASS headers (set KERNELRL_CUTLASS_INCLUDE)" >&2; exit 2; }
cutlass_v=$(grep -hE "#define CUTLASS_(MAJOR|MINOR|PATCH) " "$inc/cutlass/version.h" | awk '{printf "%s%s", sep, $3; sep="."}')

# ---- two builds of bench_compile: the base pool and this tree's ------------------------------
# The contract's text, as reward/CMakeLists.txt embeds it (kernels/kernel_abi.h since issue 24).
abi_h=$root/kernels/kernel_abi.h
[[ -f $abi_h ]] || abi_h=$root/reward/kernel_abi.h
mkdir -p "$work/gen/reward"
{ printf '#pragma once\nstatic const char kKernelAbiText[] = R"KRLABI('; cat "$abi_h"; printf ')KRLABI";\n'; } \
  > "$work/gen/reward/kernel_abi_text.h"
build() {  # build NAME POOL_ROOT: the bench against POOL_ROOT's reward/compile.* and subprocess.*
  local name=$1 pool=$2 d=$work/src-$1
  rm -rf "$d" && mkdir -p "$d/reward" "$d/common"
  cp "$pool"/reward/compile.{h,cpp} "$pool"/reward/subprocess.{h,cpp} "$d/reward/"
  cp "$root"/common/{fs.h,fs.cpp,error.h} "$d/common/"
  g++ -std=c++17 -O2 -I"$d" -I"$work/gen" "$root/bench/bench_compile.cpp" "$d"/reward/compile.cpp \
    "$d"/reward/subprocess.cpp "$d"/common/fs.cpp -lpthread -o "$work/bench_compile_$name" ||
    { echo "gpu_compile.sh: building the $name bench failed" >&2; exit 1; }
}
build before "$base" & build after "$root" & wait
[[ -x $work/bench_compile_before && -x $work/bench_compile_after ]] || exit 1
echo "built: $(( $(date +%s) - t_start )) s"

cpus=$(nproc)
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
mem_gib=$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
nvcc_v=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
summary=$out/compile_summary.csv rows=$out/compile_rows.csv
rm -f "$summary" "$rows"

run() {  # run WHICH FAMILY COUNT [PROCS]
  local which=$1 fam=$2 n=$3 procs=${4:-1}
  "$work/bench_compile_$which" --sources "$src" --match "$fam" --count "$n" --jobs "$jobs" \
    --procs "$procs" --include "$inc" --arch sm_90a --cache "$work/cache-$which-$fam" \
    --label "$which:$fam$( (( procs > 1 )) && echo ":procs$procs")" --csv "$rows" --summary "$summary" | tail -1
  echo "  ($(( $(date +%s) - t_start )) s)"
}
# PROCS=N: only the CUTLASS samples, compiled by N processes at once (as N ranks of a job on this
# host, each pool with jobs = every CPU), before and after; nothing else.
if (( ${PROCS:-1} > 1 )); then
  run before hgemm_cutlass "${COUNT_CUTLASS:-32}" "$PROCS"
  run after hgemm_cutlass "${COUNT_CUTLASS:-32}" "$PROCS"
  free -g | head -2
  cat "$summary"
  exit 0
fi
# Before and after alternate per family; the cache of one run is never the next one's.
run before hgemm_cutlass "${COUNT_CUTLASS:-32}"
run after hgemm_cutlass "${COUNT_CUTLASS:-32}"
run before hgemm_wgmma "${COUNT_WGMMA:-32}"
run after hgemm_wgmma "${COUNT_WGMMA:-32}"

# ---- one CUTLASS candidate, alone on the host: nvcc's phases (--time) ------------------------
one=$(ls "$src" | grep hgemm_cutlass | sort | head -1)
abi=$work/abi && mkdir -p "$abi" && cp "$abi_h" "$abi/kernel_abi.h"
{ echo '#include "kernel_abi.h"'; echo '#line 1 "candidate"'; cat "$src/$one"; } > "$work/one.cu"
sed '/^\/\/ ---- instance/,$d' "$work/one.cu" > "$work/headers_only.cu"  # the includes + body, no instance
flags=(-O3 -DNDEBUG -std=c++17 -shared -Xcompiler -fPIC -lineinfo -cudart shared
       --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -I "$abi" -I "$inc")
phases() {  # phases NAME FILE: nvcc --time of FILE, its CPU seconds from /usr/bin/time or bash
  rm -f "$work/$1.time.csv"
  local s=$(date +%s.%N)
  ( TIMEFORMAT="%U %S"; time nvcc "${flags[@]}" -o "$work/$1.so" "$2" --time "$work/$1.time.csv" ) 2> "$work/$1.cpu" >/dev/null
  local e=$(date +%s.%N)
  cp "$work/$1.time.csv" "$out/phases_$1.csv"
  echo "$1: wall $(awk -v s="$s" -v e="$e" 'BEGIN {printf "%.1f", e - s}') s, cpu (user sys) $(tail -1 "$work/$1.cpu")"
}
phases one "$work/one.cu" | tee "$out/phases.txt"
phases headers_only "$work/headers_only.cu" | tee -a "$out/phases.txt"

python3 - "$summary" "$out" "$one" "$cpus" "$cpu_model" "$mem_gib" "$gpu" "$nvcc_v" "$cutlass_v" <<'PY' | tee "$out/compile.md"
import csv, datetime, os, sys
summary, out, one, cpus, model, mem, gpu, nvcc, cutlass = sys.argv[1:]
rows = {r["label"]: r for r in csv.DictReader(open(summary))}
print(f"Compile throughput, `bash bench/gpu_compile.sh SOURCES BASE OUT`, {datetime.date.today()}, "
      f"host of the GPU machine ({gpu}): {cpus} CPUs ({model}), {mem} GiB; nvcc {nvcc}, "
      f"CUTLASS {cutlass}; cold cache, one pool, jobs = every CPU.\n")
print("| sources | pool | candidates | compiled ok | wall s | candidates / min | compiler CPU s per compile | after / before |")
print("|---|---|---|---|---|---|---|---|")
for fam in ("hgemm_cutlass", "hgemm_wgmma"):
    b, a = rows.get(f"before:{fam}"), rows.get(f"after:{fam}")
    for name, r in (("before", b), ("after", a)):
        if not r: continue
        ratio = f"{float(a['candidates_per_min']) / float(b['candidates_per_min']):.2f}x" if (a and b and name == "after") else ""
        print(f"| {fam} | {name} | {r['sources']} | {r['ok']} | {r['wall_s']} | {r['candidates_per_min']} | {r['cpu_s_per_compile']} | {ratio} |")
print()
def phases(path):
    out = []
    for line in list(csv.reader(open(path)))[1:]:
        if len(line) > 6 and line[6].strip():
            out.append((line[1].strip(), float(line[6])))
    return out
for name in ("one", "headers_only"):
    p = os.path.join(out, f"phases_{name}.csv")
    if not os.path.exists(p): continue
    ph = phases(p)
    tot = sum(ms for _, ms in ph if "nvcc (driver)" not in _)
    big = ", ".join(f"{n} {ms / 1000:.1f} s" for n, ms in ph if ms > 50)
    label = f"`{one}`" if name == "one" else "the same file without its instance block (headers and body only)"
    print(f"- nvcc phases, {label}, alone on the host: {big} (sum {tot / 1000:.1f} s).")
PY
echo "total: $(( $(date +%s) - t_start )) s"
