#include <boost/test/unit_test.hpp>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <set>

#include "arclight/agent/agent.hpp"
#include "arclight/agent/episode_batcher.hpp"
#include "arclight/core/error.hpp"

using namespace arclight;
using namespace arclight::agent;
namespace tt = boost::test_tools;

namespace {
struct Recorder : Tracer {
  std::vector<std::pair<double, int>> rewards;
  std::map<std::string, double> metrics;
  int calls = 0;
  void llm_call(const std::vector<std::int32_t>&, const LlmResponse&) override { ++calls; }
  void reward(double value, int step) override { rewards.emplace_back(value, step); }
  void result(const std::map<std::string, double>& m) override { metrics = m; }
  double total() const {
    double t = 0;
    for (auto& r : rewards) t += r.first;
    return t;
  }
};

// A policy that plays binary search on the guess task's tokens.
struct BinarySearch : Llm {
  int n;
  explicit BinarySearch(int n) : n(n) {}
  LlmResponse generate(const std::vector<std::int32_t>& prompt, int) override {
    int lo = 1, hi = n;
    for (std::size_t i = 1; i + 1 < prompt.size(); i += 2) {
      if (prompt[i + 1] == n + 1) lo = prompt[i] + 1;  // higher
      if (prompt[i + 1] == n + 2) hi = prompt[i] - 1;  // lower
    }
    return {{(lo + hi) / 2}, {-0.1f}, 3};
  }
};

struct Constant : Llm {
  std::vector<std::int32_t> tokens;
  LlmResponse generate(const std::vector<std::int32_t>&, int max_new) override {
    std::vector<std::int32_t> out(tokens.begin(), tokens.begin() + std::min<std::size_t>(max_new, tokens.size()));
    return {out, std::vector<float>(out.size(), -1.f), 1};
  }
};

AgentConfig guess_config(int n = 31, int turns = 8) {
  AgentConfig c;
  c.name = "guess";
  c.guess_max = n;
  c.max_turns = turns;
  return c;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(agents)

BOOST_AUTO_TEST_CASE(binary_search_is_optimal_and_known) {
  BOOST_TEST(binary_search_mean_guesses(31) == 129.0 / 31, tt::tolerance(1e-9));
  BOOST_TEST(binary_search_mean_guesses(15) == 49.0 / 15, tt::tolerance(1e-9));
  BOOST_TEST(binary_search_mean_guesses(63) == 5.0952, tt::tolerance(1e-3));
  auto agent = make_agent(guess_config());
  double guesses = 0;
  for (const std::string& task : agent->validation_tasks()) {
    BinarySearch llm(31);
    Recorder rec;
    agent->run(task, llm, rec);
    BOOST_TEST(rec.metrics["success"] == 1.0);
    BOOST_TEST(rec.total() == std::log2(31.0) + 1.0, tt::tolerance(1e-9));  // every bit, plus the bonus
    guesses += rec.metrics["guesses"];
  }
  BOOST_TEST(guesses / 31 == agent->reference_figures()["optimal_guesses"], tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(guess_fails_at_the_turn_limit_and_on_a_non_number) {
  auto agent = make_agent(guess_config(31, 4));
  Constant always_one;
  always_one.tokens = {1};
  Recorder rec;
  agent->run("20", always_one, rec);
  BOOST_TEST(rec.metrics["success"] == 0.0);
  BOOST_TEST(rec.metrics["guesses"] == 4.0);
  BOOST_TEST(rec.rewards.size() == 4u);
  BOOST_TEST(rec.rewards[0].first == std::log2(31.0 / 30.0), tt::tolerance(1e-9));
  BOOST_TEST(rec.rewards[1].first == 0.0);  // the same guess again removes nothing
  Constant word;
  word.tokens = {33};  // "lower": not a number
  Recorder rec2;
  agent->run("20", word, rec2);
  BOOST_TEST(rec2.metrics["success"] == 0.0);
  BOOST_TEST(rec2.metrics["guesses"] == 1.0);
  BOOST_CHECK_THROW(agent->run("x", always_one, rec2), Error);
  BOOST_CHECK_THROW(agent->run("99", always_one, rec2), Error);
}

BOOST_AUTO_TEST_CASE(arith_gives_credit_per_correct_digit) {
  AgentConfig c;
  c.name = "arith";
  c.arith_digits = 3;
  auto agent = make_agent(c);
  // 123 + 989 = 1112: reversed digits 2,1,1,1 -> tokens 3,2,2,2.
  Constant right;
  right.tokens = {3, 2, 2, 2};
  Recorder rec;
  agent->run("123+989", right, rec);
  BOOST_TEST(rec.metrics["token_accuracy"] == 1.0);
  BOOST_TEST(rec.metrics["exact"] == 1.0);
  Constant half;
  half.tokens = {3, 2, 5, 5};
  Recorder rec2;
  agent->run("123+989", half, rec2);
  BOOST_TEST(rec2.metrics["token_accuracy"] == 0.5);
  BOOST_TEST(rec2.rewards.at(0).first == 0.5);
  BOOST_TEST(agent->validation_tasks().size() == 64u);
  BOOST_TEST(agent->validation_tasks() == make_agent(c)->validation_tasks());  // held out and fixed
}

BOOST_AUTO_TEST_CASE(validation_figures_are_means_and_guesses_count_only_solved_episodes) {
  AgentConfig c;
  c.name = "arith";
  // Two episodes and one that failed (no metrics): each figure is the mean over all three.
  const std::vector<std::map<std::string, double>> arith_results{
      {{"token_accuracy", 1.0}, {"exact", 1.0}}, {{"token_accuracy", 0.5}, {"exact", 0.0}}, {}};
  std::map<std::string, double> figures = make_agent(c)->summarize(arith_results);
  BOOST_TEST(figures["token_accuracy"] == 0.5, tt::tolerance(1e-12));
  BOOST_TEST(figures["exact"] == 1.0 / 3, tt::tolerance(1e-12));
  // guess: an episode that ran out of turns says nothing about how fast the secret is found.
  const std::vector<std::map<std::string, double>> guess_results{{{"success", 1.0}, {"guesses", 3.0}},
                                                                 {{"success", 1.0}, {"guesses", 5.0}},
                                                                 {{"success", 0.0}, {"guesses", 8.0}},
                                                                 {}};
  figures = make_agent(guess_config())->summarize(guess_results);
  BOOST_TEST(figures["success"] == 0.5, tt::tolerance(1e-12));
  BOOST_TEST(figures["guesses"] == 4.0, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(unknown_agents_are_refused) {
  AgentConfig c;
  c.name = "chess";
  BOOST_CHECK_THROW(make_agent(c), UsageError);
  BOOST_TEST(agent_names().size() >= 2u);
}

BOOST_AUTO_TEST_CASE(traced_llm_traces_and_enforces_the_call_limit) {
  Constant inner;
  inner.tokens = {1};
  Recorder rec;
  TracedLlm llm(inner, rec, 2, 60);
  llm.generate({0}, 1);
  llm.generate({0}, 1);
  BOOST_TEST(rec.calls == 2);
  BOOST_CHECK_THROW(llm.generate({0}, 1), Error);
}

ModelConfig small_model(int width) {
  ModelConfig mc;
  mc.d_model = width;
  mc.n_heads = 4;
  mc.d_ff = 2 * width;
  mc.max_seq = 20;
  return mc;
}

BOOST_AUTO_TEST_CASE(the_episode_batcher_runs_episodes_together) {
  auto agent = make_agent(guess_config(15, 6));
  model::Policy policy(small_model(32), agent->vocab_size(), 1);
  EpisodeBatcher batcher(policy, {1.0, 0}, 7);
  std::vector<Recorder> recorders(40);
  std::vector<std::function<void(Llm&)>> episodes;
  for (int i = 0; i < 40; ++i)
    episodes.push_back([&, i](Llm& llm) {
      if (i == 5) throw Error("a broken tool");
      TracedLlm traced(llm, recorders[i], 64, 60);
      agent->run(std::to_string(1 + i % 15), traced, recorders[i]);
    });
  auto errors = batcher.run(episodes);
  BOOST_TEST(static_cast<bool>(errors[5]));
  int finished = 0;
  for (int i = 0; i < 40; ++i) {
    if (i == 5) continue;
    BOOST_TEST(!errors[i]);
    finished += recorders[i].metrics.count("success");
    BOOST_TEST(recorders[i].calls >= 1);
  }
  BOOST_TEST(finished == 39);
  // Every call was served, in far fewer batched forward passes than calls.
  std::uint64_t calls = 0;
  for (auto& r : recorders) calls += r.calls;
  BOOST_TEST(batcher.policy_calls() == calls);
  BOOST_TEST(batcher.batches() * 4 < calls, batcher.batches() << " batches for " << calls << " calls");
}

BOOST_AUTO_TEST_CASE(the_episode_batcher_runs_episodes_on_the_callers_thread) {
  // A thread per episode cost runners more CPU time switching threads than computing: episodes
  // are fibers on the thread that runs them, suspended in generate().
  auto agent = make_agent(guess_config(15, 6));
  model::Policy policy(small_model(16), agent->vocab_size(), 1);
  EpisodeBatcher batcher(policy, {1.0, 0}, 3);
  const long caller = static_cast<long>(syscall(SYS_gettid));
  std::set<long> threads;
  std::vector<int> order;
  std::vector<std::function<void(Llm&)>> episodes;
  for (int i = 0; i < 12; ++i)
    episodes.push_back([&, i](Llm& llm) {
      threads.insert(static_cast<long>(syscall(SYS_gettid)));
      for (int turn = 0; turn < 1 + i % 3; ++turn) {  // episodes of 1, 2 and 3 calls
        LlmResponse r = llm.generate({0, static_cast<std::int32_t>(turn)}, 2);
        BOOST_TEST(r.tokens.size() == 2u);
        BOOST_TEST(r.policy_version == 3u);
        order.push_back(i);
      }
      if (i == 7) throw Error("episode 7 fails after its calls");
    });
  std::vector<std::exception_ptr> errors = batcher.run(episodes);
  BOOST_TEST(threads == std::set<long>{caller});
  BOOST_TEST(static_cast<bool>(errors[7]));
  for (int i = 0; i < 12; ++i)
    if (i != 7) BOOST_TEST(!errors[i]);
  // Three rounds of calls (every episode's first, then the second of those with two or more,
  // then the third), each served as one batch, resumed in episode order.
  BOOST_TEST(batcher.batches() == 3u);
  BOOST_TEST(batcher.policy_calls() == 24u);
  const std::vector<int> expected{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 2, 4, 5, 7, 8, 10, 11, 2, 5, 8, 11};
  BOOST_TEST(order == expected, boost::test_tools::per_element());
  // Again, with the same batcher.
  order.clear();
  errors = batcher.run(episodes);
  BOOST_TEST(order.size() == 24u);
}

// Each episode's stack (mapped, guarded) comes from a pool the batcher keeps: a run maps stacks only past what the
// runs before it left (a mapping, a guard page and an unmapping per episode was a tenth of a runner's CPU time).
BOOST_AUTO_TEST_CASE(the_episode_batcher_keeps_its_stacks_for_the_next_run) {
  const auto mappings = [] {
    std::ifstream maps("/proc/self/maps");
    return std::count(std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>(), '\n');
  };
  auto agent = make_agent(guess_config(15, 6));
  model::Policy policy(small_model(16), agent->vocab_size(), 1);
  EpisodeBatcher batcher(policy, {1.0, 0}, 3);
  std::vector<std::function<void(Llm&)>> episodes(16, [](Llm& llm) { llm.generate({0, 1}, 1); });
  const auto before = mappings();
  batcher.run(episodes);
  const auto after_one = mappings();
  BOOST_TEST(after_one >= before + 16, "the stacks were unmapped: " << before << " mappings, then " << after_one);
  batcher.run(episodes);
  batcher.run(episodes);
  BOOST_TEST(mappings() == after_one);
}

BOOST_AUTO_TEST_SUITE_END()
