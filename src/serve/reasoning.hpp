#pragma once
// An answer's reasoning told apart from its content, as vLLM's reasoning parsers qwen3 and deepseek_r1 do
// (runner.reasoning_parser): a <think> that begins the answer is dropped, the text up to the first </think> is the
// reasoning, the text after it the content; an answer with no </think> is all reasoning (it was cut short). No HTTP,
// no engine: a pure function of the text, given whole or as it grows.
#include <optional>
#include <string>
#include <string_view>

namespace arclight::serve {

struct ReasoningSplit {
  std::string reasoning;
  std::optional<std::string> content;  // none before a </think>, or where nothing follows it
};

// The split of an answer's text as a stream of it gives it out: pieces in, reasoning and content out, a tail that may
// begin "<think>" (at the start) or "</think>" held until the text after it tells.
class StreamedReasoning {
 public:
  // The answer's next piece of text: what it adds to the reasoning and to the content given so far.
  void take(std::string_view piece, std::string& reasoning, std::string& content);
  // The answer ended: the tail still held, which is reasoning (no </think> came).
  std::string rest();

 private:
  enum class Part { start, reasoning, content };
  Part part_ = Part::start;
  std::string held_;
};

ReasoningSplit split_reasoning(std::string_view text);

}  // namespace arclight::serve
