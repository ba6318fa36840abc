#!/usr/bin/env bash
# Sets up (scripts/setup.sh), builds, makes the training data, and runs the quickstart job
# into runs/quickstart (configs/quickstart.yaml; configs/quickstart-cpu.yaml where no GPU is
# visible). Run it again to continue an interrupted run. Extra arguments go to `kernelrl train`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
cd "$root"
kr=./build/kernelrl
config=configs/quickstart.yaml
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "quickstart: no GPU visible; running the stages on the host backend (C++ kernels timed on" \
       "the CPU) with configs/quickstart-cpu.yaml. CUDA kernels need a GPU." >&2
  config=configs/quickstart-cpu.yaml
fi
start=$(date +%s)
mkdir -p runs/data
[[ -s runs/data/synth.jsonl ]] ||
  $kr data synth --families all --n 3000 --out runs/data/synth.jsonl
# The CPU job pretrains on the host family's triplets of synth.jsonl alone (its comments say why).
if [[ $config == configs/quickstart.yaml && ! -s runs/data/corpus.jsonl ]]; then
  cuda_include=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/include
  if [[ -d "$cuda_include" ]]; then
    $kr data build --from "$cuda_include" --out runs/data/corpus.jsonl
  else
    echo "quickstart: no CUDA toolkit headers to build a corpus from; pretraining on the kernel" \
         "families only" >&2
    cp runs/data/synth.jsonl runs/data/corpus.jsonl
  fi
fi
name=$(basename "$config" .yaml)
resume=()
[[ -f "runs/$name/config.yaml" ]] && resume=(--resume)
# The job's last lines say whether each RL stage learned (its correct rate and reward rising).
rc=0
$kr train "$config" --run-dir "runs/$name" "${resume[@]}" "$@" || rc=$?
echo "quickstart: $config into runs/$name, $(( $(date +%s) - start )) s (exit $rc); per-step" \
     "numbers: $kr report runs/$name" >&2
exit $rc
