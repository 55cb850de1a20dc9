// The byte-level BPE on a tiny tokenizer.json written here: merges by rank (in both formats), added tokens matched
// before anything else, the pre-tokenizer's pieces, NFC, ignore_merges, byte round trips; then malformed files, each
// refused with a TokenizerFileError naming the key. And the byte tokenizer.
#include "arclight/text/tokenizer.hpp"
#include "../../src/text/regex.hpp"
#include "../temp_dir.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

using namespace arclight;
using namespace arclight::text;
using json = nlohmann::json;

namespace {

// GPT-2's byte-to-character map, written out again here rather than taken from the code under test.
std::string byte_char(int b) {
  int cp = b, next = 256;
  for (int i = 0; i < 256; ++i) {
    const bool printable = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174;
    if (!printable && i == b) cp = next;
    if (!printable) ++next;
  }
  std::string out;
  if (cp < 0x80) return out += static_cast<char>(cp), out;
  out += static_cast<char>(0xC0 | (cp >> 6));
  out += static_cast<char>(0x80 | (cp & 0x3F));
  return out;
}

// Bytes as ids 0..255, then merges a b, b c, h e, l l, he ll, hell o, Ġ hello (ranks in that order unless given).
json tiny_tokenizer(std::vector<std::pair<std::string, std::string>> merges = {}) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  if (merges.empty())
    merges = {{"a", "b"}, {"b", "c"}, {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "hello"}};
  json list = json::array();
  int id = 256;
  for (const auto& [left, right] : merges) {
    if (!vocab.contains(left + right)) vocab[left + right] = id++;
    list.push_back(left + " " + right);
  }
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 300}, {"content", "<|end|>"}, {"special", true}},
            {{"id", 301}, {"content", "<x>"}, {"special", false}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", list}}}};
}

std::unique_ptr<Tokenizer> load(const json& j) { return parse_tokenizer_json(j.dump(), "tiny.json"); }

json unicode_text(const char* escaped) { return json::parse(std::string("\"") + escaped + "\""); }

// Llama 2's layout: <unk> <s> </s>, the 256 <0xAB> tokens, then the given tokens (JSON-escaped) and merges; spaces
// as U+2581 by the normalizer (Prepend, Replace), a decoder that turns U+2581 back and strips the first space.
json sentencepiece_tokenizer(const std::vector<const char*>& tokens, const std::vector<const char*>& merges) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  for (const char* t : tokens) vocab[unicode_text(t).get<std::string>()] = static_cast<int>(vocab.size());
  json merge_list = json::array();
  for (const char* merge : merges) merge_list.push_back(unicode_text(merge));
  return {{"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}}}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "\u2581"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
          {"pre_tokenizer", nullptr},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"},
            {"byte_fallback", true},
            {"unk_token", "<unk>"},
            {"fuse_unk", true},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}
TokenId id_of(const Tokenizer& t, const std::string& token) { return t.token_id(token).value(); }

}  // namespace

BOOST_AUTO_TEST_SUITE(byte_level_bpe)

BOOST_AUTO_TEST_CASE(merges_apply_by_rank) {
  const auto t = load(tiny_tokenizer());
  BOOST_TEST(t->encode("abc") == (std::vector<TokenId>{id_of(*t, "ab"), 'c'}));
  const auto reversed = load(tiny_tokenizer({{"b", "c"}, {"a", "b"}}));
  BOOST_TEST(reversed->encode("abc") == (std::vector<TokenId>{'a', id_of(*reversed, "bc")}));
  // A merge listed twice takes its later rank, as Hugging Face's tokenizers (and tokenizers.js) collect them.
  const auto twice = load(tiny_tokenizer({{"b", "c"}, {"a", "b"}, {"b", "c"}}));
  BOOST_TEST(twice->encode("abc") == (std::vector<TokenId>{id_of(*twice, "ab"), 'c'}));
  BOOST_TEST(t->encode("hello") == (std::vector<TokenId>{id_of(*t, "hello")}));
  BOOST_TEST(t->encode(" hello") == (std::vector<TokenId>{id_of(*t, "Ġhello")}));
  BOOST_TEST(t->encode("hello hello") == (std::vector<TokenId>{id_of(*t, "hello"), id_of(*t, "Ġhello")}));
}

