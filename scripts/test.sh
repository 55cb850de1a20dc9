#!/usr/bin/env bash
# Sets up, builds and runs every test (unit tests and MPI tests) through ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
cd "$root/build"
ctest --output-on-failure "$@"
