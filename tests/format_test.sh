#!/usr/bin/env bash
# Every C++ file in the house style (.clang-format at the root). Skipped (77) without clang-format.
set -u
src=$2
command -v clang-format >/dev/null || { echo "SKIP: clang-format is not installed (scripts/setup.sh installs it)"; exit 77; }
cd "$src"
if [ -d .git ]; then files=$(git ls-files '*.cpp' '*.hpp' '*.h'); else files=$(find src include tests bench -name '*.[ch]pp'); fi
# One clang-format for all of them (one a file took 30 s, most of it starting them); it names each file it would change.
out=$(clang-format --dry-run -Werror $files 2>&1 >/dev/null) && { echo "$(echo "$files" | wc -w) files formatted"; exit 0; }
bad=$(echo "$out" | grep -o '^[^ :]*:[0-9]*:[0-9]*: error' | cut -d: -f1 | sort -u)
echo "not formatted (run: clang-format -i FILE):"; echo "${bad:-$out}"; exit 1