BOOST_AUTO_TEST_CASE(merges_as_pairs_read_alike) {
  json j = tiny_tokenizer();
  json pairs = json::array();
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  const auto strings = load(j);
  j["model"]["merges"] = pairs;
  const auto arrays = load(j);
  for (const char* text : {"abc hello", "hellohello", " helloabcab"})
    BOOST_TEST(strings->encode(text) == arrays->encode(text));
}

BOOST_AUTO_TEST_CASE(long_pieces_merge_as_short_ones) {
  // Pieces past 64 bytes take another path (a heap): the leftmost pair of lowest rank still merges first.
  const auto t = load(tiny_tokenizer({{"a", "b"}, {"ab", "ab"}}));
  const TokenId abab = id_of(*t, "abab");
  std::string text;
  for (int i = 0; i < 41; ++i) text += "ab";
  std::vector<TokenId> expected(20, abab);
  expected.push_back(id_of(*t, "ab"));
  BOOST_TEST(t->encode(text) == expected);
  BOOST_TEST(t->encode("ababab") == (std::vector<TokenId>{abab, id_of(*t, "ab")}));
}

BOOST_AUTO_TEST_CASE(added_tokens_are_matched_first) {
  const auto t = load(tiny_tokenizer());
  const TokenId hello = id_of(*t, "hello");
  BOOST_TEST(t->encode("hello<|end|>hello") == (std::vector<TokenId>{hello, 300, hello}));
  BOOST_TEST(t->encode("<x>hello") == (std::vector<TokenId>{301, hello}));
  // Written as text, a special token is text; an added token that is not special is still matched.
  const auto as_text = t->encode("<|end|><x>", Specials::as_text);
  BOOST_TEST(as_text.back() == 301);
  BOOST_TEST(as_text.size() > 2u);
  BOOST_TEST(t->decode(as_text) == "<|end|><x>");
  BOOST_TEST(t->is_special(300));
  BOOST_TEST(!t->is_special(301));
  BOOST_TEST(t->decode({hello, 300, 301}) == "hello<|end|><x>");
  BOOST_TEST(t->decode({hello, 300, 301}, true) == "hello<x>");
  // lstrip and rstrip take Unicode's White_Space along, as Hugging Face's do: U+00A0 and U+2028 too.
  json j = tiny_tokenizer();
  j["added_tokens"][1]["lstrip"] = j["added_tokens"][1]["rstrip"] = true;
  const auto stripping = load(j);
  BOOST_TEST(stripping->encode("hello \u00a0<x>\u2028\thello") == (std::vector<TokenId>{hello, 301, hello}));
  BOOST_TEST(stripping->encode("\u00a0<x>") == (std::vector<TokenId>{301}));
}

// The post-processor's special tokens, as Llama 3 writes them (a Sequence of ByteLevel and TemplateProcessing): put
// around a text by with_special_tokens (Hugging Face's add_special_tokens), never by encode.
BOOST_AUTO_TEST_CASE(the_post_processor_s_special_tokens_go_around_one_text) {
  json j = tiny_tokenizer();
  j["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [{"type": "ByteLevel"},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<x>", "type_id": 0}}],
       "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [300], "tokens": ["<|end|>"]},
                          "<x>": {"id": "<x>", "ids": [301], "tokens": ["<x>"]}}}]})");
  const auto t = load(j);
  const TokenId hello = id_of(*t, "hello");
  BOOST_TEST(t->encode("hello") == (std::vector<TokenId>{hello}));
  BOOST_TEST(t->with_special_tokens(t->encode("hello")) == (std::vector<TokenId>{300, hello, 301}));
  BOOST_TEST(load(tiny_tokenizer())->with_special_tokens({hello}) == (std::vector<TokenId>{hello}));  // none
}

