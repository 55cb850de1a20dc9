#pragma once
// OpenAI request bodies to typed requests, with no HTTP in it (a fuzzer drives it). Throws HttpError 400 in OpenAI's
// shape, naming the field, for malformed JSON, a field of the wrong type or a value out of range.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "arclight/serve/http_server.hpp"
#include "arclight/text/chat_template.hpp"

namespace arclight::serve {

inline constexpr int max_top_logprobs = 20;
inline constexpr int max_choices = 128;
// Choices of one completions request (prompts x n): each is queued at once, and a request of a million one-token
// prompts fits the body limit.
inline constexpr std::size_t max_request_choices = 1024;

struct Sampling {
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;                  // vLLM's extension (Qwen's cards ask for 20): the k most likely tokens; 0 or -1: all
  std::optional<int> max_tokens;  // none: as many as the context leaves (chat) or 16 (completions)
  std::vector<std::string> stop;  // strings that end a choice, matched on its text
  std::vector<std::int32_t> stop_token_ids;  // vLLM's: tokens that end a choice (kept in its ids, not in its text)
  int n = 1;
  std::optional<std::uint64_t> seed;
  bool logprobs = false;  // each token's log-prob in the answer
  int top_logprobs = 0;   // alternatives per token, 0..20
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

using TokenList = std::vector<std::int32_t>;
using Prompt = std::variant<std::string, TokenList>;

struct CompletionRequest {
  std::string model;
  std::vector<Prompt> prompts;  // one choice set each
  Sampling sampling;
  bool add_special_tokens = true;  // vLLM's: a text prompt gets the tokenizer's post-processor tokens (Llama's BOS)
};

enum class ToolChoice : std::uint8_t { none, automatic, required, named };

struct ChatRequest {
  std::string model;
  text::Conversation conversation;  // tools included, unless tool_choice is none
  ToolChoice tool_choice = ToolChoice::automatic;
  std::string tool_name;  // ToolChoice::named
  // false: an answer's first tool call only (as vLLM since 0.11: the model still writes them all, the trace keeps them)
  bool parallel_tool_calls = true;
  Sampling sampling;
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking, as vLLM takes it (Qwen3)
};

CompletionRequest parse_completion_request(std::string_view body);
ChatRequest parse_chat_request(std::string_view body);

}  // namespace arclight::serve
