// Generated text for the tokenizer's reference test and benchmark: many scripts, code, emoji, whitespace runs,
// digits, special tokens, and (separately) invalid UTF-8. Deterministic for a seed.

export function makeRandom(seed) {
  let state = seed >>> 0;
  const next = () => {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n) => Math.floor(next() * n),
    chance: (p) => next() < p,
    pick(list) {
      return list[Math.floor(next() * list.length)];
    },
  };
}

const words = {
  english: "the quick brown fox jumps over lazy dog I'm you're we've they'll she'd it's DON'T Can't HELLO World".split(" "),
  accents: "café naïve résumé Über straße Ærøskøbing façade jalapeño cœur Ångström".split(" "),
  decomposed: ["cafe\u0301", "nai\u0308ve", "A\u030angstro\u0308m", "\u1100\u1161\u11a8", "e\u0301\u0301"],
  greek: "Καλημέρα κόσμε ελληνικά γλώσσα".split(" "),
  cyrillic: "Привет мир съешь же ещё этих мягких французских булок".split(" "),
  arabic: "مرحبا بالعالم اللغة العربية ١٢٣".split(" "),
  hebrew: "שלום עולם עברית".split(" "),
  devanagari: "नमस्ते दुनिया हिन्दी ९८७".split(" "),
  thai: "สวัสดีชาวโลก ภาษาไทย".split(" "),
  chinese: "你好世界 中文分词 机器学习 深度強化學習".split(" "),
  japanese: "こんにちは世界 カタカナ ひらがな 東京都".split(" "),
  korean: "안녕하세요 세계 한국어".split(" "),
  emoji: ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🔥🔥🔥", "🧑‍💻", "☃", "1️⃣"],
  code: [
    "def f(x):\n    return x * 2\n",
    "int main() { return 0; }",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "SELECT * FROM users WHERE id = 42;",
    "if x != None and y >= 3.14:",
    "std::vector<std::string> v{\"a\", \"b\"};",
    "https://example.com/path?q=1&r=2#frag",
    "  \\n\\t  ",
  ],
  special: ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<think>", "</think>",
            "<|im_start|>assistant\n", "<|im_", "|>", "<|fim_prefix|>", "<|vision_pad|>", "<|begin_of_text|>",
            "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\n", "<|reserved_special_token_3|>", "<s>", "</s>",
            "[INST]", "[/INST]", "[TOOL_CALLS]"],
  spaces: [" ", "  ", "    ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2003", "\u200b", "\u0085",
           "\f", "\v", "        \n", "\u180e", "\u180e's"],
  punctuation: [".", ",", "!", "?", "...", "—", "–", "«»", "“quoted”", "'", "'s", "''", "(", ")", "[", "]", "@#$%^&*",
                "、", "。", "！", "؟"],
};

function digits(random) {
  let s = "";
  for (let n = 1 + random.int(20); n > 0; --n) s += random.int(10);
  return s;
}

// A code point from anywhere in Unicode but the surrogates (JavaScript strings cannot carry them alone), none that
// Unicode assigned after version 14: a regex's \p{L}, \p{P}, \p{S} follow the tables of its engine, and Node's ICU
// (Unicode 17 here) and Debian's PCRE2 10.42 (Unicode 14) disagree on those alone (letters of CJK Extensions H to J,
// emoji such as U+1FA77 under DeepSeek's [\p{P}\p{S}]). So the ranges are blocks filled by Unicode 14 (Miscellaneous
// Symbols and Pictographs, Emoticons, Supplemental Symbols and Pictographs, Musical Symbols, Mathematical
// Alphanumeric Symbols, CJK Extension B), and from the supplementary planes at large only code points unassigned in
// Unicode 17 or private use, which they were in 14 too.
function randomCodePoint(random) {
  const ranges = [[0x20, 0x7e], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x6ff],
                  [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff], [0x2000, 0x206f], [0x3040, 0x30ff],
                  [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0xe000, 0xf8ff], [0xfe00, 0xfe0f], [0xff00, 0xffef],
                  [0x1f300, 0x1f64f], [0x1f900, 0x1f9ff], [0x1d100, 0x1d1ff], [0x1d400, 0x1d7ff],
                  [0x20000, 0x2a6df], [0x0, 0x1f], [0x10000, 0x10ffff]];
  const [lo, hi] = random.pick(ranges);
  for (;;) {
    const c = String.fromCodePoint(lo + random.int(hi - lo + 1));
    if (lo !== 0x10000 || /[\p{Cn}\p{Co}]/u.test(c)) return c;
  }
}

function fragment(random) {
  const kind = random.int(10);
  if (kind === 0) return digits(random);
  if (kind === 1) return randomCodePoint(random);
  if (kind === 2) return random.pick(words.spaces).repeat(1 + random.int(random.chance(0.1) ? 40 : 3));
  const group = random.pick(Object.keys(words));
  return random.pick(words[group]);
}

// `count` strings of 1 to 40 fragments, joined by nothing, a space or other whitespace.
export function generateStrings(random, count) {
  const out = [];
  for (let i = 0; i < count; ++i) {
    let s = "";
    for (let n = 1 + random.int(40); n > 0; --n) {
      s += fragment(random);
      if (random.chance(0.5)) s += random.chance(0.8) ? " " : random.pick(words.spaces);
    }
    out.push(s);
  }
  return out;
}

// Byte strings that are not UTF-8: valid text with stray continuation bytes, truncated sequences, overlong forms,
// surrogates, bytes 0xF5..0xFF.
export function generateInvalid(random, count) {
  const bad = [[0x80], [0xbf], [0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80],
               [0xff], [0xfe], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc3]];
  const out = [];
  for (let i = 0; i < count; ++i) {
    // Valid stretches in NFC with invalid bytes between them: the tokenizer normalises each valid stretch on its
    // own, so every byte must come back.
    const parts = random.chance(0.5) ? [Buffer.from(random.pick(bad))] : [];
    for (let n = 1 + random.int(10); n > 0; --n) {
      let valid = fragment(random);
      while (valid !== valid.normalize("NFC")) valid = fragment(random);
      parts.push(Buffer.from(valid, "utf8"), Buffer.from(random.pick(bad)));
    }
    out.push(Buffer.concat(parts));
  }
  return out;
}
