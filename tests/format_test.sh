#!/usr/bin/env bash
# Every C++ file in the house style (.clang-format at the root). Skipped (77) without clang-format.
set -u
src=$2
command -v clang-format >/dev/null || { echo "SKIP: clang-format is not installed (scripts/setup.sh installs it)"; exit 77; }
cd "$src"
if [ -d .git ]; then files=$(git ls-files '*.cpp' '*.hpp' '*.h'); else files=$(find src include tests bench -name '*.[ch]pp'); fi
bad=$(for f in $files; do clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || echo "$f"; done)
[ -z "$bad" ] && { echo "$(echo "$files" | wc -w) files formatted"; exit 0; }
echo "not formatted (run: clang-format -i FILE):"; echo "$bad"; exit 1