BOOST_AUTO_TEST_CASE(any_bytes_come_back) {
  const auto t = load(tiny_tokenizer());
  std::mt19937 random(7);
  for (int i = 0; i < 500; ++i) {
    std::string bytes(random() % 40, '\0');
    const std::string alphabet = "ab c\n\xcc\x81he<|>";
    for (char& c : bytes)
      c = static_cast<char>(random() % 4 == 0 ? random() % 256 : alphabet[random() % alphabet.size()]);
    BOOST_TEST(t->decode(t->encode(bytes)) == bytes);
  }
  BOOST_CHECK_THROW(t->decode({100000}), std::out_of_range);
  BOOST_CHECK_THROW(t->decode({-1}), std::out_of_range);
}

BOOST_AUTO_TEST_CASE(nfc_and_ignore_merges) {
  json j = tiny_tokenizer();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  const auto nfc = load(j);
  BOOST_TEST(nfc->decode(nfc->encode("caf\x65\xcc\x81")) == "caf\xc3\xa9");  // e + U+0301 -> é
  // ignore_merges: a piece that is in the vocabulary is that token, though no merge leads to it.
  j["model"]["vocab"]["abc"] = 299;
  BOOST_TEST(load(j)->encode("abc").size() == 2u);
  j["model"]["ignore_merges"] = true;
  BOOST_TEST(load(j)->encode("abc") == (std::vector<TokenId>{299}));
}

BOOST_AUTO_TEST_CASE(split_pre_tokenizer) {
  // Qwen's layout: a Split with a regex, then ByteLevel without its own regex. Digits go one by one.
  json j = tiny_tokenizer();
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", R"(\p{N}| ?\p{L}+|\s+)"}}}, {"behavior", "Isolated"}},
        {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  j["model"]["merges"].push_back("1 2");
  j["model"]["vocab"]["12"] = 290;
  const auto t = load(j);
  BOOST_TEST(t->encode("12") == (std::vector<TokenId>{'1', '2'}));
  BOOST_TEST(t->encode(" hello") == (std::vector<TokenId>{id_of(*t, "Ġhello")}));

  // An empty match cuts there, as Hugging Face's splits do: \b parts " " from "hello".
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", R"(\b)"}};
  BOOST_TEST(load(j)->encode(" hello") == (std::vector<TokenId>{' ', id_of(*t, "hello")}));
  // A {"String": ...} pattern is a literal: Removed drops each space.
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}};
  BOOST_TEST(load(j)->encode(" hello hello") == (std::vector<TokenId>(2, id_of(*t, "hello"))));
}

// \s is Unicode's White_Space, as Oniguruma (Hugging Face's regex engine) reads it: not U+180E, which PCRE2's \s
// takes; and an empty match cuts without a piece of its own.
BOOST_AUTO_TEST_CASE(regex_splits_as_hugging_faces) {
  const auto split = [](const std::string& pattern, const std::string& text) {
    std::vector<std::string_view> pieces;
    Regex(pattern).split(text, pieces);
    return std::vector<std::string>(pieces.begin(), pieces.end());
  };
  using Pieces = std::vector<std::string>;
  BOOST_TEST(split(R"(\s|\S+)", "\u180e's a") == (Pieces{"\u180e's", " ", "a"}));
  BOOST_TEST(split(R"([^\s\p{L}]+|\p{L}+)", "\u180e\u00a0x") == (Pieces{"\u180e", "\u00a0", "x"}));
  BOOST_TEST(split(R"(\s+)", "a\u3000\u2028\u0085b") == (Pieces{"a", "\u3000\u2028\u0085", "b"}));
  BOOST_TEST(split(R"(\Q\s\E)", "a\\sb") == (Pieces{"a", "\\s", "b"}));  // quoted: as written
  BOOST_TEST(split(R"(\b)", "hi there") == (Pieces{"hi", " ", "there"}));
  BOOST_TEST(split(R"((?=é))", "aébé") == (Pieces{"a", "éb", "é"}));
}

