#include "reasoning.hpp"

#include <utility>

#include "text_tags.hpp"

namespace arclight::serve {

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
      const std::size_t held = held_tail(held_, think_close);
      reasoning.append(held_, 0, held);
      held_.erase(0, held);
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
