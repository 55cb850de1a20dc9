#include "arclight/text/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <fstream>
#include <iterator>
#include <mutex>
#include <queue>
#include <unordered_map>

#include "arclight/core/log.hpp"
#include "bpe_model.hpp"
#include "unicode.hpp"

namespace arclight::text {
namespace {

namespace fs = std::filesystem;

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
    for (std::size_t i = 0; i < m_.added.size(); ++i) {
      const std::string& content = m_.added[i].content;
      auto& lengths = added_by_first_byte_[static_cast<std::uint8_t>(content[0])];
      auto it = std::find_if(lengths.begin(), lengths.end(), [&](const auto& l) { return l.first == content.size(); });
      if (it == lengths.end()) it = lengths.insert(lengths.end(), {content.size(), {}});
      it->second.emplace(content, i);  // the first of two alike, as the file lists them
    }
    for (auto& lengths : added_by_first_byte_)  // longest first: leftmost-longest matching
      std::sort(lengths.begin(), lengths.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  }

  std::vector<TokenId> with_special_tokens(std::vector<TokenId> ids) const override {
    ids.insert(ids.begin(), m_.prefix_ids.begin(), m_.prefix_ids.end());
    ids.insert(ids.end(), m_.suffix_ids.begin(), m_.suffix_ids.end());
    return ids;
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
      // lstrip and rstrip take Unicode's White_Space (U+00A0, U+2028, ...), as Hugging Face's do.
      if (added->lstrip)
        for (std::size_t n; (n = white_space_before(text, before)) > 0 && before - n >= segment;) before -= n;
      if (added->rstrip)
        for (std::size_t n; (n = white_space_at(text, end)) > 0;) end += n;
      encode_segment(text.substr(segment, before - segment), segment == 0, ids);
      ids.push_back(added->id);
      segment = at = end;
    }
    encode_segment(text.substr(segment), segment == 0, ids);
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
    // SentencePiece-style decoders take the space of the first word's U+2581 off again.
    std::size_t spaces = 0;
    while (spaces < m_.strip_leading_spaces && spaces < out.size() && out[spaces] == ' ') ++spaces;
    return out.erase(0, spaces);
  }

  std::string piece(TokenId id, bool skip_special, bool at_start) const override {
    if (id < 0 || static_cast<std::size_t>(id) >= m_.kind_of_id.size() || m_.kind_of_id[id] == Kind::none) return "";
    if (at_start) return decode({id}, skip_special);
    return skip_special && m_.kind_of_id[id] == Kind::special ? "" : m_.bytes_of_id[id];
  }

  std::size_t vocab_size() const override { return m_.bytes_of_id.size(); }

  std::optional<TokenId> token_id(std::string_view token) const override {
    for (const auto& added : m_.added)
      if (added.content == token) return added.id;
    const auto it = m_.vocab.find(m_.key_of(std::string(token)));
    if (it == m_.vocab.end()) return std::nullopt;
    return it->second;
  }

  bool is_special(TokenId id) const override {
    return id >= 0 && static_cast<std::size_t>(id) < m_.kind_of_id.size() && m_.kind_of_id[id] == Kind::special;
  }

 private:
  const AddedToken* added_at(std::string_view text, std::size_t at, Specials specials) const {
    for (const auto& [length, tokens] : added_by_first_byte_[static_cast<std::uint8_t>(text[at])]) {
      const auto it = tokens.find(text.substr(at, length));
      if (it == tokens.end()) continue;
      const AddedToken& t = m_.added[it->second];
      if (!(t.special && specials == Specials::as_text)) return &t;
    }
    return nullptr;
  }

  // Text between added tokens: normalised, cut into pieces by the pre-tokenizer, each piece merged. `at_text_start`:
  // the segment opens the input (no added token before it), where Metaspace's "first" puts its replacement.
  void encode_segment(std::string_view raw, bool at_text_start, std::vector<TokenId>& ids) const {
    if (raw.empty()) return;
    const std::string normalized = m_.normalizers.empty() ? std::string() : normalize(raw);
    const std::string_view text = m_.normalizers.empty() ? raw : std::string_view(normalized);
    if (m_.metaspace) return encode_metaspaced(metaspaced(text, at_text_start), ids);
    std::vector<std::string_view> pieces{text}, cut;
    for (const SplitStep& step : m_.steps) {
      cut.clear();
      for (std::string_view piece : pieces) step.regex->split(piece, cut, step.behavior);
      pieces.swap(cut);
    }
    for (std::string_view piece : pieces) encode_piece(piece, ids);
  }

