#!/usr/bin/env bash
# Sets up (scripts/setup.sh --test), builds, and runs the test suite with CTest.
# Labels: unit, e2e, gpu (GPU tests skip cleanly without a device). Extra arguments go to
# ctest, e.g. `bash scripts/test.sh -L unit`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh" --test
cd "$root/build"
ctest --output-on-failure -j"$(nproc)" --timeout 900 "$@"
