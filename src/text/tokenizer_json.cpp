// tokenizer.json read into a BpeModel: every key's JSON type checked, every error naming the file and the key.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "arclight/core/log.hpp"
#include "arclight/text/json_input.hpp"
#include "bpe_model.hpp"
#include "unicode.hpp"

namespace arclight::text {
namespace {

using json = nlohmann::json;

// The pre-tokenizer ByteLevel applies when its use_regex is true: GPT-2's pattern.
constexpr const char* gpt2_pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Ids beyond this are refused: a file's claim is not a reason to allocate gigabytes.
constexpr std::int64_t max_token_id = 1 << 22;

// tokenizer.json's keys, read with their JSON types checked; every error names the file and the key's path.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw TokenizerFileError(log::concat(file_, ": key \"", key, "\": ", what));
  }
  const json& get(const json& object, const std::string& path, const char* key, json::value_t type) const {
    const auto it = object.find(key);
    const std::string where = path.empty() ? key : path + "." + key;
    if (it == object.end()) fail(where, "missing");
    if (it->type() != type && !(type == json::value_t::number_integer && it->is_number_integer()))
      fail(where, log::concat("expected ", json(type).type_name(), ", found ", it->type_name()));
    return *it;
  }
  // An optional key: its value, or `fallback` where absent or null.
  bool flag(const json& object, const std::string& path, const char* key, bool fallback) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(path + "." + key, log::concat("expected boolean, found ", it->type_name()));
    return it->get<bool>();
  }
  std::string string(const json& object, const std::string& path, const char* key) const {
    return get(object, path, key, json::value_t::string).get<std::string>();
  }
  TokenId id(const json& value, const std::string& where) const {
    if (!value.is_number_integer()) fail(where, log::concat("expected an integer id, found ", value.type_name()));
    const auto v = value.get<std::int64_t>();
    if (v < 0 || v >= max_token_id) fail(where, log::concat("id ", v, " out of range [0, ", max_token_id, ")"));
    return static_cast<TokenId>(v);
  }

 private:
  std::string file_;
};

// What decoding writes for a token: byte-level, the bytes it spells; characters, the token with the decoder's
// replacements (U+2581 -> space), or the byte of a <0xAB> token where the decoder has ByteFallback.
std::string decoded_bytes(const BpeModel& m, const std::string& token) {
  if (m.byte_level) return m.key_of(token);
  if (m.decoder_byte_fallback && token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' &&
      std::isxdigit(static_cast<unsigned char>(token[3])) && std::isxdigit(static_cast<unsigned char>(token[4])))
    return std::string(1, static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
  std::string out = token;
  for (const auto& [from, to] : m.decoder_replacements) out = replaced_all(out, from, to);
  return out;
}

void set_token(BpeModel& m, TokenId id, std::string bytes, Kind kind) {
  if (static_cast<std::size_t>(id) >= m.bytes_of_id.size()) {
    m.bytes_of_id.resize(id + 1);
    m.kind_of_id.resize(id + 1, Kind::none);
  }
  m.bytes_of_id[id] = std::move(bytes);
  m.kind_of_id[id] = kind;
}

void read_vocab(const Reader& r, const json& model, BpeModel& m) {
  const json& vocab = r.get(model, "model", "vocab", json::value_t::object);
  m.vocab.reserve(vocab.size());
  for (const auto& [token, value] : vocab.items()) {
    const TokenId id = r.id(value, "model.vocab." + token);
    m.vocab.emplace(m.key_of(token), id);
    set_token(m, id, decoded_bytes(m, token), Kind::normal);
  }
  const bool byte_fallback = r.flag(model, "model", "byte_fallback", false);
  for (int b = 0; b < 256; ++b) {
    char fallback[8];
    std::snprintf(fallback, sizeof fallback, "<0x%02X>", b);
    const auto it = m.vocab.find(m.byte_level ? std::string(1, static_cast<char>(b)) : std::string(fallback));
    if (m.byte_level && it == m.vocab.end())
      r.fail("model.vocab", log::concat("no token for byte ", b, " (\"", byte_level_char(b), "\"): not byte-level"));
    m.byte_id[b] = it != m.vocab.end() && (m.byte_level || byte_fallback) ? it->second : -1;
  }
  const auto unk = model.find("unk_token");
  if (unk != model.end() && unk->is_string()) {
    const auto it = m.vocab.find(m.key_of(unk->get<std::string>()));
    if (it == m.vocab.end()) r.fail("model.unk_token", "\"" + unk->get<std::string>() + "\" is not in the vocabulary");
    m.unk = it->second;
  }
  m.fuse_unk = r.flag(model, "model", "fuse_unk", false);
}

// A merge is "a b" (older files) or ["a", "b"] (tokenizers 0.20 on); its rank is its place in the list.
void read_merges(const Reader& r, const json& model, BpeModel& m) {
  const json& merges = r.get(model, "model", "merges", json::value_t::array);
  m.merges.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const json& merge = merges[rank];
    const std::string where = log::concat("model.merges[", rank, "]");
    std::string left, right;
    if (merge.is_string()) {
      const auto& s = merge.get_ref<const std::string&>();
      const auto space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        r.fail(where, "a merge string is two tokens and one space, found \"" + s + "\"");
      left = s.substr(0, space), right = s.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
    } else {
      r.fail(where, "expected \"a b\" or [\"a\", \"b\"], found " + merge.dump());
    }
    const auto a = m.vocab.find(m.key_of(left)), b = m.vocab.find(m.key_of(right));
    const auto merged = m.vocab.find(m.key_of(left) + m.key_of(right));
    if (a == m.vocab.end() || b == m.vocab.end() || merged == m.vocab.end())
      r.fail(where,
             "merges \"" + left + "\" and \"" + right + "\", which are not both in the vocabulary with their join");
    // A pair listed twice takes its later rank, as Hugging Face's tokenizers collect the list into a map.
    m.merges.insert_or_assign(pair_key(a->second, b->second), Merge{static_cast<std::int32_t>(rank), merged->second});
  }
}

