#pragma once
// A Unicode regular expression of a tokenizer.json pre-tokenizer, compiled by PCRE2 (UTF, UCP, JIT where the
// platform has it). Hugging Face compiles these with Oniguruma; the patterns in use (\p{L}, \p{N}, \s, (?i:...),
// (?!\S)) mean the same in PCRE2.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace arclight::text {

// What a Split pre-tokenizer does with each match (Hugging Face's SplitDelimiterBehavior): a piece of its own, dropped,
// the end of the stretch before it (Gemma's files say so of spaces, which their normalizer has replaced already), or
// the start of the stretch after it. Where a match follows a match, it is a piece of its own in the last two.
enum class SplitBehavior : std::uint8_t { isolated, removed, merged_with_previous, merged_with_next };

class Regex {
 public:
  // Throws std::invalid_argument with PCRE2's message for a pattern it cannot compile.
  explicit Regex(const std::string& pattern, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends to `pieces` the text cut at each match, in order, each match kept as `behavior` says; no piece is empty.
  // Bytes that are not valid UTF-8 never match, so they land between matches. A pattern that backtracks past PCRE2's
  // match limit on `text` (a hostile tokenizer.json's "(a+)+$") throws std::runtime_error naming the pattern, rather
  // than running for ever.
  void split(std::string_view text, std::vector<std::string_view>& pieces,
             SplitBehavior behavior = SplitBehavior::isolated) const;

 private:
  std::string pattern_;
  void* code_;  // pcre2_code_8
};

}  // namespace arclight::text
