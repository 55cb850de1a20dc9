// guess: find a hidden number in 1..N; after each guess the environment says higher, lower or correct.
#include <algorithm>
#include <cmath>
#include <string>

#include "arclight/agent/agent.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::agent {
namespace {

class GuessAgent : public Agent {
 public:
  explicit GuessAgent(const AgentConfig& c) : n_(c.guess_max), max_turns_(c.max_turns) {
    if (n_ < 2 || n_ > 1000) throw UsageError(log::concat("agent.guess_max = ", n_, ": expected 2..1000"));
    if (max_turns_ < 1) throw UsageError("agent.max_turns must be at least 1");
  }
  // Tokens: 0 BOS, 1..N the numbers, then higher, lower, correct.
  int bos() const { return 0; }
  int higher() const { return n_ + 1; }
  int lower() const { return n_ + 2; }
  int correct() const { return n_ + 3; }

  std::string name() const override { return "guess"; }
  int vocab_size() const override { return n_ + 4; }
  int max_sequence() const override { return 1 + 2 * max_turns_; }
  std::string make_task(std::mt19937_64& rng) const override {
    return std::to_string(std::uniform_int_distribution<int>(1, n_)(rng));
  }
  std::vector<std::string> validation_tasks() const override {
    std::vector<std::string> tasks;
    for (int s = 1; s <= n_; ++s) tasks.push_back(std::to_string(s));
    return tasks;
  }
  // Guesses count only where the secret was found: the mean over solved episodes, comparable
  // with binary search's optimum.
  std::map<std::string, double> summarize(const std::vector<std::map<std::string, double>>& results) const override {
    std::map<std::string, double> figures = Agent::summarize(results);
    double solved = 0, guesses = 0;
    for (const auto& metrics : results) {
      const auto success = metrics.find("success"), turns = metrics.find("guesses");
      if (success == metrics.end() || turns == metrics.end()) continue;
      solved += success->second;
      guesses += success->second * turns->second;
    }
    if (figures.count("guesses")) figures["guesses"] = guesses / std::max(1.0, solved);
    return figures;
  }
  std::map<std::string, double> reference_figures() const override {
    return {{"optimal_guesses", binary_search_mean_guesses(n_)}};
  }

  // Reward after each guess: the bits of the interval it removed (log2 old/new size);
  // the correct guess removes what was left and adds 1.
  void run(const std::string& task, Llm& llm, Tracer& tracer) const override {
    int secret = 0;
    try {
      secret = std::stoi(task);
    } catch (const std::exception&) {
      throw Error("guess: task '" + task + "' is not a number");
    }
    if (secret < 1 || secret > n_) throw Error(log::concat("guess: secret ", secret, " outside 1..", n_));
    std::vector<std::int32_t> tokens{bos()};
    int lo = 1, hi = n_;
    bool success = false;
    int turn = 0;
    for (; turn < max_turns_ && !success; ++turn) {
      const int guess = llm.generate(tokens, 1).tokens.at(0);
      const double old_size = hi - lo + 1;
      double reward = 0;
      int feedback;
      if (guess == secret) {
        feedback = correct();
        reward = std::log2(old_size) + 1.0;
        success = true;
      } else if (guess >= 1 && guess <= n_) {
        if (guess < secret) {
          feedback = higher();
          lo = std::max(lo, guess + 1);
        } else {
          feedback = lower();
          hi = std::min(hi, guess - 1);
        }
        reward = std::log2(old_size / (hi - lo + 1));
      } else {
        tracer.reward(0.0, turn);  // not a number: the episode ends, unsolved
        ++turn;
        break;
      }
      tracer.reward(reward, turn);
      tokens.push_back(guess);
      tokens.push_back(feedback);
    }
    tracer.result({{"success", success ? 1.0 : 0.0}, {"guesses", double(turn)}});
  }

 private:
  int n_;
  int max_turns_;
};

}  // namespace

std::unique_ptr<Agent> make_guess_agent(const AgentConfig& config) { return std::make_unique<GuessAgent>(config); }

}  // namespace arclight::agent