void read_added_tokens(const Reader& r, const json& root, BpeModel& m) {
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return;
  if (!it->is_array()) r.fail("added_tokens", log::concat("expected array, found ", it->type_name()));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string where = log::concat("added_tokens[", i, "]");
    if (!t.is_object()) r.fail(where, log::concat("expected object, found ", t.type_name()));
    AddedToken added{r.string(t, where, "content"), r.id(r.get(t, where, "id", json::value_t::number_integer), where),
                     r.flag(t, where, "special", false), r.flag(t, where, "lstrip", false),
                     r.flag(t, where, "rstrip", false)};
    if (added.content.empty()) r.fail(where + ".content", "an empty added token");
    if (r.flag(t, where, "single_word", false))  // matched only as a whole word: not done here, so not silently
      r.fail(where + ".single_word", "true is not supported (the token would be matched inside words too)");
    // Hugging Face matches such a token in the normalized text; here added tokens are matched in the text as given,
    // which is the same text unless a normalizer rewrites it (NFC aside): Llama 2's Prepend and Replace of spaces.
    const bool rewritten = std::any_of(m.normalizers.begin(), m.normalizers.end(),
                                       [](const NormalizerStep& n) { return n.type != NormalizerStep::Type::nfc; });
    if (rewritten && r.flag(t, where, "normalized", false))
      r.fail(where + ".normalized",
             "true is not supported with this normalizer (the token would be matched before the spaces are "
             "rewritten, and split differently from Hugging Face)");
    set_token(m, added.id, decoded_bytes(m, added.content), added.special ? Kind::special : Kind::added);
    m.added.push_back(std::move(added));
  }
}

