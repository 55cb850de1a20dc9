#!/usr/bin/env bash
# Sets up, builds and runs every test (unit tests and MPI tests) through ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
cd "$root/build"
# -j2: two fuzzers or single-process tests at a time; every other test runs alone (RUN_SERIAL, tests/CMakeLists.txt).
ctest --output-on-failure -j2 "$@"
