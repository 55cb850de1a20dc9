#pragma once
// A Unicode regular expression of a tokenizer.json pre-tokenizer, compiled by PCRE2 (UTF, UCP, JIT where the
// platform has it). Hugging Face compiles these with Oniguruma; the patterns in use (\p{L}, \p{N}, \s, (?i:...),
// (?!\S)) mean the same in PCRE2.
#include <string>
#include <string_view>
#include <vector>

namespace arclight::text {

class Regex {
 public:
  // Throws std::invalid_argument with PCRE2's message for a pattern it cannot compile.
  explicit Regex(const std::string& pattern, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends to `pieces` each match and, where `keep_gaps`, each stretch between matches, in order (the Split
  // pre-tokenizer's "Isolated" behaviour; without gaps: "Removed" kept inverted). Bytes that are not valid UTF-8
  // never match, so they land in gaps. A pattern that backtracks past PCRE2's match limit on `text` (a hostile
  // tokenizer.json's "(a+)+$") throws std::runtime_error naming the pattern, rather than running for ever.
  void split(std::string_view text, std::vector<std::string_view>& pieces, bool keep_matches = true,
             bool keep_gaps = true) const;

 private:
  std::string pattern_;
  void* code_;  // pcre2_code_8
};

}  // namespace arclight::text