// Each Split behaviour on Hugging Face's own example (SplitDelimiterBehavior's documentation), and with a match at
// either end: a match that follows a match stays a piece of its own when merged.
BOOST_AUTO_TEST_CASE(split_behaviours_cut_as_hugging_faces) {
  const auto split = [](SplitBehavior behavior, const std::string& text) {
    std::vector<std::string_view> pieces;
    Regex("-", true).split(text, pieces, behavior);
    return std::vector<std::string>(pieces.begin(), pieces.end());
  };
  using Pieces = std::vector<std::string>;
  constexpr auto isolated = SplitBehavior::isolated, removed = SplitBehavior::removed;
  constexpr auto merged_with_previous = SplitBehavior::merged_with_previous;
  constexpr auto merged_with_next = SplitBehavior::merged_with_next;
  BOOST_TEST(split(isolated, "the-final--countdown") == (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  BOOST_TEST(split(removed, "the-final--countdown") == (Pieces{"the", "final", "countdown"}));
  BOOST_TEST(split(merged_with_previous, "the-final--countdown") == (Pieces{"the-", "final-", "-", "countdown"}));
  BOOST_TEST(split(merged_with_next, "the-final--countdown") == (Pieces{"the", "-final", "-", "-countdown"}));
  BOOST_TEST(split(merged_with_previous, "-a-") == (Pieces{"-", "a-"}));
  BOOST_TEST(split(merged_with_next, "-a-") == (Pieces{"-a", "-"}));
  BOOST_TEST(split(merged_with_next, "--") == (Pieces{"-", "-"}));
  BOOST_TEST(split(merged_with_previous, "ab") == (Pieces{"ab"}));
  BOOST_TEST(split(merged_with_next, "") == (Pieces{}));
}

// A pattern that backtracks without bound (a hostile tokenizer.json) ends at PCRE2's match limit with one error that
// names it, rather than taking a thread for ever.
BOOST_AUTO_TEST_CASE(a_pattern_that_backtracks_without_bound_is_an_error) {
  std::vector<std::string_view> pieces;
  const std::string text = std::string(40, 'a') + "!";
  try {
    Regex("(a|aa)+$").split(text, pieces);
    BOOST_ERROR("no error");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()).find("pattern \"(a|aa)+$\" failed on a text of 41 bytes: match limit") !=
                   std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(malformed_files_name_the_key) {
  const auto refused = [](const std::function<void(json&)>& spoil, const std::string& key) {
    json j = tiny_tokenizer();
    spoil(j);
    try {
      load(j);
      BOOST_ERROR("accepted a tokenizer.json with a bad " << key);
    } catch (const TokenizerFileError& e) {
      BOOST_TEST(std::string(e.what()).find(key) != std::string::npos, e.what() << " does not name " << key);
      BOOST_TEST(e.exit_code() == exit_usage);
    }
  };
  refused([](json& j) { j.erase("model"); }, "\"model\"");
  refused([](json& j) { j["model"]["vocab"] = json::array(); }, "model.vocab");
  refused([](json& j) { j["model"]["vocab"]["zz"] = -3; }, "model.vocab.zz");
  refused([](json& j) { j["model"]["vocab"].erase("a"); }, "model.vocab");
  refused([](json& j) { j["model"]["merges"].push_back("a"); }, "model.merges[7]");
  refused([](json& j) { j["model"]["merges"].push_back("a q"); }, "model.merges[7]");
  refused([](json& j) { j["model"]["merges"].push_back(json::array({"a"})); }, "model.merges[7]");
  refused([](json& j) { j["model"]["type"] = "WordPiece"; }, "model.type");
  refused([](json& j) { j["model"]["unk_token"] = "<nope>"; }, "model.unk_token");
  refused([](json& j) { j["added_tokens"][0].erase("id"); }, "added_tokens[0].id");
  refused([](json& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; }, "post_processor.type");
  refused(
      [](json& j) {
        j["post_processor"] = {{"type", "TemplateProcessing"},
                               {"single", {{{"SpecialToken", {{"id", "<s>"}}}}}},
                               {"special_tokens", {{"<s>", {{"ids", {5000}}}}}}};
      },
      "post_processor");
  refused([](json& j) { j["added_tokens"][1]["content"] = 5; }, "added_tokens[1].content");
  refused([](json& j) { j["added_tokens"][1]["single_word"] = true; }, "added_tokens[1].single_word");
  refused([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, "normalizer.type");
  refused([](json& j) { j["pre_tokenizer"] = {{"type", "Unigram"}}; }, "pre_tokenizer.type");
  refused([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }, "pre_tokenizer.replacement");
  const json metaspace = {{"type", "Metaspace"}, {"replacement", "\u2581"}};
  refused([&](json& j) { (j["pre_tokenizer"] = metaspace)["replacement"] = "ab"; }, "pre_tokenizer.replacement");
  refused([&](json& j) { (j["pre_tokenizer"] = metaspace)["prepend_scheme"] = "once"; },
          "pre_tokenizer.prepend_scheme");
  refused(
      [&](json& j) {
        j["pre_tokenizer"] = metaspace;
        j["pre_tokenizer"]["prepend_scheme"] = "first";
        j["pre_tokenizer"]["add_prefix_space"] = false;
      },
      "pre_tokenizer.add_prefix_space");
  refused([&](json& j) { (j["pre_tokenizer"] = metaspace)["add_prefix_space"] = false; },  // "always" by default
          "pre_tokenizer.add_prefix_space");
  refused([&](json& j) { (j["pre_tokenizer"] = metaspace)["prepend_scheme"] = nullptr; },
          "pre_tokenizer.prepend_scheme");
  const json split = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}};
  refused(
      [&](json& j) {
        j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {metaspace, split}}};
      },
      "pre_tokenizer.pretokenizers[1]");
  refused(
      [&](json& j) {
        j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split, metaspace}}};
      },
      "pre_tokenizer.pretokenizers[1]");
  refused(
      [](json& j) {
        j["pre_tokenizer"] = nullptr;  // no ByteLevel: characters, whose decoder is read
        j["decoder"] = {{"type", "WordPiece"}};
      },
      "decoder.type");
  refused(
      [](json& j) {
        j["pre_tokenizer"] = {
            {"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", "(("}}}, {"behavior", "Isolated"}}, {{"type", "ByteLevel"}}}}};
      },
      "pre_tokenizer.pretokenizers[0].pattern");
  refused(
      [](json& j) {
        j["pre_tokenizer"] = {{"type", "Sequence"},
                              {"pretokenizers",
                               {{{"type", "ByteLevel"}, {"use_regex", false}},
                                {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Isolated"}}}}};
      },
      "pre_tokenizer.pretokenizers[1]");  // after ByteLevel: Hugging Face splits its mapped characters
  refused(
      [](json& j) {
        j["pre_tokenizer"] = nullptr;
        j["decoder"] = {{"type", "Replace"}, {"pattern", {{"String", ""}}}, {"content", ""}};
      },
      "decoder.pattern.String");  // an empty pattern replaced for ever
  refused(
      [](json& j) {
        j["pre_tokenizer"] = nullptr;
        j["decoder"] = {{"type", "Metaspace"}, {"replacement", ""}};
      },
      "decoder.replacement");  // the same through Metaspace
  BOOST_CHECK_THROW(parse_tokenizer_json("{\"model\": ", "x.json"), TokenizerFileError);
  const std::string deep = "{\"model\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  BOOST_CHECK_THROW(parse_tokenizer_json(deep, "x.json"), TokenizerFileError);
  BOOST_CHECK_THROW(parse_tokenizer_json("{\"version\": -1e999}", "x.json"), TokenizerFileError);  // beyond a double
  BOOST_CHECK_THROW(load_tokenizer("/nonexistent/dir"), TokenizerFileError);
}

BOOST_AUTO_TEST_CASE(threads_share_one_tokenizer) {
  // Runners encode from several threads at once: the piece cache is shared, the answers must not change.
  const auto t = load(tiny_tokenizer());
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("hello ab" + std::string(i % 7, ' ') + std::to_string(i) + "abc<|end|>");
  std::vector<std::vector<TokenId>> expected;
  for (const auto& text : texts) expected.push_back(load(tiny_tokenizer())->encode(text));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round)
        for (std::size_t i = 0; i < texts.size(); ++i) wrong += t->encode(texts[i]) != expected[i];
    });
  for (auto& thread : threads) thread.join();
  BOOST_TEST(wrong.load() == 0);
}

