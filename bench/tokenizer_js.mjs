// The JavaScript side of scripts/bench.sh tokenizer: Hugging Face's tokenizers.js encoding the same hex lines as
// tokenizer_tool bench, ROUNDS times after one warm-up round. Usage: node tokenizer_js.mjs NPM_CACHE TOKENIZER_JSON
// HEX_LINES ROUNDS. Prints one JSON line like the C++ side's.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [cache, tokenizerPath, linesPath, roundsArg] = process.argv.slice(2);
const dir = path.join(cache, "node_modules", "@huggingface/tokenizers");
const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
const { Tokenizer } = await import(pathToFileURL(path.join(dir, pkg.module ?? pkg.main)).href);
const json = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
const config = JSON.parse(fs.readFileSync(path.join(path.dirname(tokenizerPath), "tokenizer_config.json"), "utf8"));
const tokenizer = new Tokenizer(json, config);
const lines = fs.readFileSync(linesPath, "utf8").split("\n").slice(0, -1).map((h) => Buffer.from(h, "hex").toString("utf8"));
const encodeAll = () => lines.reduce((n, s) => n + tokenizer.encode(s, { add_special_tokens: false }).ids.length, 0);
encodeAll();  // warm-up: the JIT compiler and the BPE cache
const rounds = Number(roundsArg);
let tokens = 0;
const start = process.hrtime.bigint();
for (let r = 0; r < rounds; ++r) tokens += encodeAll();
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
console.log(JSON.stringify({ tokens, seconds: Number(seconds.toFixed(4)), tokens_per_s: Math.round(tokens / seconds) }));