void read_normalizer(const Reader& r, const json& normalizer, const std::string& where, BpeModel& m) {
  if (normalizer.is_null()) return;
  if (!normalizer.is_object()) r.fail(where, log::concat("expected object, found ", normalizer.type_name()));
  const std::string type = r.string(normalizer, where, "type");
  if (type == "NFC") {
    m.normalizers.push_back({NormalizerStep::Type::nfc, "", ""});
  } else if (type == "Prepend") {
    m.normalizers.push_back({NormalizerStep::Type::prepend, r.string(normalizer, where, "prepend"), ""});
  } else if (type == "Replace") {
    const json& pattern = r.get(normalizer, where, "pattern", json::value_t::object);
    if (!pattern.contains("String")) r.fail(where + ".pattern", "only {\"String\": ...} patterns are supported");
    const std::string from = r.string(pattern, where + ".pattern", "String");
    if (from.empty()) r.fail(where + ".pattern.String", "an empty pattern");
    m.normalizers.push_back({NormalizerStep::Type::replace, from, r.string(normalizer, where, "content")});
  } else if (type == "Sequence") {
    const json& list = r.get(normalizer, where, "normalizers", json::value_t::array);
    for (std::size_t i = 0; i < list.size(); ++i)
      read_normalizer(r, list[i], log::concat(where, ".normalizers[", i, "]"), m);
  } else {
    r.fail(where + ".type", "normalizer \"" + type + "\" is not supported (NFC, Prepend, Replace and Sequence are)");
  }
}

void read_split(const Reader& r, const json& step, const std::string& where, BpeModel& m) {
  const json& pattern = r.get(step, where, "pattern", json::value_t::object);
  const bool is_regex = pattern.contains("Regex");
  if (!is_regex && !pattern.contains("String"))
    r.fail(where + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
  const std::string text = r.string(pattern, where + ".pattern", is_regex ? "Regex" : "String");
  const std::string behavior = r.string(step, where, "behavior");
  static const std::pair<std::string_view, SplitBehavior> behaviors[] = {
      {"Isolated", SplitBehavior::isolated},
      {"Removed", SplitBehavior::removed},
      {"MergedWithPrevious", SplitBehavior::merged_with_previous},
      {"MergedWithNext", SplitBehavior::merged_with_next}};
  const auto known =
      std::find_if(std::begin(behaviors), std::end(behaviors), [&](const auto& b) { return b.first == behavior; });
  if (known == std::end(behaviors))
    r.fail(where + ".behavior",
           "\"" + behavior + "\" is not supported (Isolated, Removed, MergedWithPrevious and MergedWithNext are)");
  if (r.flag(step, where, "invert", false)) r.fail(where + ".invert", "an inverted Split is not supported");
  try {
    m.steps.push_back({std::make_unique<Regex>(text, !is_regex), known->second});
  } catch (const std::invalid_argument& e) {
    r.fail(where + ".pattern", e.what());
  }
}

// Metaspace as Hugging Face's tokenizers read it (one struct for the pre-tokenizer and the decoder): one replacement
// character; prepend_scheme "always" unless given, a null refused; the older add_prefix_space false only beside
// "never" (alone it contradicts the default, and Hugging Face refuses the file); split true unless given.
MetaspaceStep read_metaspace(const Reader& r, const json& object, const std::string& where) {
  MetaspaceStep step;
  step.replacement = r.string(object, where, "replacement");
  if (step.replacement.empty() || utf8_sequence_length(step.replacement, 0) != step.replacement.size())
    r.fail(where + ".replacement", "expected one character, found \"" + step.replacement + "\"");
  if (object.contains("prepend_scheme")) {
    const std::string name = r.string(object, where, "prepend_scheme");
    if (name == "first")
      step.prepend = MetaspaceStep::Prepend::first;
    else if (name == "never")
      step.prepend = MetaspaceStep::Prepend::never;
    else if (name != "always")
      r.fail(where + ".prepend_scheme", "\"" + name + "\" is not one of always, first, never");
  }
  if (!r.flag(object, where, "add_prefix_space", true) && step.prepend != MetaspaceStep::Prepend::never)
    r.fail(where + ".add_prefix_space", "false needs prepend_scheme \"never\" beside it (as Hugging Face reads it)");
  step.split = r.flag(object, where, "split", true);
  return step;
}

// Returns whether a ByteLevel step was there: without one, this is not a byte-level BPE.
bool read_pre_tokenizer(const Reader& r, const json& pre, const std::string& where, BpeModel& m) {
  if (!pre.is_object()) r.fail(where, log::concat("expected object, found ", pre.type_name()));
  const std::string type = r.string(pre, where, "type");
  // Metaspace rewrites the text the other steps would cut (and they, its pieces): alone, as every file that has it.
  if (type != "Sequence" && (m.metaspace || (type == "Metaspace" && !m.steps.empty())))
    r.fail(where,
           "Metaspace together with other pre-tokenizers is not supported (it comes alone in Mistral's and "
           "Llama's files)");
  if (type == "Metaspace") {
    m.metaspace = read_metaspace(r, pre, where);
    return false;
  }
  if (type == "Split") {
    read_split(r, pre, where, m);
    return false;
  }
  if (type == "ByteLevel") {
    if (r.flag(pre, where, "add_prefix_space", false))
      r.fail(where + ".add_prefix_space", "true is not supported (GPT-2, Llama 3 and Qwen set false)");
    if (r.flag(pre, where, "use_regex", true))
      m.steps.push_back({std::make_unique<Regex>(gpt2_pattern), SplitBehavior::isolated});
    return true;
  }
  if (type != "Sequence")
    r.fail(where + ".type",
           "pre-tokenizer \"" + type + "\" is not supported (Split, ByteLevel, Metaspace and Sequence are)");
  const json& list = r.get(pre, where, "pretokenizers", json::value_t::array);
  bool byte_level = false;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string step = log::concat(where, ".pretokenizers[", i, "]");
    if (byte_level)  // Hugging Face runs it on ByteLevel's mapped characters (Ġ for a space), arclight on the bytes
      r.fail(step, "a step after ByteLevel is not supported (ByteLevel comes last in GPT-2's, Llama 3's and Qwen's)");
    byte_level |= read_pre_tokenizer(r, list[i], step, m);
  }
  return byte_level;
}

