#pragma once
// What every OpenAI-compatible endpoint of the job shares (app-private): the served text (tokenizer and chat
// template), the model's name, and the server's options from [runner].
#include <memory>
#include <string>

#include "arclight/core/config.hpp"
#include "arclight/model/policy.hpp"
#include "arclight/serve/http_server.hpp"
#include "arclight/serve/openai_endpoint.hpp"
#include "arclight/text/chat_template.hpp"
#include "arclight/text/tokenizer.hpp"

namespace arclight::app {

// The model directory's tokenizer and chat template, or bytes with ChatML for a from-scratch model.
struct ServedText {
  std::unique_ptr<text::Tokenizer> tokenizer;
  text::ChatTemplate chat;
};
ServedText served_text(const ModelConfig& model);
text::ChatTemplate served_chat_template(const ModelConfig& model);  // served_text's template alone

// runner.reasoning_parser, checked against the served template: qwen3 and deepseek_r1 read <think> blocks, which only
// a template that thinks (Qwen3's, DeepSeek R1's) leads the model to write; another is bad input.
serve::ReasoningParser reasoning_parser_of(const RunnerConfig& runner, const text::ChatTemplate& chat);

// The endpoint's description of the policy (its name: the model directory's, or "arclight-scratch").
serve::ServedModel served_model(const Config& config, const ServedText& text, const model::Policy& policy);

// runner.http_* with the job's secret as the bearer token.
serve::HttpServerOptions endpoint_options(const Config& config, const std::string& secret);

}  // namespace arclight::app