  std::string metaspaced(std::string_view text, bool at_text_start) const {
    const MetaspaceStep& step = *m_.metaspace;
    std::string out = replaced_all(text, " ", step.replacement);
    const bool prepend = step.prepend == MetaspaceStep::Prepend::always ||
                         (step.prepend == MetaspaceStep::Prepend::first && at_text_start);
    if (prepend && !out.empty() && out.compare(0, step.replacement.size(), step.replacement) != 0)
      out.insert(0, step.replacement);
    return out;
  }

  // With split, a piece begins at each replacement (Hugging Face's MergedWithNext: "▁▁a" is "▁", "▁a").
  void encode_metaspaced(std::string_view text, std::vector<TokenId>& ids) const {
    if (!m_.metaspace->split) return encode_piece(text, ids);
    const std::string& mark = m_.metaspace->replacement;
    for (std::size_t begin = 0; begin < text.size();) {
      const std::size_t end = text.find(mark, begin + 1);
      encode_piece(text.substr(begin, end == std::string_view::npos ? end : end - begin), ids);
      begin = end == std::string_view::npos ? text.size() : end;
    }
  }

  std::string normalize(std::string_view raw) const {
    std::string text(raw);
    for (const NormalizerStep& step : m_.normalizers) {
      if (step.type == NormalizerStep::Type::nfc) {
        text = to_nfc(text);
      } else if (step.type == NormalizerStep::Type::prepend) {
        if (!text.empty()) text.insert(0, step.text);
      } else {
        text = replaced_all(text, step.text, step.replacement);
      }
    }
    return text;
  }

  // The symbols BPE starts from: each byte's token (byte-level), or each character's, falling back to its bytes'
  // <0xAB> tokens, or else to the unknown token (characters).
  std::vector<TokenId> initial_symbols(std::string_view piece) const {
    std::vector<TokenId> symbols;
    symbols.reserve(piece.size());
    if (m_.byte_level) {
      for (char c : piece) symbols.push_back(m_.byte_id[static_cast<std::uint8_t>(c)]);
      return symbols;
    }
    for (std::size_t at = 0; at < piece.size();) {
      const std::size_t n = std::max<std::size_t>(1, utf8_sequence_length(piece, at));  // an invalid byte alone
      const auto it = m_.vocab.find(std::string(piece.substr(at, n)));
      if (it != m_.vocab.end()) {
        symbols.push_back(it->second);
      } else if (std::all_of(piece.begin() + at, piece.begin() + at + n,
                             [&](char c) { return m_.byte_id[static_cast<std::uint8_t>(c)] >= 0; })) {
        for (std::size_t i = at; i < at + n; ++i) symbols.push_back(m_.byte_id[static_cast<std::uint8_t>(piece[i])]);
      } else if (m_.unk && !(m_.fuse_unk && !symbols.empty() && symbols.back() == *m_.unk)) {
        symbols.push_back(*m_.unk);
      }
      at += n;
    }
    return symbols;
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
    std::vector<TokenId> symbols = initial_symbols(piece);
    PieceMerger(m_).merge(symbols);
    ids.insert(ids.end(), symbols.begin(), symbols.end());
    if (piece.size() > 256) return;  // worth caching: words, not a megabyte of spaces
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= 1 << 17) cache_.clear();  // bounded: a long run of new words must not grow it forever
    cache_.emplace(key, std::move(symbols));
  }

  BpeModel m_;
  // The added tokens by their first byte, then by length (longest first), then by content: a few lookups at each
  // byte where Gemma's 6,000 "<unused...>" tokens would be as many comparisons at each '<'.
  std::array<std::vector<std::pair<std::size_t, std::unordered_map<std::string_view, std::size_t>>>, 256>
      added_by_first_byte_;
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

  std::string piece(TokenId id, bool skip_special, bool) const override {
    return id < 0 || static_cast<std::size_t>(id) >= vocab_size() ? "" : decode({id}, skip_special);
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
  return std::make_unique<BpeTokenizer>(read_bpe_model(json_text, file));
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

std::unique_ptr<Tokenizer> make_scratch_chat_tokenizer() {
  return make_byte_tokenizer({"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
}

}  // namespace arclight::text
