#include <chrono>
#include <mutex>

#include "arclight/agent/agent.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::agent {

std::unique_ptr<Agent> make_guess_agent(const AgentConfig& config);
std::unique_ptr<Agent> make_arith_agent(const AgentConfig& config);
std::unique_ptr<Agent> make_external_agent(const AgentConfig& config);

namespace {
std::mutex registry_mutex;
std::map<std::string, AgentFactory>& registry() {
  static std::map<std::string, AgentFactory> agents{
      {"guess", make_guess_agent},
      {"arith", make_arith_agent},
      {"external", make_external_agent},
      {"agl", make_external_agent}};  // Agent Lightning's runner as the outside process
  return agents;
}
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::map<std::string, double> Agent::summarize(const std::vector<std::map<std::string, double>>& results) const {
  std::map<std::string, double> means;
  for (const auto& metrics : results)
    for (const auto& [name, value] : metrics) means[name] += value;
  for (auto& [name, sum] : means) sum /= double(results.size());
  return means;
}

void register_agent(const std::string& name, AgentFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[name] = std::move(factory);
}

std::unique_ptr<Agent> make_agent(const AgentConfig& config) {
  AgentFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto it = registry().find(config.name);
    if (it == registry().end()) {
      std::string known;
      for (const auto& [name, f] : registry()) known += (known.empty() ? "" : ", ") + name;
      throw UsageError("agent.name = \"" + config.name + "\": no such agent (known: " + known + ")");
    }
    factory = it->second;
  }
  return factory(config);
}

std::vector<std::string> agent_names() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::vector<std::string> names;
  for (const auto& [name, f] : registry()) names.push_back(name);
  return names;
}

TracedLlm::TracedLlm(Llm& inner, Tracer& tracer, int max_calls, double timeout_seconds)
    : inner_(inner), tracer_(tracer), calls_left_(max_calls), deadline_(now_seconds() + timeout_seconds) {}

LlmResponse TracedLlm::generate(const std::vector<std::int32_t>& prompt, int max_new_tokens) {
  if (calls_left_-- <= 0) throw Error("the episode exceeded agent.max_policy_calls");
  if (now_seconds() > deadline_) throw Error("the episode exceeded agent.episode_timeout_seconds");
  LlmResponse response = inner_.generate(prompt, max_new_tokens);
  tracer_.llm_call(prompt, response);
  return response;
}

double binary_search_mean_guesses(int n) {
  // Guessing the middle of [lo, hi] finds each secret at its depth in a balanced search tree.
  std::function<double(int, int, int)> total = [&](int lo, int hi, int depth) -> double {
    if (lo > hi) return 0.0;
    int mid = (lo + hi) / 2;
    return depth + total(lo, mid - 1, depth + 1) + total(mid + 1, hi, depth + 1);
  };
  return n > 0 ? total(1, n, 1) / n : 0.0;
}

bool runs_outside(const std::string& name) { return name == "external" || name == "agl"; }

}  // namespace arclight::agent
