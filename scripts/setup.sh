#!/usr/bin/env bash
# Installs what KernelRL needs on a fresh Debian/Ubuntu machine, idempotently:
#   - Debian -dev packages (compiler, CMake, yaml-cpp, SentencePiece, GoogleTest, CLI11,
#     nlohmann-json, SQLite, PCRE2 and utf8proc for HF tokenizer.json) through apt-get (sudo
#     only when not root);
#   - a project virtual environment .venv with PyTorch 2.11 (whose wheel carries LibTorch)
#     and, with --test, the Python packages tests compare against (transformers, safetensors)
#     and matplotlib (bench/plot_family_grid.py, tested);
#   - configures and builds the project into build/ (Release; with --test what the tests need).
# A second run skips what is already there and only rebuilds what changed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
with_test=0
for a in "$@"; do
  case "$a" in
    --test) with_test=1 ;;
    *) echo "setup.sh: unknown option '$a' (known: --test)" >&2; exit 2 ;;
  esac
done

pkgs=(build-essential cmake ninja-build pkg-config python3 python3-venv python3-pip
      libyaml-cpp-dev libsentencepiece-dev libgtest-dev libgmock-dev libcli11-dev
      nlohmann-json3-dev libsqlite3-dev libpcre2-dev libutf8proc-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# The PyTorch wheel pinned to the GPU machine's version (2.11, built for CUDA 13.0).
# --no-compile: pip does not byte-compile every module it installs (torch's wheel alone took
# 17 CPU-s of a 45 s install on the 2-core host, 2026-11-27); Python compiles the few the
# tests import when they are first imported.
torch_version=2.11.0
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
have_torch=$(.venv/bin/python -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [[ "$have_torch" != "$torch_version" ]]; then
  echo "setup: installing torch==$torch_version into .venv (one-time, several GB)"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q --no-compile "torch==$torch_version" numpy
fi
# CUTLASS/CuTe C++ headers for candidates (the evaluator's reward.include_dirs: auto), pinned.
cutlass_version=4.2.0.0
have_cutlass=$( (.venv/bin/python -m pip show nvidia-cutlass 2>/dev/null || true) | sed -n 's/^Version: //p')
if [[ "$have_cutlass" != "$cutlass_version" ]]; then
  echo "setup: installing nvidia-cutlass==$cutlass_version (CUTLASS/CuTe headers for candidates)"
  .venv/bin/python -m pip install -q --no-compile --no-deps "nvidia-cutlass==$cutlass_version"
fi
if ((with_test)); then
  .venv/bin/python -c 'import transformers, safetensors, tensorboard, matplotlib' 2>/dev/null ||
    .venv/bin/python -m pip install -q --no-compile "transformers>=4.45" safetensors tensorboard matplotlib
fi

torch_prefix=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')
build_type=${KERNELRL_BUILD_TYPE:-Release}
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -DKERNELRL_PYTHON="$root/.venv/bin/python"
fi
# With --test only what the tests need (kernelrl_tests: everything but the benchmark programs,
# which no test runs); `cmake --build build` builds those too.
if ((with_test)); then
  cmake --build build -j"$(nproc)" --target kernelrl_tests
else
  cmake --build build -j"$(nproc)"
fi
