#!/usr/bin/env bash
# Builds the policy's GPU test (test_model_gpu) and the generation benchmark (bench_generate)
# in an already-configured CMake/Ninja build dir, linking only the model stack (common, data,
# model). Used on the GPU machine so that a folder above model/ (reward, rollout, trainer)
# that does not compile or link at that moment does not block the model's measurements.
# Compile and link commands are CMake's own (ninja -t commands); only the three upper
# libraries are dropped from the link lines.
#   usage: bash bench/bench_generate_build.sh BUILD_DIR
# (The unit tests are one executable, test_unit, since issue 26: it links the whole stack, so
# it is not built here; `cmake --build BUILD_DIR --target test_unit` builds it.)
set -euo pipefail
B=$1
shift
if (($#)); then
  echo "bench_generate_build.sh: extra test names are no longer supported (unit tests are one" \
       "executable, test_unit; build it with --target test_unit)" >&2
  exit 2
fi
cd "$B"
ninja -k 0 common/libkernelrl_common.a data/libkernelrl_data.a model/libkernelrl_model.a
objs=(tests/CMakeFiles/test_model_gpu.dir/gpu/test_model_gpu.cpp.o
      bench/CMakeFiles/bench_generate.dir/bench_generate.cpp.o)
exes=(tests/test_model_gpu bench/bench_generate)
pids=()
for o in "${objs[@]}"; do
  (ninja -t commands "$o" | tail -1 | bash) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for e in "${exes[@]}"; do
  ninja -t commands "$e" | tail -1 |
    sed -e 's#[^ ]*libkernelrl_trainer\.a##g; s#[^ ]*libkernelrl_rollout\.a##g; s#[^ ]*libkernelrl_reward\.a##g' | bash
done
ls -la "${exes[@]}"
