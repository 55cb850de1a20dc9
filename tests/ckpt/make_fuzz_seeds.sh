#!/usr/bin/env bash
# The checkpoint fuzzer's seeds, from a real run: configs/tiny.toml for 4 steps on 3 ranks, a
# version every step, every second one incremental. OUT/dir gets its checkpoint directory (the
# versions the fuzzer edits, and reads in), OUT/seeds one input a version: that version as it is
# (its index, then no edits; see checkpoint_fuzz.cpp).
# Usage: make_fuzz_seeds.sh BUILD/arclight SOURCE_DIR OUT
set -eu
bin=$(realpath "$1"); src=$2; out=$3
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$src"
timeout 120 "$mpirun" --oversubscribe --allow-run-as-root -np 3 "$bin" train --config configs/tiny.toml \
  --run.dir "$work/run" --run.steps 4 --checkpoint.every_steps 1 --checkpoint.full_every 2 >"$work/out" 2>&1 ||
  { tail -20 "$work/out"; exit 1; }
rm -rf "$out/dir" "$out/seeds"
mkdir -p "$out/seeds"
cp -r "$work/run/checkpoints" "$out/dir"
rm -f "$out/dir/.arclight.lock"
n=$(ls "$out"/dir/v*.h5 | wc -l)
for i in $(seq 0 $((n - 1))); do printf "\\x$(printf %02x "$i")\\x00" >"$out/seeds/version$i"; done
echo "$n seeds in $out/seeds, the run's versions in $out/dir"
