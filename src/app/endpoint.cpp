#include "endpoint.hpp"

#include <algorithm>
#include <chrono>

#include "arclight/core/error.hpp"

namespace arclight::app {

ServedText served_text(const ModelConfig& model) {
  if (model.source != ModelSource::hf) return {text::make_scratch_chat_tokenizer(), served_chat_template(model)};
  return {text::load_tokenizer(model.path), served_chat_template(model)};
}

text::ChatTemplate served_chat_template(const ModelConfig& model) {
  if (model.source != ModelSource::hf) return text::ChatTemplate::named("chatml");
  return text::load_chat_template(model.path, model.chat_template);
}

serve::ReasoningParser reasoning_parser_of(const RunnerConfig& runner, const text::ChatTemplate& chat) {
  if (runner.reasoning_parser == "none") return serve::ReasoningParser::none;
  if (!chat.reasons())
    throw UsageError("runner.reasoning_parser = " + runner.reasoning_parser + " reads the <think> block a thinking " +
                     "model's answer begins with (qwen3, qwen3-thinking-2507, deepseek-r1); the served chat " +
                     "template, " + chat.name + ", does not think");
  return runner.reasoning_parser == "qwen3" ? serve::ReasoningParser::qwen3 : serve::ReasoningParser::deepseek_r1;
}

serve::ServedModel served_model(const Config& config, const ServedText& text, const model::Policy& policy) {
  const ModelConfig& model = config.model;
  std::string name = "arclight-scratch";
  if (model.source == ModelSource::hf) {
    name = model.path;
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    name = name.substr(name.find_last_of('/') + 1);
  }
  serve::ServedModel served;
  served.name = name;
  served.tokenizer = text.tokenizer.get();
  served.chat_template = text.chat;
  served.max_context = policy.architecture().max_seq;
  served.vocab_size = policy.vocab_size();
  served.stop_ids = text.chat.stop_ids(*text.tokenizer);
  served.reasoning_parser = reasoning_parser_of(config.runner, text.chat);
  return served;
}

serve::HttpServerOptions endpoint_options(const Config& config, const std::string& secret) {
  serve::HttpServerOptions o;
  o.host = config.runner.http_host;
  o.port = config.runner.http_port;
  o.bearer_token = secret;
  o.max_body_bytes = config.runner.http_max_body_bytes;
  const std::chrono::milliseconds timeout{static_cast<std::int64_t>(1000 * config.runner.http_timeout_seconds)};
  o.read_timeout = o.write_timeout = o.idle_timeout = o.request_timeout = timeout;
  o.body_timeout = std::max(o.body_timeout, timeout);  // a whole body takes at least as long as one read may wait
  // A thread per connection in a request (one kept alive between requests yields it to a waiting connection): every
  // row of the batch, and each agent's pool of connections (examples/agent_client.py keeps 64; httpx up to 100). At
  // most 1,024: agent.workers may be 4,096, and a node's ranks share its process limit (often 32,768).
  constexpr int max_threads = 1024;
  o.worker_threads = std::min(max_threads, std::max(64, 2 * config.runner.decode_rows + 64 * config.agent.workers));
  return o;
}

}  // namespace arclight::app
