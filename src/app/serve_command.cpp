#include "serve_command.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>

#include "arclight/agent/agent.hpp"
#include "arclight/app/run.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "endpoint.hpp"
#include "generation_engine.hpp"

namespace arclight::app {
namespace {

Config read_config(const std::string& path) {
  if (path.empty()) return Config{};
  std::ifstream in(path);
  if (!in) throw UsageError("serve: cannot read the config file " + path);
  return config_from_file(path);
}

std::string bearer_token() {
  if (const char* given = std::getenv("ARCLIGHT_API_KEY"); given && *given) return given;
  std::random_device entropy;
  char token[33];
  for (int i = 0; i < 32; i += 8) std::snprintf(token + i, 9, "%08x", entropy());
  return token;
}

}  // namespace

int serve_model(const Invocation& inv) {
  Config config = read_config(inv.serve_config);
  if (!inv.serve_host.empty()) config.runner.http_host = inv.serve_host;
  if (inv.serve_port >= 0) config.runner.http_port = inv.serve_port;
  const ServedText text = served_text(config.model);
  reasoning_parser_of(config.runner, text.chat);  // before the weights load: a bad pairing is said at once
  // The served vocabulary: the model's (hf: a tokenizer may know more ids, refused in prompts), else what the text
  // needs, or more if the agent's tokens need it.
  const int agent_vocab = agent::runs_outside(config.agent.name) ? 0 : agent::make_agent(config.agent)->vocab_size();
  const int vocab = config.model.source == ModelSource::hf
                        ? agent_vocab
                        : std::max<int>(static_cast<int>(text.tokenizer->vocab_size()), agent_vocab);
  model::Policy policy(config.model, vocab, config.run.seed);
  GenerationEngine engine(policy, config.runner.decode_rows);
  engine.resume(0);
  const std::string token = bearer_token();
  serve::HttpServer server(endpoint_options(config, token));
  serve::add_openai_routes(server, engine, served_model(config, text, policy), nullptr);
  server.start();
  std::printf("http://%s:%d/v1\n", serve::url_host(config.runner.http_host).c_str(), server.port());
  if (!std::getenv("ARCLIGHT_API_KEY")) std::printf("bearer token: %s\n", token.c_str());
  std::fflush(stdout);
  while (!stop_signal_received()) {
    if (!engine.step()) engine.wait_for_work(0.05);
  }
  engine.close("the server is stopping");
  server.stop();
  log::info("serve: stopped after ", engine.tokens_generated(), " tokens");
  return exit_ok;
}

}  // namespace arclight::app