BOOST_AUTO_TEST_CASE(reads_a_model_directory) {
  TempDir dir;
  std::ofstream(dir.file("tokenizer.json")) << tiny_tokenizer().dump();
  BOOST_TEST(load_tokenizer(dir.path)->encode("hello").size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

// Llama 2's layout: no pre-tokenizer, spaces as U+2581 by the normalizer, BPE over characters, bytes of characters
// without a token as <0xAB> tokens, a decoder that turns U+2581 back and strips the first space.
BOOST_AUTO_TEST_CASE(sentencepiece_style_bpe_with_byte_fallback) {
  json j =
      sentencepiece_tokenizer({"\\u2581", "a", "b", "\\u2581a", "ab", "\\u2581ab"}, {"\\u2581 a", "a b", "\\u2581a b"});
  const auto t = load(j);
  const TokenId space = id_of(*t, "\u2581"), ab = id_of(*t, "\u2581ab");
  BOOST_TEST(t->encode("ab ab") == (std::vector<TokenId>{ab, ab}));
  BOOST_TEST(t->encode("b  a") == (std::vector<TokenId>{space, id_of(*t, "b"), space, id_of(*t, "\u2581a")}));
  BOOST_TEST(t->encode("\xc3\xa9") == (std::vector<TokenId>{space, 3 + 0xc3, 3 + 0xa9}));  // é: no token, its bytes
  for (const char* text : {"ab ab", " a", "caf\xc3\xa9 \xff", "b  a "}) BOOST_TEST(t->decode(t->encode(text)) == text);
  BOOST_TEST(t->decode({1, ab}) == "<s> ab");
  // Text given out token by token (the endpoint's streams): each token's decode alone lost its word's space.
  for (const char* text : {"ab ab", "b  a", "caf\xc3\xa9 ab"}) {
    const std::vector<TokenId> ids = t->encode(text);
    std::string pieces;
    for (TokenId id : ids) pieces += t->piece(id, true, pieces.empty());
    BOOST_TEST(pieces == t->decode(ids, true));
  }
  BOOST_TEST(t->piece(1, true, true) + t->piece(ab, true, true) == "ab");  // after a skipped <s>: still the start
  BOOST_TEST(t->piece(static_cast<TokenId>(t->vocab_size()) + 5, false, false).empty());  // a model's padding row
  // An added token matched in the normalized text (normalized: true, as transformers' add_tokens writes them) is split
  // otherwise by Hugging Face where spaces are rewritten: refused, not tokenized differently.
  json normalized = j;
  normalized["added_tokens"].push_back({{"id", 2}, {"content", "</s>"}, {"special", false}, {"normalized", true}});
  try {
    load(normalized);
    BOOST_ERROR("an added token matched in normalized text was taken");
  } catch (const TokenizerFileError& e) {
    BOOST_TEST(std::string(e.what()).find("added_tokens[1].normalized") != std::string::npos, e.what());
  }
  normalized["normalizer"] = nullptr;  // nothing rewritten: the same text either way
  BOOST_CHECK_NO_THROW(load(normalized));
  // Without byte fallback a character without a token is the unknown token, once for a run (fuse_unk).
  j["model"]["byte_fallback"] = false;
  BOOST_TEST(load(j)->encode("\xc3\xa9\xc3\xa9"
                             "a") == (std::vector<TokenId>{space, 0, id_of(*t, "a")}));
}

// Metaspace (Mistral v0.3; Llama files converted by transformers 4.41 on): no normalizer; the pre-tokenizer writes
// spaces as U+2581 and puts one before the text unless it starts with one: always, or first (only at the input's
// start, not after an added token), or never; split cuts the text before each U+2581.
BOOST_AUTO_TEST_CASE(metaspace_pre_tokenizer) {
  // "b▁" merges first: across a space, which only a text left whole (split false) lets happen.
  json j = sentencepiece_tokenizer({"\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "b\u2581"},
                                   {"b \u2581", "\u2581 a", "a b", "\u2581a b"});
  const json legacy = j;
  j["normalizer"] = nullptr;
  const auto with = [&](const json& pre_tokenizer) {
    json k = j;
    k["pre_tokenizer"] = pre_tokenizer;
    return load(k);
  };
  const auto metaspace = [&](const char* scheme, bool split) {
    return with({{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", scheme}, {"split", split}});
  };
  const auto first = metaspace("first", false), first_split = metaspace("first", true);
  const auto always = metaspace("always", false), never = metaspace("never", false);
  const TokenId space = id_of(*first, "\u2581"), a = id_of(*first, "a"), ab = id_of(*first, "ab");
  const TokenId sa = id_of(*first, "\u2581a"), sab = id_of(*first, "\u2581ab"), bs = id_of(*first, "b\u2581");
  using Ids = std::vector<TokenId>;
  BOOST_TEST(first->encode("ab a") == (Ids{sa, bs, a}));  // one piece: b▁ merged before ▁a could
  BOOST_TEST(first_split->encode("ab a") == (Ids{sab, sa}));
  BOOST_TEST(first_split->encode("ab  a") == (Ids{sab, space, sa}));  // "▁▁a": "▁", "▁a"
  BOOST_TEST(first->encode(" ab") == (Ids{sab}));                     // starts with its ▁ already
  BOOST_TEST(load(legacy)->encode(" ab") == (Ids{space, sab}));       // ...where Llama 2's normalizer prepends one more
  BOOST_TEST(first->encode("<s>ab") == (Ids{1, ab}));                 // after an added token: not the input's start
  BOOST_TEST(first->encode("ab<s>ab") == (Ids{sab, 1, ab}));
  BOOST_TEST(always->encode("ab<s>ab") == (Ids{sab, 1, sab}));
  BOOST_TEST(never->encode("ab") == (Ids{ab}));
  // Files written before prepend_scheme: add_prefix_space true is always; false needs never beside it.
  BOOST_TEST(
      with({{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", false}, {"prepend_scheme", "never"}})
          ->encode("ab") == (Ids{ab}));
  BOOST_TEST(with({{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}})->encode("ab<s>ab") ==
             (Ids{sab, 1, sab}));
  BOOST_TEST(first->decode(first->encode("a<s>ab")) == "a<s>ab");  // always would write "a<s> ab", as Hugging Face
  for (const auto* t : {first.get(), first_split.get(), always.get()})
    for (const char* text : {"ab a", "b  a ", "caf\xc3\xa9 ab"}) {
      const Ids ids = t->encode(text);
      BOOST_TEST(t->decode(ids) == text);
      std::string pieces;  // the endpoint's streams: token by token, as decoded whole
      for (TokenId id : ids) pieces += t->piece(id, false, pieces.empty());
      BOOST_TEST(pieces == text);
    }
}

BOOST_AUTO_TEST_CASE(byte_tokenizer) {
  const auto t = make_byte_tokenizer({"<|bos|>", "<|eos|>"});
  BOOST_TEST(t->vocab_size() == 258u);
  BOOST_TEST(t->encode("a<|eos|>\xff") == (std::vector<TokenId>{'a', 257, 255}));
  BOOST_TEST(t->encode("<|eos|>", Specials::as_text).size() == 7u);
  BOOST_TEST(t->decode({'a', 256, 255}) == "a<|bos|>\xff");
  BOOST_TEST(t->decode({'a', 256}, true) == "a");
  BOOST_TEST(t->piece(256, false, false) == "<|bos|>");
  BOOST_TEST(t->piece(256, true, false).empty());
  BOOST_TEST(t->piece(258, false, true).empty());  // past the vocabulary: no text, no exception
  BOOST_TEST(t->token_id("<|eos|>").value() == 257);
  BOOST_CHECK_THROW(t->decode({258}), std::out_of_range);
}
