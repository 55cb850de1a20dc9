#include "arclight/text/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <fstream>
#include <iterator>
#include <mutex>
#include <queue>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "arclight/core/log.hpp"
#include "regex.hpp"
#include "unicode.hpp"

namespace arclight::text {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

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

// A token's bytes as the ByteLevel decoder gives them: its characters mapped back to bytes, or its own UTF-8 where
// one of them is outside the byte-level alphabet (added tokens such as "<|im_end|>" pass either way).
std::string token_bytes(const std::string& token) {
  auto bytes = bytes_of_byte_level(token);
  return bytes ? std::move(*bytes) : token;
}

struct AddedToken {
  std::string content;
  TokenId id;
  bool special, lstrip, rstrip;
};

struct Merge {
  std::int32_t rank;
  TokenId merged;
};
std::uint64_t pair_key(TokenId a, TokenId b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

// One step of the pre-tokenizer: a Split (or ByteLevel with use_regex) cutting every piece further.
struct SplitStep {
  std::unique_ptr<Regex> regex;
  bool keep_matches = true;
};

enum class Kind : std::uint8_t { none, normal, added, special };

// Everything tokenizer.json says that encoding and decoding need.
struct BpeModel {
  std::unordered_map<std::string, TokenId> vocab;  // token bytes -> id
  std::vector<std::string> bytes_of_id;
  std::vector<Kind> kind_of_id;
  std::array<TokenId, 256> byte_id{};
  std::unordered_map<std::uint64_t, Merge> merges;
  std::vector<AddedToken> added;
  std::vector<SplitStep> steps;
  bool nfc = false;
  bool ignore_merges = false;
};

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
    std::string bytes = token_bytes(token);
    m.vocab.emplace(bytes, id);
    set_token(m, id, std::move(bytes), Kind::normal);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = m.vocab.find(std::string(1, static_cast<char>(b)));
    if (it == m.vocab.end())
      r.fail("model.vocab", log::concat("no token for byte ", b, " (\"", byte_level_char(b), "\"): not byte-level"));
    m.byte_id[b] = it->second;
  }
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
    const auto a = m.vocab.find(token_bytes(left)), b = m.vocab.find(token_bytes(right));
    const auto merged = m.vocab.find(token_bytes(left) + token_bytes(right));
    if (a == m.vocab.end() || b == m.vocab.end() || merged == m.vocab.end())
      r.fail(where,
             "merges \"" + left + "\" and \"" + right + "\", which are not both in the vocabulary with their join");
    m.merges.emplace(pair_key(a->second, b->second), Merge{static_cast<std::int32_t>(rank), merged->second});
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
    set_token(m, added.id, token_bytes(added.content), added.special ? Kind::special : Kind::added);
    m.added.push_back(std::move(added));
  }
}

void read_normalizer(const Reader& r, const json& normalizer, const std::string& where, BpeModel& m) {
  if (normalizer.is_null()) return;
  if (!normalizer.is_object()) r.fail(where, log::concat("expected object, found ", normalizer.type_name()));
  const std::string type = r.string(normalizer, where, "type");
  if (type == "NFC") {
    m.nfc = true;
  } else if (type == "Sequence") {
    const json& list = r.get(normalizer, where, "normalizers", json::value_t::array);
    for (std::size_t i = 0; i < list.size(); ++i)
      read_normalizer(r, list[i], log::concat(where, ".normalizers[", i, "]"), m);
  } else {
    r.fail(where + ".type", "normalizer \"" + type + "\" is not supported (NFC and Sequence are)");
  }
}

