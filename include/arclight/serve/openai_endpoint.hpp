#pragma once
// The OpenAI-compatible endpoint of a runner rank: GET /v1/models, POST /v1/completions, POST /v1/chat/completions,
// also under /rollout/{rollout_id}/attempt/{attempt_id}/v1/... (or with the headers x-rollout-id and x-attempt-id),
// where each choice is recorded as a policy call of that attempt. Answers carry the prompt's and each choice's token
// ids (vLLM's prompt_token_ids and choices[].token_ids).
#include <optional>
#include <string>
#include <vector>

#include "arclight/serve/generator.hpp"
#include "arclight/serve/http_server.hpp"
#include "arclight/serve/runner_api.hpp"
#include "arclight/text/chat_template.hpp"
#include "arclight/text/tokenizer.hpp"

namespace arclight::serve {

// qwen3: an answer begins with reasoning unless the request turned thinking off (or the prompt opened <think>, as
// DeepSeek R1's and Qwen3 Thinking-2507's do); deepseek_r1: always (it ignores enable_thinking).
enum class ReasoningParser { none, qwen3, deepseek_r1 };

struct ServedModel {
  std::string name;                                 // what /v1/models lists and answers name
  const text::Tokenizer* tokenizer = nullptr;       // outlives the server
  std::optional<text::ChatTemplate> chat_template;  // none: /v1/chat/completions answers 400
  int max_context = 2048;                           // prompt and answer together, in tokens
  std::vector<text::TokenId> stop_ids;              // where every answer ends: the template's stop tokens, EOS
  // runner.reasoning_parser: chat answers tell <think>'s reasoning apart, as vLLM's parsers of these names do
  ReasoningParser reasoning_parser = ReasoningParser::none;
  // The model's token ids: a prompt's must be below (a tokenizer may know more: Gemma 3's image token); 0: any the
  // tokenizer knows
  int vocab_size = 0;
};

// Registers the routes on `server` (before it starts). `generator`, the model's tokenizer and `tracer` (nullptr:
// every traced request is 404) outlive the server.
void add_openai_routes(HttpServer& server, Generator& generator, ServedModel model, CallTracer* tracer);

}  // namespace arclight::serve
