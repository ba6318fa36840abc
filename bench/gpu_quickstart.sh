#!/usr/bin/env bash
# On a GPU host with the project built in $1 (default build-gpu): makes the quickstart data and
# runs configs/quickstart.yaml into runs/quickstart-gpu, timing each phase; copies the metrics,
# a report and the log to $2 (default $OUT). Used for the numbers in docs/benchmarks.md.
set -uo pipefail
build=${1:-build-gpu}
out=${2:-${OUT:-/tmp}}
shift $(( $# < 2 ? $# : 2 ))
kr=$build/kernelrl
mkdir -p runs/data "$out"
t0=$(date +%s)
[[ -s runs/data/synth.jsonl ]] || $kr data synth --families all --n 3000 --out runs/data/synth.jsonl
[[ -s runs/data/corpus.jsonl ]] || $kr data build --from /usr/local/cuda/include --out runs/data/corpus.jsonl
t1=$(date +%s)
echo "data: $((t1 - t0)) s"
rm -rf runs/quickstart-gpu
timeout ${QUICKSTART_TIMEOUT:-480} $kr train configs/quickstart.yaml --run-dir runs/quickstart-gpu "$@" 2>&1 |
  grep -v "^  \|trainer_interface\|unigram\|bpe_model\|^}\|^trainer_spec\|^normalizer\|^denormalizer\|sentencepiece_trainer" |
  tee "$out/quickstart.log"
rc=${PIPESTATUS[0]}
t2=$(date +%s)
echo "train: $((t2 - t1)) s (exit $rc)"
cp runs/quickstart-gpu/metrics.jsonl "$out/quickstart_metrics.jsonl" 2>/dev/null
$kr report runs/quickstart-gpu > "$out/quickstart_report.txt" 2>&1
$kr sample --run-dir runs/quickstart-gpu --task hgemm --shape 256x256x256 -n 8 \
  --out runs/quickstart-gpu/samples --evaluate > "$out/quickstart_samples.txt" 2>&1
tar czf "$out/quickstart_samples.tgz" -C runs/quickstart-gpu samples 2>/dev/null
# Best policy-sampled kernel per shape / task (and whether it is a copy of a family variant),
# and the hgemm_rl reward curve.
[[ -s runs/data/hgemm_families.jsonl ]] ||
  $kr data synth --families hgemm_tiled,hgemm_wmma,hgemm_mma,hgemm_wgmma,hgemm_cutlass,hgemm_small --n 6000 --out runs/data/hgemm_families.jsonl
python3 bench/quickstart_best.py runs/quickstart-gpu runs/data/hgemm_families.jsonl --scope hgemm_rl \
  > "$out/quickstart_best_hgemm.md" 2>&1
python3 bench/quickstart_best.py runs/quickstart-gpu runs/data/synth.jsonl --scope general_rl \
  > "$out/quickstart_best_general.md" 2>&1
sqlite3 runs/quickstart-gpu/results.sqlite "select task, status, count(*) from candidates group by task, status" \
  > "$out/quickstart_status.txt" 2>/dev/null || true
exit $rc
