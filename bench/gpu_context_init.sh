#!/usr/bin/env bash
# CUDA context creation in a fresh process (issue 23: a data-parallel rank's evaluator starts one
# candidate runner per candidate): every GPU visible against its own GPU alone, one process at a
# time against one per GPU at once. Each configuration ROUNDS (10) times; medians of the
# in-process time (bench/bench_context_init.cu) and of the process's wall time (exec to exit).
#   bash bench/gpu_context_init.sh OUT_DIR       (writes OUT_DIR/context_init.md)
set -euo pipefail
out=${1:?usage: gpu_context_init.sh OUT_DIR}
rounds=${ROUNDS:-10}
mkdir -p "$out"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=/tmp/bench_context_init
nvcc -O2 -o $bin "$here/bench_context_init.cu"
ngpu=$(nvidia-smi -L | wc -l)
mapfile -t uuids < <(nvidia-smi --query-gpu=uuid --format=csv,noheader)
raw=$out/context_init.csv
echo "visible,concurrent,device,init_ms,wall_ms" > $raw
one() {  # visible concurrent device -> a csv row
  local vis=$1 conc=$2 d=$3 t0 t1 line
  t0=$(date +%s%N)
  if [[ $vis == own ]]; then line=$(CUDA_VISIBLE_DEVICES=${uuids[$d]} $bin 0)
  else line=$(CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((ngpu - 1))) $bin $d); fi
  t1=$(date +%s%N)
  echo "$vis,$conc,$d,$(awk '{print $2}' <<< "$line"),$(( (t1 - t0) / 1000000 ))"
}
for r in $(seq $rounds); do
  for vis in all own; do
    one $vis 1 0 >> $raw
    for d in $(seq 0 $((ngpu - 1))); do one $vis $ngpu $d > /tmp/ctx_$d.row & done
    wait
    cat /tmp/ctx_*.row >> $raw && rm -f /tmp/ctx_*.row
  done
done
# The device memory one context takes (what a spare runner holds): one process on its own GPU,
# held 3 s, read by nvidia-smi.
( CUDA_VISIBLE_DEVICES=${uuids[0]} $bin 0 3 > /dev/null & pid=$!; sleep 2
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
    awk -F', *' -v p=$pid '$1 == p {print $2}' > $out/context_mib.txt || true; wait $pid ) || true
python3 - "$raw" "$out/context_init.md" "$ngpu" "$out/context_mib.txt" <<'PY'
import csv, os, statistics, sys, subprocess
rows = list(csv.DictReader(open(sys.argv[1])))
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().splitlines()
with open(sys.argv[2], "w") as f:
    f.write(f"`bash bench/gpu_context_init.sh OUT` on {len(gpu)} x {gpu[0]}; wall time of a fresh "
            f"process's cudaSetDevice + cudaFree(0) + stream (init) and of the process (exec to exit), "
            f"medians over every round and device.\n\n")
    f.write("| GPUs visible to the process | processes at once | init ms | process ms | samples |\n|---|---|---|---|---|\n")
    for vis in ("all", "own"):
        for conc in ("1", sys.argv[3]):
            sel = [r for r in rows if r["visible"] == vis and r["concurrent"] == conc]
            if not sel: continue
            f.write(f"| {'all ' + sys.argv[3] if vis == 'all' else 'its own (uuid)'} | {conc} | "
                    f"{statistics.median(float(r['init_ms']) for r in sel):.0f} | "
                    f"{statistics.median(float(r['wall_ms']) for r in sel):.0f} | {len(sel)} |\n")
    mib = open(sys.argv[4]).read().strip() if os.path.exists(sys.argv[4]) else ""
    f.write(f"\nDevice memory of one context (nvidia-smi, the process on its own GPU): "
            f"{mib + ' MiB' if mib else 'not read'}.\n")
print(open(sys.argv[2]).read())
PY
