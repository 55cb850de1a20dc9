#pragma once
// The model's tool calls in Hermes/Qwen form, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, read back
// from its answer. No HTTP, no engine: a pure function of the text.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arclight::serve {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ToolCallAnswer {
  std::string content;  // the text before the first call, trimmed
  std::vector<ParsedToolCall> calls;
};

// The calls after the last </think>, each ended by the first </tool_call> before which it is whole JSON, the last one
// by the end of the text too. nullopt when the text has no tool call, or one that is malformed (not JSON, no name,
// text between or after the calls): the answer is then plain text.
std::optional<ToolCallAnswer> parse_tool_calls(std::string_view text);

// Where an answer's tool calls begin: its first <tool_call> after the last </think>; npos where it has none.
std::size_t tool_calls_start(std::string_view text);
// How much of an answer's text so far may be shown before its tool calls are known: up to its first <tool_call>, less
// a tail that may be the start of one (a stream shows the text before the calls and sends them whole at the end).
std::size_t text_before_tool_calls(std::string_view text);

// "call_" and 24 random letters and digits.
std::string new_tool_call_id();

}  // namespace arclight::serve
