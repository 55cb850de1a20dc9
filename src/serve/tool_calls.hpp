#pragma once
// The model's tool calls read back from its answer: in Hermes/Qwen form, `<tool_call>{"name": ..., "arguments":
// {...}}</tool_call>`, in Llama 3.1's JSON form, the whole answer `{"name": ..., "parameters": {...}}` (calls
// apart by ";", as vLLM's llama3_json parser reads them), or in Mistral's, `[TOOL_CALLS][{"name": ..., "arguments":
// {...}}, ...]` (vLLM's mistral parser). No HTTP, no engine: a pure function of the text.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arclight::serve {

enum class ToolFormat { hermes, llama3_json, mistral };

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ToolCallAnswer {
  std::string content;  // the text before the first call, less the blanks before the call
  std::vector<ParsedToolCall> calls;
};

// Hermes: the calls after the last </think>, each ended by the first </tool_call> before which it is whole JSON, the
// last one by the end of the text too; text between or after them is dropped (vLLM's Hermes parser). Llama 3.1: JSON
// objects from the answer's first character that is no blank (a <|python_tag|> before them allowed) to its end, text
// after them making it text (vLLM's llama3_json). nullopt when the text has no tool call, or one that is malformed
// (not JSON, no name): the answer is then plain text. Mistral: a JSON list of calls, each with "name" and "arguments",
// after the first [TOOL_CALLS] (the special token's text: such answers are read with special tokens shown), other
// [TOOL_CALLS] left out, as vLLM's mistral parser takes them; failing that, the list from the first "[{" to the last
// "}]". Unlike vLLM, arguments other than an object, and an empty list, make the answer text.
std::optional<ToolCallAnswer> parse_tool_calls(std::string_view text, ToolFormat format = ToolFormat::hermes);

// Where an answer's tool calls begin: its first <tool_call> after the last </think> (none inside a <think> not yet
// closed; Llama 3.1: its first character that is no blank, where that begins a call; Mistral: its first
// [TOOL_CALLS]); npos where it has none.
std::size_t tool_calls_start(std::string_view text, ToolFormat format = ToolFormat::hermes);
// How much of an answer's text so far may be shown before its tool calls are known: all of a <think> block under way,
// else up to the first <tool_call> after the last </think>, less a tail that may be the start of one (a stream shows
// the text before the calls and sends them whole at the end).
// Llama 3.1: nothing while the answer may be a call (blanks so far, or "{" or <|python_tag|> first), else all of it.
// Mistral: up to its first [TOOL_CALLS], less a tail that may be the start of one.
std::size_t text_before_tool_calls(std::string_view text, ToolFormat format = ToolFormat::hermes);

// text_before_tool_calls of an answer that grows (a stream asks after every token), reading each part of it about once:
// over the whole text at every token, a long answer took time in its length squared.
class StreamedToolCalls {
 public:
  explicit StreamedToolCalls(ToolFormat format) : format_(format) {}
  // `text`: the answer so far; the text given to the call before is its beginning.
  std::size_t text_before(std::string_view text);

 private:
  ToolFormat format_;
  std::size_t scanned_ = 0;                          // the text's length at the call before
  std::size_t opened_ = std::string_view::npos;      // the last <think>
  std::size_t closed_ = std::string_view::npos;      // the last </think>
  std::size_t first_call_ = std::string_view::npos;  // the first <tool_call> after it
};

// "call_" and 24 random letters and digits; for Mistral, 9 letters and digits, as vLLM gives them (its templates take
// back only ids 9 characters long).
std::string new_tool_call_id(ToolFormat format = ToolFormat::hermes);

}  // namespace arclight::serve
