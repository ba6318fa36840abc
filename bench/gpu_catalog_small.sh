#!/usr/bin/env bash
# Issue 38's catalog line on the GPU machine: the catalog's small-shape winners (below 2^27,
# docs/data/catalog_h100_grid_issue24.json.xz, chosen on an H100) re-measured through
# `kernelrl eval` under the pre-issue-38 protocol (v3: KERNELRL_TIMING_DIAG=v3,fixed_sets
# KERNELRL_L2_FLUSH=memset) and this tree's (v4), interleaved per shape, REPS times each, device
# time, cold L2, against lt-auto-max. Does evaluator v4 take anything from a family kernel?
#   bash bench/gpu_catalog_small.sh BUILD OUT [N_SHAPES=10] [REPS=2]
# BUILD holds kernelrl, kernelrl_eval_worker and kernelrl_candidate_runner. Writes
# OUT/catalog_small.csv: shape, kernel, stored speedup (H100, before the PDL policy), and per
# protocol and repeat the speedup and the candidate's device time. EVAL_SET: extra
# `--set KEY=VALUE` words for every eval (e.g. "--set capture=shim").
set -uo pipefail
build=${1:?usage: gpu_catalog_small.sh BUILD OUT [N_SHAPES] [REPS]}
out=${2:?usage: gpu_catalog_small.sh BUILD OUT [N_SHAPES] [REPS]}
n_shapes=${3:-10}
reps=${4:-2}
mkdir -p "$out" /tmp/catsmall
python3 - "$n_shapes" <<'PY'
import json, lzma, math, sys
n = int(sys.argv[1])
d = json.load(lzma.open("docs/data/catalog_h100_grid_issue24.json.xz"))
small = sorted((e for e in d["entries"] if math.log2(e["m"] * e["n"] * e["k"]) < 27),
               key=lambda e: (e["m"] * e["n"] * e["k"], e["m"], e["n"]))
# Spread over the bin: every len/n-th entry, the smallest and the largest included.
pick = [small[round(i * (len(small) - 1) / max(1, n - 1))] for i in range(n)]
with open("/tmp/catsmall/list.txt", "w") as f:
    for e in pick:
        shape = f"{e['m']}x{e['n']}x{e['k']}"
        with open(f"/tmp/catsmall/{shape}.cu", "w") as k:
            k.write(d["kernels"][e["kernel"]])
        f.write(f"{shape} {e['layout']} {e['acc']} {e['kernel']} {e['speedup']:.4f}\n")
PY
echo "shape,layout,acc,kernel,stored_speedup,protocol,rep,status,speedup,device_us,reference_us" > "$out/catalog_small.csv"
while read -r shape layout acc kernel stored; do
  for rep in $(seq 1 "$reps"); do
    for proto in v3 v4; do
      if [[ $proto == v3 ]]; then envs="KERNELRL_TIMING_DIAG=v3,fixed_sets KERNELRL_L2_FLUSH=memset"; else envs=""; fi
      env $envs timeout 300 "$build/kernelrl" eval "/tmp/catsmall/$shape.cu" --shape "$shape" --layout "$layout" \
        --acc "$acc" --store /tmp/catsmall/store.sqlite --cache-dir /tmp/catsmall/cache ${EVAL_SET:-} \
        --json /tmp/catsmall/r.json > /tmp/catsmall/eval.log 2>&1
      python3 - "$shape,$layout,$acc,$kernel,$stored,$proto,$rep" >> "$out/catalog_small.csv" <<'PY'
import json, sys
try:
    r = json.load(open("/tmp/catsmall/r.json"))
except Exception as e:
    print(sys.argv[1] + ",no_result,,,"); sys.exit()
c = r.get("candidate") or {}
print(f"{sys.argv[1]},{r.get('status')},{r.get('speedup', 0):.4f},{c.get('median_us', 0)},{r.get('t_ref_us', 0)}")
PY
      rm -f /tmp/catsmall/r.json
    done
  done
  tail -n $((2 * reps)) "$out/catalog_small.csv"
done < /tmp/catsmall/list.txt
python3 - "$out/catalog_small.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    if r["status"] == "ok":
        by.setdefault((r["shape"], r["protocol"]), []).append(float(r["speedup"]))
print("shape, stored (H100), v3 median, v4 median, v4/v3")
for shape in dict.fromkeys(r["shape"] for r in rows):
    v3, v4 = by.get((shape, "v3")), by.get((shape, "v4"))
    st = next(r["stored_speedup"] for r in rows if r["shape"] == shape)
    if v3 and v4:
        a, b = statistics.median(v3), statistics.median(v4)
        print(f"{shape}, {st}, {a:.3f}, {b:.3f}, {b / a - 1:+.2%}")
    else:
        print(f"{shape}, {st}, {v3}, {v4}, missing")
PY
