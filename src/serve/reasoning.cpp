#include "reasoning.hpp"

#include <algorithm>
#include <utility>

namespace arclight::serve {
namespace {

constexpr std::string_view think_open = "<think>", think_close = "</think>";

// The length of `text`'s longest tail that begins `tag` without being all of it.
std::size_t tail_that_may_begin(std::string_view text, std::string_view tag) {
  for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (tag.substr(0, n) == text.substr(text.size() - n)) return n;
  return 0;
}

}  // namespace

void StreamedReasoning::take(std::string_view piece, std::string& reasoning, std::string& content) {
  held_ += piece;
  if (part_ == Part::start) {
    if (held_.size() < think_open.size() && think_open.substr(0, held_.size()) == held_) return;
    if (held_.rfind(think_open, 0) == 0) held_.erase(0, think_open.size());
    part_ = Part::reasoning;
  }
  if (part_ == Part::reasoning) {
    const std::size_t close = held_.find(think_close);
    if (close == std::string::npos) {
      const std::size_t keep = tail_that_may_begin(held_, think_close);
      reasoning.append(held_, 0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return;
    }
    reasoning.append(held_, 0, close);
    held_.erase(0, close + think_close.size());
    part_ = Part::content;
  }
  content += held_;
  held_.clear();
}

std::string StreamedReasoning::rest() { return std::exchange(held_, std::string()); }

ReasoningSplit split_reasoning(std::string_view text) {
  StreamedReasoning stream;
  ReasoningSplit split;
  std::string content;
  stream.take(text, split.reasoning, content);
  split.reasoning += stream.rest();
  if (!content.empty()) split.content = std::move(content);
  return split;
}

}  // namespace arclight::serve
