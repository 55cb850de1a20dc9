// arith: reversed addition. The prompt is a + b with digits least significant first;
// the answer is the sum's digits, least significant first, one credit per correct digit.
#include <string>

#include "arclight/agent/agent.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::agent {
namespace {

class ArithAgent : public Agent {
 public:
  explicit ArithAgent(const AgentConfig& c) : digits_(c.arith_digits) {
    if (digits_ < 1 || digits_ > 9) throw UsageError(log::concat("agent.arith_digits = ", digits_, ": expected 1..9"));
  }
  // Tokens: 0 BOS, 1..10 the digits 0..9, 11 plus, 12 equals.
  static constexpr int bos = 0, plus = 11, equals = 12;
  static int digit(int d) { return d + 1; }

  std::string name() const override { return "arith"; }
  int vocab_size() const override { return 13; }
  int max_sequence() const override { return 3 + 2 * digits_ + digits_ + 1; }
  std::string make_task(std::mt19937_64& rng) const override {
    long limit = 1;
    for (int i = 0; i < digits_; ++i) limit *= 10;
    std::uniform_int_distribution<long> pick(0, limit - 1);
    return std::to_string(pick(rng)) + "+" + std::to_string(pick(rng));
  }
  std::vector<std::string> validation_tasks() const override {
    std::mt19937_64 rng(20261130);  // fixed: the same held-out set every run
    std::vector<std::string> tasks;
    for (int i = 0; i < 64; ++i) tasks.push_back(make_task(rng));
    return tasks;
  }

  void run(const std::string& task, Llm& llm, Tracer& tracer) const override {
    auto plus_at = task.find('+');
    if (plus_at == std::string::npos) throw Error("arith: task '" + task + "' is not a+b");
    long a = 0, b = 0;
    try {
      a = std::stol(task.substr(0, plus_at));
      b = std::stol(task.substr(plus_at + 1));
    } catch (const std::exception&) {
      throw Error("arith: task '" + task + "' is not a+b");
    }
    std::vector<std::int32_t> prompt{bos};
    auto put = [&](long v, int n) {
      for (int i = 0; i < n; ++i, v /= 10) prompt.push_back(digit(static_cast<int>(v % 10)));
    };
    put(a, digits_);
    prompt.push_back(plus);
    put(b, digits_);
    prompt.push_back(equals);
    const int answer_digits = digits_ + 1;
    LlmResponse response = llm.generate(prompt, answer_digits);
    long sum = a + b;
    int right = 0;
    for (int i = 0; i < answer_digits; ++i, sum /= 10) {
      bool ok = i < static_cast<int>(response.tokens.size()) && response.tokens[i] == digit(static_cast<int>(sum % 10));
      right += ok;
    }
    // One policy call: its reward is the share of correct digits.
    tracer.reward(double(right) / answer_digits, 0);
    tracer.result({{"token_accuracy", double(right) / answer_digits},
                   {"exact", right == answer_digits ? 1.0 : 0.0},
                   {"success", right == answer_digits ? 1.0 : 0.0}});
  }

 private:
  int digits_;
};

}  // namespace

std::unique_ptr<Agent> make_arith_agent(const AgentConfig& config) { return std::make_unique<ArithAgent>(config); }

}  // namespace arclight::agent
