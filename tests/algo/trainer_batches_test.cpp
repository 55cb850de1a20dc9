// How trainers run a batch: the coordinator's split among them (by tokens), a trainer's micro-batches
// (grpo.micro_batch, grpo.micro_batch_tokens), which change what one forward holds and not the step, and the KL to
// the reference.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "arclight/algo/adapter.hpp"
#include "arclight/algo/trainer.hpp"
#include "arclight/core/error.hpp"
#include "trainer_fixtures.hpp"

using namespace arclight;

namespace {
std::size_t padded_tokens(const std::vector<algo::Sample>& batch, const std::vector<std::size_t>& micro) {
  std::size_t longest = 0;
  for (std::size_t i : micro) longest = std::max(longest, batch[i].tokens.size());
  return longest * micro.size();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(trainer_batches)

// The trainers' shards hold every sample once, in the batch's order, and their tokens differ by at most the longest
// sample's (greedy list scheduling's bound): a group's long trajectories no longer all go to one trainer.
BOOST_AUTO_TEST_CASE(shards_are_near_equal_in_tokens) {
  const auto of_lengths = [](const std::vector<std::size_t>& lengths) {
    std::vector<algo::Sample> batch(lengths.size());
    for (std::size_t i = 0; i < lengths.size(); ++i) batch[i].tokens.assign(lengths[i], 1);
    return batch;
  };
  const auto tokens_of = [](const std::vector<algo::Sample>& batch, const std::vector<std::size_t>& shard) {
    std::size_t n = 0;
    for (std::size_t i : shard) n += batch[i].tokens.size();
    return n;
  };
  // Two trainers, samples long and short by turns: by count, one trainer got 1,600 tokens and the other 80.
  const auto turns = of_lengths({400, 20, 400, 20, 400, 20, 400, 20});
  const auto two = algo::token_balanced_shards(turns, 2);
  BOOST_TEST(tokens_of(turns, two[0]) == 840u);
  BOOST_TEST(tokens_of(turns, two[1]) == 840u);
  // Longest first: in the batch's order (or shortest first) 1 and 1 went apart and 2 joined one of them, 3 against 1.
  const auto small = of_lengths({1, 1, 2});
  const auto lpt = algo::token_balanced_shards(small, 2);
  BOOST_TEST(tokens_of(small, lpt[0]) == 2u);
  BOOST_TEST(tokens_of(small, lpt[1]) == 2u);

  std::mt19937 rng(7);
  for (const std::size_t trainers : {1u, 2u, 3u, 5u, 40u}) {
    std::vector<std::size_t> lengths(33);
    for (auto& l : lengths) {
      const bool long_one = rng() % 4 == 0;  // drawn apart: the order of two calls in one expression is unspecified
      l = 1 + rng() % (long_one ? 2000 : 100);
    }
    const auto batch = of_lengths(lengths);
    BOOST_TEST_CONTEXT(trainers << " trainers") {
      const auto shards = algo::token_balanced_shards(batch, trainers);
      BOOST_TEST(shards.size() == trainers);
      std::vector<std::size_t> seen, tokens;
      for (const auto& shard : shards) {
        BOOST_TEST(std::is_sorted(shard.begin(), shard.end()));
        seen.insert(seen.end(), shard.begin(), shard.end());
        tokens.push_back(tokens_of(batch, shard));
      }
      std::sort(seen.begin(), seen.end());
      std::vector<std::size_t> all(batch.size());
      std::iota(all.begin(), all.end(), std::size_t{0});
      BOOST_TEST(seen == all);
      const auto [fewest, most] = std::minmax_element(tokens.begin(), tokens.end());
      BOOST_TEST(*most - *fewest <= *std::max_element(lengths.begin(), lengths.end()));
      if (trainers > batch.size()) BOOST_TEST(*fewest == 0u);  // more trainers than samples: some get none
    }
  }
  BOOST_CHECK_THROW(algo::token_balanced_shards(turns, 0), std::invalid_argument);
}

// Without a token budget, runs of micro_batch in the batch's order; with one, shortest first, each micro-batch within
// it and as full as it allows (a sample that exceeds it alone), every sample once; other values refused.
BOOST_AUTO_TEST_CASE(micro_batches_hold_every_sample_once_within_the_token_budget) {
  const auto batch = make_batch(13, 11, 0);  // lengths 4 to 8
  GrpoConfig gc;
  gc.micro_batch = 4;
  const auto runs = algo::micro_batches(batch, gc);
  BOOST_TEST((runs == std::vector<std::vector<std::size_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12}}));
  for (const int budget : {3, 16, 20, 33, 1000}) {
    BOOST_TEST_CONTEXT("micro_batch_tokens " << budget) {
      gc.micro_batch_tokens = budget;
      const auto micro = algo::micro_batches(batch, gc);
      std::vector<std::size_t> seen;
      std::size_t previous_length = 0;
      for (std::size_t k = 0; k < micro.size(); ++k) {
        const auto& m = micro[k];
        BOOST_TEST(!m.empty());
        BOOST_TEST(m.size() <= 4u);
        BOOST_TEST((m.size() == 1 || padded_tokens(batch, m) <= std::size_t(budget)));
        if (k + 1 < micro.size()) {  // the next sample would not have fitted
          auto grown = m;
          grown.push_back(micro[k + 1].front());
          BOOST_TEST((grown.size() > 4u || padded_tokens(batch, grown) > std::size_t(budget)));
        }
        for (std::size_t i : m) {
          BOOST_TEST(batch[i].tokens.size() >= previous_length);  // shortest first
          previous_length = batch[i].tokens.size();
          seen.push_back(i);
        }
      }
      std::sort(seen.begin(), seen.end());
      std::vector<std::size_t> all(batch.size());
      for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
      BOOST_TEST(seen == all);
      if (budget == 3) BOOST_TEST(micro.size() == batch.size());  // every sample longer than it: one a micro-batch
      if (budget == 1000) BOOST_TEST(micro.size() == 4u);         // micro_batch still bounds the rows
    }
  }
  gc.micro_batch_tokens = -1;
  BOOST_CHECK_THROW(algo::micro_batches(batch, gc), UsageError);
  gc.micro_batch_tokens = 0;
  gc.micro_batch = 0;
  BOOST_CHECK_THROW(algo::micro_batches(batch, gc), UsageError);
}

