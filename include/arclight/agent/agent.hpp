#pragma once
// Agents: an episode of a task, run against an LLM (the policy), traced.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "arclight/core/config.hpp"

namespace arclight::agent {

struct LlmResponse {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;
  std::uint64_t policy_version = 0;
};

// The policy as agents see it.
class Llm {
 public:
  virtual ~Llm() = default;
  virtual LlmResponse generate(const std::vector<std::int32_t>& prompt, int max_new_tokens) = 0;
};

// Where an episode's record goes. Policy calls are traced by the LLM wrapper itself.
class Tracer {
 public:
  virtual ~Tracer() = default;
  virtual void llm_call(const std::vector<std::int32_t>& prompt, const LlmResponse& response) = 0;
  // The reward after policy call `step` (0-based).
  virtual void reward(double value, int step) = 0;
  // The episode's outcome figures (success, guesses, accuracy...), once at its end.
  virtual void result(const std::map<std::string, double>& metrics) = 0;
};

class Agent {
 public:
  virtual ~Agent() = default;
  virtual std::string name() const = 0;
  virtual int vocab_size() const = 0;
  // The longest token sequence an episode can reach (prompt and responses).
  virtual int max_sequence() const = 0;
  // A training task (opaque bytes), and the fixed held-out validation tasks.
  virtual std::string make_task(std::mt19937_64& rng) const = 0;
  virtual std::vector<std::string> validation_tasks() const = 0;
  // Runs one episode. Throws on a fault (bad task, broken tool): the attempt fails.
  virtual void run(const std::string& task, Llm& llm, Tracer& tracer) const = 0;
  // The validation figures of a set of episodes, from each one's result metrics (an empty map
  // for an episode that failed): by default each metric's mean over all the episodes.
  virtual std::map<std::string, double> summarize(const std::vector<std::map<std::string, double>>& results) const;
  // Figures that validation results are read against, e.g. {"optimal_guesses": 4.16}.
  virtual std::map<std::string, double> reference_figures() const { return {}; }
};

using AgentFactory = std::function<std::unique_ptr<Agent>(const AgentConfig&)>;

// The registry of agents by name; the built-in ones are there from the start.
void register_agent(const std::string& name, AgentFactory factory);
std::unique_ptr<Agent> make_agent(const AgentConfig& config);  // throws UsageError for an unknown name
std::vector<std::string> agent_names();
// Whether agent `name` runs as outside processes beside each runner rank (external, agl), not in-process.
bool runs_outside(const std::string& name);

// An Llm that traces every call and enforces an episode's limits (calls, time):
// exceeding one throws, and the runner reports a failed attempt.
class TracedLlm : public Llm {
 public:
  TracedLlm(Llm& inner, Tracer& tracer, int max_calls, double timeout_seconds);
  LlmResponse generate(const std::vector<std::int32_t>& prompt, int max_new_tokens) override;

 private:
  Llm& inner_;
  Tracer& tracer_;
  int calls_left_;
  double deadline_;
};

// The optimal mean number of guesses over secrets 1..n (binary search).
double binary_search_mean_guesses(int n);

}  // namespace arclight::agent