void check_model_kind(const Reader& r, const json& model) {
  const auto type = model.find("type");
  if (type != model.end() && *type != "BPE")
    r.fail("model.type", "model \"" + type->dump() + "\" is not supported (BPE is)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    if (it != model.end() && !it->is_null() && *it != "")
      r.fail(std::string("model.") + key, "not supported (byte-level and SentencePiece-style BPE leave it empty)");
  }
}

// A character-level model's decoder: Replace (U+2581 -> space), ByteFallback, Fuse, Strip of leading spaces, in a
// Sequence or alone (Llama 2's layout), or Metaspace. Byte-level models need none: their bytes are their tokens'.
void read_decoder(const Reader& r, const json& decoder, const std::string& where, BpeModel& m) {
  if (decoder.is_null()) return;
  if (!decoder.is_object()) r.fail(where, log::concat("expected object, found ", decoder.type_name()));
  const std::string type = r.string(decoder, where, "type");
  if (type == "Replace") {
    const json& pattern = r.get(decoder, where, "pattern", json::value_t::object);
    const std::string from = r.string(pattern, where + ".pattern", "String");
    if (from.empty()) r.fail(where + ".pattern.String", "an empty pattern");
    m.decoder_replacements.emplace_back(from, r.string(decoder, where, "content"));
  } else if (type == "ByteFallback") {
    m.decoder_byte_fallback = true;
  } else if (type == "Strip") {
    if (r.string(decoder, where, "content") != " ") r.fail(where + ".content", "only spaces are stripped");
    m.strip_leading_spaces = r.get(decoder, where, "start", json::value_t::number_integer).get<std::size_t>();
    if (r.get(decoder, where, "stop", json::value_t::number_integer) != 0)
      r.fail(where + ".stop", "only 0 is supported");
  } else if (type == "Metaspace") {
    const MetaspaceStep step = read_metaspace(r, decoder, where);
    m.decoder_replacements.emplace_back(step.replacement, " ");
    m.strip_leading_spaces = step.prepend == MetaspaceStep::Prepend::never ? 0 : 1;
  } else if (type == "Sequence") {
    const json& list = r.get(decoder, where, "decoders", json::value_t::array);
    for (std::size_t i = 0; i < list.size(); ++i) read_decoder(r, list[i], log::concat(where, ".decoders[", i, "]"), m);
  } else if (type != "Fuse") {
    r.fail(where + ".type", "decoder \"" + type + "\" is not supported for a model without ByteLevel");
  }
}