// The step is the same however the batch is cut: one micro-batch of all, or a token budget's several (the summed
// gradient to float32's rounding; the parameters after AdamW follow it, but a gradient near zero moves its parameter
// by up to lr either way, so it is the gradient that is compared).
BOOST_AUTO_TEST_CASE(a_token_budget_takes_the_step_one_micro_batch_takes) {
  const int vocab = 11;
  const auto batch = make_batch(13, vocab, 2);
  const auto train = [&](int micro_batch_tokens) {
    GrpoConfig gc;
    gc.micro_batch_tokens = micro_batch_tokens;
    model::Policy policy(trainer_test_model(), vocab, 5);
    algo::Trainer trainer(policy, gc, nullptr);
    const algo::TrainStats stats = trainer.step(batch, algo::action_tokens(batch));
    BOOST_TEST(stats.micro_batches == int(algo::micro_batches(batch, gc).size()));  // the trainer's own cut
    BOOST_TEST(stats.micro_batches == (micro_batch_tokens == 0 ? 1 : 5));
    std::vector<float> gradient;
    for (const FloatBuffer& g : policy.gradient_buffers()) gradient.insert(gradient.end(), g.data, g.data + g.size);
    return std::pair{gradient, stats};
  };
  const auto [whole, whole_stats] = train(0);
  const auto [cut, cut_stats] = train(20);
  double largest = 0, difference = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    largest = std::max(largest, double(std::abs(whole[i])));
    difference = std::max(difference, double(std::abs(whole[i] - cut[i])));
  }
  BOOST_TEST(largest > 1e-2);
  BOOST_TEST(difference < 1e-6);
  BOOST_TEST(cut_stats.loss == whole_stats.loss, boost::test_tools::tolerance(1e-4));
  BOOST_TEST(cut_stats.grad_norm == whole_stats.grad_norm, boost::test_tools::tolerance(1e-4));
  BOOST_TEST(cut_stats.action_tokens == whole_stats.action_tokens);
}

// grpo.kl_coef > 0: a frozen copy of the starting policy is the reference, whose log-probs (Policy::token_logprobs
// without gradients) are the policy's at the first step (a KL of 0) and not once it has moved; the loss holds the term.
BOOST_AUTO_TEST_CASE(the_kl_to_the_reference_is_zero_until_the_policy_moves) {
  GrpoConfig gc;
  gc.kl_coef = 0.5;
  gc.lr = 1e-2;
  const int vocab = 11;
  model::Policy policy(trainer_test_model(), vocab, 5);
  algo::Trainer trainer(policy, gc, nullptr);
  const auto batch = make_batch(13, vocab, 0);
  const algo::TrainStats first = trainer.step(batch, algo::action_tokens(batch));
  BOOST_TEST(first.kl == 0.0);
  const algo::TrainStats second = trainer.step(batch, algo::action_tokens(batch));
  BOOST_TEST(second.kl > 1e-6);
  BOOST_TEST(second.loss == second.policy_loss + gc.kl_coef * second.kl, boost::test_tools::tolerance(1e-4));
}

BOOST_AUTO_TEST_SUITE_END()
