#include "regex.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace arclight::text {
namespace {

pcre2_code* code_of(void* p) { return static_cast<pcre2_code*>(p); }

// JIT code runs on a stack of its own: PCRE2's default 32 KiB fails on long runs of a repeated class, so each
// thread gets a larger one, made on first use.
pcre2_jit_stack* thread_jit_stack(void*) {
  struct Stack {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    ~Stack() { pcre2_jit_stack_free(stack); }
  };
  thread_local Stack stack;
  return stack.stack;
}

struct MatchResources {
  pcre2_match_data* data;
  pcre2_match_context* context;
  ~MatchResources() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
  }
};

// \s and \S as Hugging Face's regex engine (Oniguruma) reads them: Unicode's White_Space. PCRE2's \s also takes
// U+180E (Mongolian vowel separator), which Unicode 6.3 took out of White_Space: "\u180e's" split otherwise.
std::string with_white_space_property(const std::string& pattern) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char escaped = pattern[++i];
    if (escaped == 's') {
      out += "\\p{White_Space}";
    } else if (escaped == 'S') {
      out += "\\P{White_Space}";
    } else if (escaped == 'Q') {  // quoted up to \E: as written
      const std::size_t end = std::min(pattern.find("\\E", i + 1), pattern.size());
      out.append(pattern, i - 1, end - (i - 1));
      i = end - 1;
    } else {
      out += '\\';
      out += escaped;
    }
  }
  return out;
}

// The next character's offset after `at` in UTF-8 text (a byte on, where the text is not UTF-8).
std::size_t next_character(std::string_view text, std::size_t at) {
  ++at;
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
  return at;
}

}  // namespace

Regex::Regex(const std::string& pattern_text, bool literal) : pattern_(pattern_text) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2 takes no UCP with LITERAL (a Split's {"String": ...}); nothing in a literal depends on it.
  const std::uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  const std::string pattern = literal ? pattern_text : with_white_space_property(pattern_text);
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::invalid_argument("regex \"" + pattern_text + "\" at offset " + std::to_string(offset) + ": " +
                                reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // where JIT is missing, pcre2_match interprets: slower, same answer
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(code_of(code_)); }

void Regex::split(std::string_view text, std::vector<std::string_view>& pieces, SplitBehavior behavior) const {
  thread_local MatchResources match{pcre2_match_data_create(16, nullptr), pcre2_match_context_create(nullptr)};
  thread_local bool stack_assigned = (pcre2_jit_stack_assign(match.context, thread_jit_stack, nullptr), true);
  (void)stack_assigned;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const auto piece = [&](std::size_t begin, std::size_t end) {
    if (end > begin) pieces.push_back(text.substr(begin, end - begin));
  };
  // start: where the text not yet in a piece begins. merged_with_next holds the last match, from held_begin to
  // start, for the stretch after it.
  std::size_t start = 0, at = 0;
  std::optional<std::size_t> held_begin;
  const auto stretch_to = [&](std::size_t end) {  // the text from start to `end`, which no match cuts
    if (end > start)
      piece(held_begin.value_or(start), end);
    else if (held_begin)
      piece(*held_begin, start);  // a held match before a match: a piece of its own
    held_begin.reset();
  };
  while (at <= text.size()) {
    const int rc = pcre2_match(code_of(code_), subject, text.size(), at, 0, match.data, match.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw std::runtime_error("the tokenizer's pattern \"" + pattern_ + "\" failed on a text of " +
                               std::to_string(text.size()) + " bytes: " + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.data);
    const std::size_t begin = ovector[0], end = ovector[1];
    // An empty match (\b, a lookahead) cuts the text there, as Hugging Face's splits do.
    at = end == begin ? next_character(text, begin) : end;
    switch (behavior) {
      case SplitBehavior::isolated: piece(start, begin), piece(begin, end); break;
      case SplitBehavior::removed: piece(start, begin); break;
      case SplitBehavior::merged_with_previous: piece(begin > start ? start : begin, end); break;
      case SplitBehavior::merged_with_next: stretch_to(begin), held_begin = begin; break;
    }
    start = end;
  }
  if (behavior == SplitBehavior::merged_with_next) return stretch_to(text.size());
  piece(start, text.size());
}

}  // namespace arclight::text