void read_split(const Reader& r, const json& step, const std::string& where, BpeModel& m) {
  const json& pattern = r.get(step, where, "pattern", json::value_t::object);
  const bool is_regex = pattern.contains("Regex");
  if (!is_regex && !pattern.contains("String"))
    r.fail(where + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
  const std::string text = r.string(pattern, where + ".pattern", is_regex ? "Regex" : "String");
  const std::string behavior = r.string(step, where, "behavior");
  if (behavior != "Isolated" && behavior != "Removed")
    r.fail(where + ".behavior", "\"" + behavior + "\" is not supported (Isolated and Removed are)");
  if (r.flag(step, where, "invert", false)) r.fail(where + ".invert", "an inverted Split is not supported");
  try {
    m.steps.push_back({std::make_unique<Regex>(text, !is_regex), behavior == "Isolated"});
  } catch (const std::invalid_argument& e) {
    r.fail(where + ".pattern", e.what());
  }
}

// Returns whether a ByteLevel step was there: without one, this is not a byte-level BPE.
bool read_pre_tokenizer(const Reader& r, const json& pre, const std::string& where, BpeModel& m) {
  if (!pre.is_object()) r.fail(where, log::concat("expected object, found ", pre.type_name()));
  const std::string type = r.string(pre, where, "type");
  if (type == "Split") {
    read_split(r, pre, where, m);
    return false;
  }
  if (type == "ByteLevel") {
    if (r.flag(pre, where, "add_prefix_space", false))
      r.fail(where + ".add_prefix_space", "true is not supported (GPT-2, Llama 3 and Qwen set false)");
    if (r.flag(pre, where, "use_regex", true)) m.steps.push_back({std::make_unique<Regex>(gpt2_pattern), true});
    return true;
  }
  if (type != "Sequence")
    r.fail(where + ".type", "pre-tokenizer \"" + type + "\" is not supported (Split, ByteLevel and Sequence are)");
  const json& list = r.get(pre, where, "pretokenizers", json::value_t::array);
  bool byte_level = false;
  for (std::size_t i = 0; i < list.size(); ++i)
    byte_level |= read_pre_tokenizer(r, list[i], log::concat(where, ".pretokenizers[", i, "]"), m);
  return byte_level;
}

void check_model_kind(const Reader& r, const json& model) {
  const auto type = model.find("type");
  if (type != model.end() && *type != "BPE")
    r.fail("model.type", "model \"" + type->dump() + "\" is not supported (BPE is)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    if (it != model.end() && !it->is_null() && *it != "")
      r.fail(std::string("model.") + key, "not supported (byte-level BPE leaves it empty)");
  }
  if (r.flag(model, "model", "byte_fallback", false))
    r.fail("model.byte_fallback", "byte fallback (Llama 2, Mistral) is not supported yet");
}

BpeModel read_model(const json& root, const Reader& r) {
  if (!root.is_object()) r.fail("(top level)", log::concat("expected object, found ", root.type_name()));
  BpeModel m;
  const json& model = r.get(root, "", "model", json::value_t::object);
  check_model_kind(r, model);
  m.ignore_merges = r.flag(model, "model", "ignore_merges", false);
  read_vocab(r, model, m);
  read_merges(r, model, m);
  read_added_tokens(r, root, m);
  const auto normalizer = root.find("normalizer");
  if (normalizer != root.end()) read_normalizer(r, *normalizer, "normalizer", m);
  const auto pre = root.find("pre_tokenizer");
  if (pre == root.end() || pre->is_null() || !read_pre_tokenizer(r, *pre, "pre_tokenizer", m))
    r.fail("pre_tokenizer", "no ByteLevel pre-tokenizer: only byte-level BPE is supported");
  return m;
}

// BPE over one piece: merge the adjacent pair of lowest rank (the leftmost among equals) until no pair merges.
// Short pieces keep the ranks of neighbouring pairs in an array and scan it; long ones (a run of thousands of
// spaces) use a heap, so that a piece costs O(n log n) rather than O(n^2).
class PieceMerger {
 public:
  explicit PieceMerger(const BpeModel& m) : m_(m) {}

  void merge(std::vector<TokenId>& symbols) const {
    if (symbols.size() < 2) return;
    if (symbols.size() <= 64)
      merge_by_scan(symbols);
    else
      merge_by_heap(symbols);
  }

 private:
  const Merge* find(TokenId a, TokenId b) const {
    const auto it = m_.merges.find(pair_key(a, b));
    return it == m_.merges.end() ? nullptr : &it->second;
  }
  std::int32_t rank(TokenId a, TokenId b) const {
    const Merge* merge = find(a, b);
    return merge ? merge->rank : INT32_MAX;
  }

  void merge_by_scan(std::vector<TokenId>& s) const {
    std::vector<std::int32_t> ranks(s.size() - 1);
    for (std::size_t i = 0; i + 1 < s.size(); ++i) ranks[i] = rank(s[i], s[i + 1]);
    while (!ranks.empty()) {
      const auto best = std::min_element(ranks.begin(), ranks.end());
      if (*best == INT32_MAX) break;
      const std::size_t i = best - ranks.begin();
      s[i] = find(s[i], s[i + 1])->merged;
      s.erase(s.begin() + i + 1);
      ranks.erase(ranks.begin() + i);
      if (i > 0) ranks[i - 1] = rank(s[i - 1], s[i]);
      if (i < ranks.size()) ranks[i] = rank(s[i], s[i + 1]);
    }
  }

  void merge_by_heap(std::vector<TokenId>& s) const {
    const int n = static_cast<int>(s.size());
    std::vector<int> prev(n), next(n);
    for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1;
    using Entry = std::tuple<std::int32_t, int, TokenId, TokenId>;  // rank, left position, the pair it was for
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
    const auto push = [&](int left) {
      if (left < 0 || next[left] >= n) return;
      if (const Merge* merge = find(s[left], s[next[left]])) heap.emplace(merge->rank, left, s[left], s[next[left]]);
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const auto [r, left, a, b] = heap.top();
      heap.pop();
      const int right = next[left];
      if (prev[left] == -2 || right >= n || s[left] != a || s[right] != b) continue;  // stale: the pair has changed
      s[left] = find(a, b)->merged;
      next[left] = next[right];
      if (next[right] < n) prev[next[right]] = left;
      prev[right] = -2;  // merged away
      push(prev[left]);
      push(left);
    }
    std::vector<TokenId> out;
    for (int i = 0; i < n; i = next[i]) out.push_back(s[i]);
    s.swap(out);
  }

  const BpeModel& m_;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeModel model) : m_(std::move(model)) {
    for (std::size_t i = 0; i < m_.added.size(); ++i)
      added_by_first_byte_[static_cast<std::uint8_t>(m_.added[i].content[0])].push_back(i);
    for (auto& candidates : added_by_first_byte_)  // longest first: leftmost-longest matching
      std::sort(candidates.begin(), candidates.end(),
                [&](std::size_t a, std::size_t b) { return m_.added[a].content.size() > m_.added[b].content.size(); });
  }

  std::vector<TokenId> encode(std::string_view text, Specials specials) const override {
    std::vector<TokenId> ids;
    ids.reserve(text.size() / 3 + 1);
    std::size_t segment = 0, at = 0;
    while (at < text.size()) {
      const AddedToken* added = added_at(text, at, specials);
      if (added == nullptr) {
        ++at;
        continue;
      }
      std::size_t end = at + added->content.size(), before = at;
      if (added->lstrip)
        while (before > segment && is_space(text[before - 1])) --before;
      if (added->rstrip)
        while (end < text.size() && is_space(text[end])) ++end;
      encode_segment(text.substr(segment, before - segment), ids);
      ids.push_back(added->id);
      segment = at = end;
    }
    encode_segment(text.substr(segment), ids);
    return ids;
  }

  std::string decode(const std::vector<TokenId>& ids, bool skip_special) const override {
    std::string out;
    for (TokenId id : ids) {
      if (id < 0 || static_cast<std::size_t>(id) >= m_.kind_of_id.size() || m_.kind_of_id[id] == Kind::none)
        throw std::out_of_range(log::concat("token id ", id, " is not in the vocabulary"));
      if (skip_special && m_.kind_of_id[id] == Kind::special) continue;
      out += m_.bytes_of_id[id];
    }
    return out;
  }

  std::size_t vocab_size() const override { return m_.bytes_of_id.size(); }

  std::optional<TokenId> token_id(std::string_view token) const override {
    for (const auto& added : m_.added)
      if (added.content == token) return added.id;
    const auto it = m_.vocab.find(token_bytes(std::string(token)));
    if (it == m_.vocab.end()) return std::nullopt;
    return it->second;
  }

  bool is_special(TokenId id) const override {
    return id >= 0 && static_cast<std::size_t>(id) < m_.kind_of_id.size() && m_.kind_of_id[id] == Kind::special;
  }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

  const AddedToken* added_at(std::string_view text, std::size_t at, Specials specials) const {
    for (std::size_t i : added_by_first_byte_[static_cast<std::uint8_t>(text[at])]) {
      const AddedToken& t = m_.added[i];
      if (t.special && specials == Specials::as_text) continue;
      if (text.compare(at, t.content.size(), t.content) == 0) return &t;
    }
    return nullptr;
  }

  // Text between added tokens: normalised, cut into pieces by the pre-tokenizer, each piece merged.
  void encode_segment(std::string_view raw, std::vector<TokenId>& ids) const {
    if (raw.empty()) return;
    const std::string normalized = m_.nfc ? to_nfc(raw) : std::string();
    std::vector<std::string_view> pieces{m_.nfc ? std::string_view(normalized) : raw}, cut;
    for (const SplitStep& step : m_.steps) {
      cut.clear();
      for (std::string_view piece : pieces) step.regex->split(piece, cut, step.keep_matches, true);
      pieces.swap(cut);
    }
    for (std::string_view piece : pieces) encode_piece(piece, ids);
  }

  void encode_piece(std::string_view piece, std::vector<TokenId>& ids) const {
    const std::string key(piece);
    if (m_.ignore_merges) {  // Llama 3: a piece that is a token is that token, whatever the merges would make
      const auto it = m_.vocab.find(key);
      if (it != m_.vocab.end()) return ids.push_back(it->second);
    }
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      const auto it = cache_.find(key);
      if (it != cache_.end()) return ids.insert(ids.end(), it->second.begin(), it->second.end()), void();
    }
    std::vector<TokenId> symbols(piece.size());
    std::transform(piece.begin(), piece.end(), symbols.begin(),
                   [&](char c) { return m_.byte_id[static_cast<std::uint8_t>(c)]; });
    PieceMerger(m_).merge(symbols);
    ids.insert(ids.end(), symbols.begin(), symbols.end());
    if (piece.size() > 256) return;  // worth caching: words, not a megabyte of spaces
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= 1 << 17) cache_.clear();  // bounded: a long run of new words must not grow it forever
    cache_.emplace(key, std::move(symbols));
  }

  BpeModel m_;
  std::array<std::vector<std::size_t>, 256> added_by_first_byte_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<TokenId>> cache_;
};

