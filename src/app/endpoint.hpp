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

// The endpoint's description of the policy (its name: the model directory's, or "arclight-scratch").
serve::ServedModel served_model(const ModelConfig& model, const ServedText& text, const model::Policy& policy);

// runner.http_* with the job's secret as the bearer token.
serve::HttpServerOptions endpoint_options(const Config& config, const std::string& secret);

}  // namespace arclight::app
