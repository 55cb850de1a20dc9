// external: the user's agent, run as processes beside each runner rank (app/external_runner.cpp). What the rest of
// the job needs from it in-process is its tasks (JSON Lines files) and the vocabulary of its text.
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "arclight/agent/agent.hpp"
#include "arclight/agent/agent_processes.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/text/tokenizer.hpp"
#include "agent_launch.hpp"

namespace arclight::agent {
namespace {

// The non-blank lines of a JSON Lines file, each one task (passed to the agent as it is).
std::vector<std::string> read_task_lines(const std::string& path, const char* key) {
  std::ifstream in(path);
  if (!in) throw UsageError(log::concat("agent.", key, " = \"", path, "\": cannot read it"));
  std::vector<std::string> tasks;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) tasks.push_back(line);
  }
  if (tasks.empty()) throw UsageError(log::concat("agent.", key, " = \"", path, "\" holds no task"));
  return tasks;
}

class ExternalAgent : public Agent {
 public:
  explicit ExternalAgent(const AgentConfig& c)
      : name_(c.name),
        tasks_(c.tasks.empty()
                   ? throw UsageError("agent.name = \"" + c.name + "\" needs agent.tasks (a JSON Lines file)")
                   : read_task_lines(c.tasks, "tasks")),
        validation_(c.validation_tasks.empty() ? std::vector<std::string>{}
                                               : read_task_lines(c.validation_tasks, "validation_tasks")),
        vocab_(c.vocab_size > 0 ? c.vocab_size : static_cast<int>(text::make_scratch_chat_tokenizer()->vocab_size())) {
    if (c.command.empty()) throw UsageError("agent.name = \"" + c.name + "\" needs agent.command (the agent's argv)");
    resolve_command(c.command.front(), {});  // on every rank, before any rank starts an agent: UsageError if not
    find_agent_guard();                      // each agent runs under it
  }

  std::string name() const override { return name_; }
  // A from-scratch model's vocabulary: agent.vocab_size, else the byte tokenizer's (a Hugging Face model brings its
  // own).
  int vocab_size() const override { return vocab_; }
  int max_sequence() const override { return 0; }  // unknown: the endpoint refuses what exceeds model.max_seq
  std::string make_task(std::mt19937_64& rng) const override {
    return tasks_[std::uniform_int_distribution<std::size_t>(0, tasks_.size() - 1)(rng)];
  }
  std::vector<std::string> validation_tasks() const override { return validation_; }
  void run(const std::string&, Llm&, Tracer&) const override {
    throw Error("external agents run as processes of the runner rank, not in-process");
  }

 private:
  std::string name_;  // external, or agl (Agent Lightning's runner, app/external_runner.cpp)
  std::vector<std::string> tasks_, validation_;
  int vocab_;
};

}  // namespace

std::unique_ptr<Agent> make_external_agent(const AgentConfig& config) {
  return std::make_unique<ExternalAgent>(config);
}

}  // namespace arclight::agent