// Bytes 0..255 are ids 0..255; the specials follow.
class ByteTokenizer final : public Tokenizer {
 public:
  explicit ByteTokenizer(std::vector<std::string> specials) : specials_(std::move(specials)) {}

  std::vector<TokenId> encode(std::string_view text, Specials mode) const override {
    std::vector<TokenId> ids;
    ids.reserve(text.size());
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t special = mode == Specials::match ? special_at(text, at) : specials_.size();
      if (special < specials_.size()) {
        ids.push_back(static_cast<TokenId>(256 + special));
        at += specials_[special].size();
      } else {
        ids.push_back(static_cast<std::uint8_t>(text[at++]));
      }
    }
    return ids;
  }

  std::string decode(const std::vector<TokenId>& ids, bool skip_special) const override {
    std::string out;
    for (TokenId id : ids) {
      if (id < 0 || static_cast<std::size_t>(id) >= vocab_size())
        throw std::out_of_range(log::concat("token id ", id, " is not in the vocabulary"));
      if (id < 256)
        out += static_cast<char>(id);
      else if (!skip_special)
        out += specials_[id - 256];
    }
    return out;
  }

  std::size_t vocab_size() const override { return 256 + specials_.size(); }

  std::optional<TokenId> token_id(std::string_view token) const override {
    for (std::size_t i = 0; i < specials_.size(); ++i)
      if (specials_[i] == token) return static_cast<TokenId>(256 + i);
    if (token.size() == 1) return static_cast<std::uint8_t>(token[0]);
    return std::nullopt;
  }

  bool is_special(TokenId id) const override { return id >= 256 && static_cast<std::size_t>(id) < vocab_size(); }

 private:
  std::size_t special_at(std::string_view text, std::size_t at) const {
    std::size_t best = specials_.size();
    for (std::size_t i = 0; i < specials_.size(); ++i)
      if (!specials_[i].empty() && text.compare(at, specials_[i].size(), specials_[i]) == 0 &&
          (best == specials_.size() || specials_[i].size() > specials_[best].size()))
        best = i;
    return best;
  }

  std::vector<std::string> specials_;
};

}  // namespace

std::unique_ptr<Tokenizer> parse_tokenizer_json(std::string_view json_text, const std::string& file) {
  const Reader reader(file);
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    throw TokenizerFileError(log::concat(file, ": not JSON: ", e.what()));
  }
  return std::make_unique<BpeTokenizer>(read_model(root, reader));
}

std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& path) {
  const fs::path file = fs::is_directory(path) ? path / "tokenizer.json" : path;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw TokenizerFileError(
        log::concat(file.string(), ": cannot be read (give a model directory or its tokenizer.json)"));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return parse_tokenizer_json(text, file.string());
}

std::unique_ptr<Tokenizer> make_byte_tokenizer(const std::vector<std::string>& specials) {
  return std::make_unique<ByteTokenizer>(specials);
}

}  // namespace arclight::text
