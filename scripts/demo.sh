#!/usr/bin/env bash
# The workstation demo: sets up, builds, then trains on 4 MPI ranks of this machine.
# Extra arguments go to `arclight train` (e.g. --run.steps 50).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
cd "$root"
flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
exec mpirun "${flags[@]}" -np "${NP:-4}" build/arclight train --config configs/workstation.toml "$@"
