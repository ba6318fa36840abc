#!/usr/bin/env bash
# Prepares .device/ (git-ignored) for a build on the lent GPU machine, from the project root on
# this CPU machine: the shared recipe (/work/shared/device/prepare.sh: the Debian -dev packages the
# GPU machine lacks, as .debs, and env.sh) plus the ones KernelRL adds (PCRE2 and utf8proc for the
# HF tokenizer), and the pinned CUTLASS headers from the venv's nvidia-cutlass wheel. Then call
# the device tool with carry [".device"] and start the command with
#   rm -f /tmp/deps/.done; source .device/env.sh && ...
# (removing the marker makes a warm machine unpack debs added since its last call).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
recipe=${KERNELRL_DEVICE_RECIPE:-/work/shared/device/prepare.sh}
[[ -f "$recipe" ]] || { echo "device_prepare: no shared recipe at $recipe" >&2; exit 2; }
bash "$recipe" libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 \
  libutf8proc-dev libutf8proc2 "$@"
inc=$(.venv/bin/python -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))')
[[ -d "$inc/cute" ]] || { echo "device_prepare: no CUTLASS headers at $inc (run scripts/setup.sh)" >&2; exit 2; }
tar -C "$inc/.." -czf .device/cutlass-include.tgz include
echo "device_prepare: .device/ ready ($(du -sh .device | cut -f1))"