// The post-processor, as Hugging Face applies it when special tokens are added: TemplateProcessing's `single` (the
// special tokens before and after sequence A), in a Sequence or alone; ByteLevel's only changes offsets.
void read_post_processor(const Reader& r, const json& post, const std::string& where, BpeModel& m) {
  if (post.is_null()) return;
  if (!post.is_object()) r.fail(where, log::concat("expected object, found ", post.type_name()));
  const std::string type = r.string(post, where, "type");
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    const json& list = r.get(post, where, "processors", json::value_t::array);
    for (std::size_t i = 0; i < list.size(); ++i)
      read_post_processor(r, list[i], log::concat(where, ".processors[", i, "]"), m);
    return;
  }
  if (type != "TemplateProcessing") r.fail(where + ".type", "post-processor \"" + type + "\" is not supported");
  const json& single = r.get(post, where, "single", json::value_t::array);
  const json& specials = r.get(post, where, "special_tokens", json::value_t::object);
  bool after = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string at = log::concat(where, ".single[", i, "]");
    if (!single[i].is_object()) r.fail(at, log::concat("expected object, found ", single[i].type_name()));
    if (single[i].contains("Sequence")) {
      after = true;
      continue;
    }
    const std::string name = r.string(r.get(single[i], at, "SpecialToken", json::value_t::object), at, "id");
    const json& special = r.get(specials, where + ".special_tokens", name.c_str(), json::value_t::object);
    const json& ids = r.get(special, where + ".special_tokens." + name, "ids", json::value_t::array);
    for (const json& id : ids) (after ? m.suffix_ids : m.prefix_ids).push_back(r.id(id, at));
  }
}

BpeModel read_model(const json& root, const Reader& r) {
  if (!root.is_object()) r.fail("(top level)", log::concat("expected object, found ", root.type_name()));
  BpeModel m;
  const json& model = r.get(root, "", "model", json::value_t::object);
  check_model_kind(r, model);
  m.ignore_merges = r.flag(model, "model", "ignore_merges", false);
  const auto normalizer = root.find("normalizer");
  if (normalizer != root.end()) read_normalizer(r, *normalizer, "normalizer", m);
  // The alphabet: bytes where a ByteLevel pre-tokenizer is there, characters (SentencePiece-style) where not.
  const auto pre = root.find("pre_tokenizer");
  m.byte_level = pre != root.end() && !pre->is_null() && read_pre_tokenizer(r, *pre, "pre_tokenizer", m);
  const auto decoder = root.find("decoder");
  if (!m.byte_level && decoder != root.end()) read_decoder(r, *decoder, "decoder", m);
  read_vocab(r, model, m);
  read_merges(r, model, m);
  read_added_tokens(r, root, m);
  if (const auto post = root.find("post_processor"); post != root.end())
    read_post_processor(r, *post, "post_processor", m);
  for (const auto* ids : {&m.prefix_ids, &m.suffix_ids})
    for (const TokenId id : *ids)
      if (static_cast<std::size_t>(id) >= m.kind_of_id.size() || m.kind_of_id[id] == Kind::none)
        r.fail("post_processor", log::concat("token id ", id, " is in neither the vocabulary nor the added tokens"));
  return m;
}

}  // namespace

std::string BpeModel::key_of(const std::string& token) const {
  if (!byte_level) return token;
  auto bytes = bytes_of_byte_level(token);
  return bytes ? std::move(*bytes) : token;
}

BpeModel read_bpe_model(std::string_view json_text, const std::string& file) {
  const Reader reader(file);
  const json root = parse_json<json>(json_text);
  if (root.is_discarded())
    throw TokenizerFileError(log::concat(file, ": not JSON, or nested deeper than ", max_json_depth, " levels"));
  return read_model(root, reader);
}

}  // namespace arclight::text
