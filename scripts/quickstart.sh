#!/usr/bin/env bash
# Sets up (scripts/setup.sh), builds, and runs the quickstart job (configs/quickstart.yaml)
# into runs/quickstart. Extra arguments go to `kernelrl train` (overrides, --resume, ...).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
cd "$root"
exec ./build/kernelrl train configs/quickstart.yaml "$@"
