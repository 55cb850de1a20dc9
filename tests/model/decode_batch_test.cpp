#include "arclight/model/decode_batch.hpp"

#include <boost/test/unit_test.hpp>

#include <limits>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "arclight/core/error.hpp"
#include "test_models.hpp"

using namespace arclight;
using namespace arclight::model;

namespace {

// Llama-like: grouped-query attention (4 query heads on 2 key/value heads), an untied lm_head.
const std::string tiny_llama_config = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 40,
    "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "tie_word_embeddings": false, "max_position_embeddings": 128})";
// Mistral with a window of 4 keys: most of every sequence is out of sight.
const std::string tiny_mistral_config = R"({"architectures": ["MistralForCausalLM"], "vocab_size": 40,
    "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "sliding_window": 4, "max_position_embeddings": 128})";
// Gemma 2 with a window of 3 keys on every other layer from the first (whose cache is a ring of 3 slots), the others
// attending in full; soft caps.
const std::string tiny_gemma2_config = R"({"architectures": ["Gemma2ForCausalLM"], "vocab_size": 40,
    "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 3, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 4, "query_pre_attn_scalar": 4, "sliding_window": 3,
    "attn_logit_softcapping": 5.0, "final_logit_softcapping": 8.0, "max_position_embeddings": 128})";

Sampling greedy() {
  Sampling s;
  s.temperature = 0;
  return s;
}

std::vector<std::int32_t> prompt_of(int length, int salt, int vocab) {
  std::vector<std::int32_t> out;
  for (int t = 0; t < length; ++t) out.push_back((salt * 5 + t * 3 + 1) % vocab);
  return out;
}

SequenceRequest request(std::vector<std::int32_t> prompt, int max_new_tokens, Sampling sampling = greedy()) {
  SequenceRequest r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.sampling = sampling;
  return r;
}

// What one sequence gave: its tokens, their log-probs, and every event.
struct Output {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<SequenceToken> events;
};

// A request joining at a given step.
struct Arrival {
  int step;
  SequenceRequest request;
};

// Steps the batch until it is idle, adding each arrival at its step; checks that a step gives at most one event
// per sequence and that nothing comes after a sequence's finish. Outputs in arrival order.
std::vector<Output> run(DecodeBatch& batch, const std::vector<Arrival>& arrivals) {
  std::map<std::uint64_t, std::size_t> index;
  std::vector<Output> out(arrivals.size());
  std::size_t next = 0;
  for (int step = 0; next < arrivals.size() || !batch.idle(); ++step) {
    BOOST_REQUIRE(step < 1000);
    for (; next < arrivals.size() && arrivals[next].step <= step; ++next)
      index[batch.add(arrivals[next].request)] = next;
    std::map<std::uint64_t, int> events_this_step;
    for (const SequenceToken& e : batch.step()) {
      BOOST_TEST(++events_this_step[e.sequence] == 1);
      Output& o = out.at(index.at(e.sequence));
      BOOST_TEST((o.events.empty() || o.events.back().finish == FinishReason::none));
      o.tokens.push_back(e.token);
      o.logprobs.push_back(e.logprob);
      o.events.push_back(e);
    }
  }
  return out;
}

// Each arrival alone through Policy::generate (greedy) gives what the batch gave it, and what generate gives without
// the cache (a full forward a token).
void check_greedy_against_generate(Policy& policy, int rows, const std::vector<Arrival>& arrivals,
                                   std::int64_t prefill_scores = DecodeBatch::default_prefill_scores) {
  DecodeBatch batch(policy, rows, prefill_scores);
  const auto outputs = run(batch, arrivals);
  for (std::size_t i = 0; i < arrivals.size(); ++i) {
    const SequenceRequest& r = arrivals[i].request;
    const Generation alone = policy.generate({r.prompt}, r.max_new_tokens, greedy()).at(0);
    const Generation uncached = policy.generate({r.prompt}, r.max_new_tokens, greedy(), false).at(0);
    BOOST_TEST(outputs[i].tokens == alone.tokens, "sequence " << i);
    BOOST_TEST(uncached.tokens == alone.tokens, "sequence " << i);
    BOOST_REQUIRE(outputs[i].logprobs.size() == alone.logprobs.size());
    for (std::size_t t = 0; t < alone.logprobs.size(); ++t)
      BOOST_TEST(outputs[i].logprobs[t] == alone.logprobs[t], boost::test_tools::tolerance(1e-4f));
    BOOST_TEST((outputs[i].events.back().finish == FinishReason::length));
  }
}

// Ragged prompts joining while others are midway, more of them than rows (rows are reused).
std::vector<Arrival> ragged_arrivals(int vocab) {
  const int lengths[] = {3, 7, 1, 5, 2, 9, 4};
  const int starts[] = {0, 0, 2, 3, 3, 6, 7};
  const int new_tokens[] = {6, 9, 4, 8, 1, 5, 7};
  std::vector<Arrival> out;
  for (int i = 0; i < 7; ++i) out.push_back({starts[i], request(prompt_of(lengths[i], i, vocab), new_tokens[i])});
  return out;
}

// The same sequences, all at once: their ragged prompts are prefilled together, padded, in one forward.
std::vector<Arrival> simultaneous_arrivals(int vocab) {
  std::vector<Arrival> out = ragged_arrivals(vocab);
  for (Arrival& a : out) a.step = 0;
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(decode_batch)

BOOST_AUTO_TEST_CASE(greedy_ragged_sequences_match_generate_alone_for_a_scratch_model) {
  for (const Positions positions : {Positions::rotary, Positions::learned}) {
    BOOST_TEST_CONTEXT(name_of(positions)) {
      Policy policy(small(positions), 20, 7);
      check_greedy_against_generate(policy, 3, ragged_arrivals(20));
      check_greedy_against_generate(policy, 7, simultaneous_arrivals(20));
    }
  }
}

BOOST_AUTO_TEST_CASE(greedy_ragged_sequences_match_generate_alone_for_hugging_face_models) {
  const std::pair<const char*, std::string> models[] = {{"llama", tiny_llama_config},
                                                        {"mistral", tiny_mistral_config},
                                                        {"qwen3", tiny_qwen3_config},
                                                        {"gemma2", tiny_gemma2_config}};
  for (const auto& [name, config] : models) {
    BOOST_TEST_CONTEXT(name) {
      TempDir dir;
      write_random_hf_model(dir, config);
      Policy policy(hf_model(dir), 40, 1);
      check_greedy_against_generate(policy, 3, ragged_arrivals(40));
      check_greedy_against_generate(policy, 7, simultaneous_arrivals(40));
      // A budget of attention scores that 9 queries of a 9-token prompt pass: prompts of 7 and 9 tokens go in
      // chunks of 3 queries (Mistral's and Gemma 2's sliding windows across the chunks' edges), with the same tokens.
      const std::int64_t heads = policy.architecture().num_heads;
      check_greedy_against_generate(policy, 3, ragged_arrivals(40), heads * 9 * 3);
      check_greedy_against_generate(policy, 7, simultaneous_arrivals(40), heads * 9 * 3);
    }
  }
}

// A temperature too small to divide by (1e-40 made the logits infinite, their log-probs NaN) samples greedily.
BOOST_AUTO_TEST_CASE(a_vanishing_temperature_samples_greedily) {
  Policy policy(small(Positions::rotary), 20, 7);
  Sampling tiny;
  tiny.temperature = 1e-40;
  DecodeBatch batch(policy, 2);
  const auto outputs = run(batch, {{0, request(prompt_of(4, 1, 20), 6, tiny)}, {0, request(prompt_of(4, 1, 20), 6)}});
  BOOST_TEST(outputs[0].tokens == outputs[1].tokens);
  for (float logprob : outputs[0].logprobs) BOOST_TEST(std::isfinite(logprob));
}

// What training compares with: each token's log-prob at the sampling's temperature before top-k and top-p cut the
// distribution; the client's (logprob) is of the distribution drawn from, higher where the cut took mass away.
BOOST_AUTO_TEST_CASE(each_token_also_has_its_log_prob_before_top_k_and_top_p) {
  Policy policy(small(Positions::rotary), 20, 7);
  Sampling sampling;
  sampling.temperature = 0.8;
  sampling.top_k = 12;
  sampling.top_p = 0.6;
  DecodeBatch batch(policy, 1);
  const std::vector<std::int32_t> prompt = prompt_of(4, 3, 20);
  const Output out = run(batch, {{0, request(prompt, 8, sampling)}}).at(0);
  std::vector<std::int64_t> sequence(prompt.begin(), prompt.end());
  sequence.insert(sequence.end(), out.tokens.begin(), out.tokens.end());
  torch::NoGradGuard no_grad;
  const auto logits = policy.logits(torch::tensor(sequence).unsqueeze(0))[0];
  bool cut = false;
  for (std::size_t i = 0; i < out.events.size(); ++i) {
    const auto position = static_cast<std::int64_t>(prompt.size() + i - 1);
    const float expected = torch::log_softmax(logits[position] / 0.8, -1)[out.tokens[i]].item<float>();
    BOOST_TEST(out.events[i].untruncated_logprob == expected, boost::test_tools::tolerance(1e-4f));
    BOOST_TEST(out.events[i].logprob >= out.events[i].untruncated_logprob - 1e-6f);
    cut = cut || out.events[i].logprob > out.events[i].untruncated_logprob + 1e-3f;
  }
  BOOST_TEST(cut);
  // Without a cut both are the same; greedy ones are the model's own (temperature 1).
  DecodeBatch plain(policy, 2);
  Sampling warm;
  warm.temperature = 0.8;
  for (const Output& o : run(plain, {{0, request(prompt, 4, warm)}, {0, request(prompt, 4)}}))
    for (const SequenceToken& e : o.events) BOOST_TEST(e.logprob == e.untruncated_logprob);
}

BOOST_AUTO_TEST_CASE(one_row_serves_many_sequences_in_turn) {
  Policy policy(small(), 20, 3);
  check_greedy_against_generate(policy, 1, ragged_arrivals(20));
}

BOOST_AUTO_TEST_CASE(a_seeded_sequence_draws_the_same_tokens_alone_and_in_a_busy_batch) {
  Policy policy(small(), 20, 5);
  Sampling sampling;
  sampling.temperature = 1.2;
  sampling.top_k = 8;
  sampling.top_p = 0.95;
  SequenceRequest seeded = request(prompt_of(4, 1, 20), 12, sampling);
  seeded.seed = 42;
  DecodeBatch alone(policy, 4);
  const Output by_itself = run(alone, {{0, seeded}}).at(0);
  // Policy::generate draws from a generator seeded the same way: the same tokens and log-probs (before top-k and
  // top-p: what both give training).
  policy.seed_sampling(42);
  const Generation generated = policy.generate({seeded.prompt}, 12, sampling).at(0);
  BOOST_TEST(by_itself.tokens == generated.tokens);
  for (std::size_t t = 0; t < generated.logprobs.size(); ++t)
    BOOST_TEST(by_itself.events[t].untruncated_logprob == generated.logprobs[t], boost::test_tools::tolerance(1e-4f));

  std::vector<Arrival> busy;
  for (int i = 0; i < 5; ++i) {
    SequenceRequest other = request(prompt_of(2 + i, 7 + i, 20), 6 + i, sampling);
    if (i % 2) other.seed = 42 + i;
    busy.push_back({i, other});
  }
  busy.insert(busy.begin() + 3, {2, seeded});
  DecodeBatch crowded(policy, 3);
  BOOST_TEST(run(crowded, busy).at(3).tokens == by_itself.tokens);

  bool seeds_differ = false;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    seeded.seed = seed;
    DecodeBatch another(policy, 1);
    seeds_differ = seeds_differ || run(another, {{0, seeded}}).at(0).tokens != by_itself.tokens;
  }
  BOOST_TEST(seeds_differ);
}

BOOST_AUTO_TEST_CASE(a_sequence_ends_with_its_first_stop_token) {
  Policy policy(small(), 20, 5);
  const auto prompt = prompt_of(4, 2, 20);
  const auto free_run = policy.generate({prompt}, 10, greedy()).at(0).tokens;
  SequenceRequest stopping = request(prompt, 10);
  stopping.stop_tokens = {19, free_run[2]};
  const auto first =
      std::find_first_of(free_run.begin(), free_run.end(), stopping.stop_tokens.begin(), stopping.stop_tokens.end());
  const std::vector<std::int32_t> expected(free_run.begin(), first + 1);
  DecodeBatch batch(policy, 2);
  const Output out = run(batch, {{0, stopping}, {0, request(prompt_of(3, 4, 20), 10)}}).at(0);
  BOOST_TEST(out.tokens == expected);
  BOOST_TEST((out.events.back().finish == FinishReason::stop));
  for (std::size_t t = 0; t + 1 < out.events.size(); ++t) BOOST_TEST((out.events[t].finish == FinishReason::none));
}

BOOST_AUTO_TEST_CASE(a_sequence_ends_at_max_new_tokens_or_at_max_seq) {
  Policy policy(small(), 20, 5);  // max_seq 24
  DecodeBatch batch(policy, 3);
  const auto out = run(batch, {{0, request(prompt_of(5, 1, 20), 4)},
                               {0, request(prompt_of(21, 2, 20), 10)},
                               {1, request(prompt_of(23, 3, 20), 10)}});
  BOOST_TEST(out[0].tokens.size() == 4u);
  BOOST_TEST(out[1].tokens.size() == 3u);  // 21 + 3 = max_seq
  BOOST_TEST(out[2].tokens.size() == 1u);
  for (const Output& o : out) BOOST_TEST((o.events.back().finish == FinishReason::length));
}

BOOST_AUTO_TEST_CASE(a_cancelled_sequence_gives_no_more_tokens_and_frees_its_row) {
  Policy policy(small(), 20, 5);
  DecodeBatch batch(policy, 2);
  const std::vector<std::int32_t> second_prompt = prompt_of(4, 2, 20), waiting_prompt = prompt_of(5, 3, 20);
  const auto first = batch.add(request(prompt_of(3, 1, 20), 10));
  const auto second = batch.add(request(second_prompt, 10));
  const auto waiting = batch.add(request(waiting_prompt, 10));
  const auto never = batch.add(request(prompt_of(5, 4, 20), 10));
  std::map<std::uint64_t, std::vector<std::int32_t>> tokens;
  const auto step = [&] {
    const auto events = batch.step();
    for (const SequenceToken& e : events) tokens[e.sequence].push_back(e.token);
    return events;
  };
  step();
  step();
  BOOST_TEST(batch.live() == 2u);
  BOOST_TEST(batch.queued() == 2u);
  batch.cancel(first);
  batch.cancel(never);
  batch.cancel(12345);  // unknown: nothing happens
  BOOST_TEST(batch.live() == 1u);
  BOOST_TEST(batch.queued() == 1u);
  const auto events = step();  // second goes on past the free row 0, then waiting joins row 0
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[0].sequence == second);
  BOOST_TEST(events[1].sequence == waiting);
  while (!batch.idle()) step();
  BOOST_TEST(tokens[first].size() == 2u);
  BOOST_TEST(tokens.count(never) == 0u);
  BOOST_TEST(tokens[second] == policy.generate({second_prompt}, 10, greedy()).at(0).tokens);
  BOOST_TEST(tokens[waiting] == policy.generate({waiting_prompt}, 10, greedy()).at(0).tokens);
}

BOOST_AUTO_TEST_CASE(top_logprobs_are_sorted_and_hold_the_drawn_token) {
  Policy policy(small(), 20, 5);
  SequenceRequest greedy_request = request(prompt_of(4, 1, 20), 5);
  greedy_request.top_logprobs = 5;
  Sampling narrow;
  narrow.top_k = 3;
  SequenceRequest sampled = request(prompt_of(6, 2, 20), 5, narrow);
  sampled.top_logprobs = 4;
  DecodeBatch batch(policy, 2);
  const auto out = run(batch, {{0, greedy_request}, {1, sampled}});
  for (const SequenceToken& e : out[0].events) {
    BOOST_REQUIRE(e.top.size() == 5u);
    BOOST_TEST(e.top[0].first == e.token);  // greedy draws the most likely
    BOOST_TEST(e.top[0].second == e.logprob, boost::test_tools::tolerance(1e-6f));
    for (std::size_t i = 1; i < e.top.size(); ++i) BOOST_TEST(e.top[i - 1].second >= e.top[i].second);
  }
  for (const SequenceToken& e : out[1].events) {
    BOOST_REQUIRE(e.top.size() == 4u);
    const auto drawn = std::find_if(e.top.begin(), e.top.end(), [&](const auto& t) { return t.first == e.token; });
    BOOST_REQUIRE(drawn - e.top.begin() < 3);  // top_k = 3: one of the three kept
    BOOST_TEST(drawn->second == e.logprob, boost::test_tools::tolerance(1e-6f));
    double kept = 0;
    for (int i = 0; i < 3; ++i) kept += std::exp(e.top[i].second);
    BOOST_TEST(kept == 1.0, boost::test_tools::tolerance(1e-5));  // the same distribution, renormalised
    BOOST_TEST(std::isinf(e.top[3].second));                      // outside top_k: impossible
  }
  // More alternatives asked than the vocabulary has (11 tokens, 20 asked): all of them (topk threw, ending the rank).
  Policy tiny(small(), 11, 5);
  SequenceRequest all = request(prompt_of(3, 1, 11), 2);
  all.top_logprobs = 20;
  DecodeBatch tiny_batch(tiny, 1);
  for (const SequenceToken& e : run(tiny_batch, {{0, all}})[0].events) BOOST_TEST(e.top.size() == 11u);
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused) {
  Policy policy(small(), 20, 5);  // vocabulary 20, max_seq 24
  BOOST_CHECK_THROW(DecodeBatch(policy, 0), UsageError);
  DecodeBatch batch(policy, 2);
  const auto refused = [&](SequenceRequest r) { BOOST_CHECK_THROW(batch.add(std::move(r)), UsageError); };
  refused(request({}, 4));
  refused(request({1, -1}, 4));
  refused(request({1, 20}, 4));
  refused(request(prompt_of(24, 1, 20), 4));
  refused(request({1}, 0));
  SequenceRequest r = request({1}, 4);
  r.top_logprobs = 21;
  refused(r);
  r = request({1}, 4);
  r.stop_tokens = {20};
  refused(r);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const Sampling s : {Sampling{-1, 0, 1}, Sampling{1, -1, 1}, Sampling{1, 0, 0}, Sampling{1, 0, 1.5},
                           Sampling{nan, 0, 1}, Sampling{inf, 0, 1}, Sampling{1, 0, nan}})
    refused(request({1}, 4, s));
  BOOST_TEST(batch.idle());
  batch.add(request(prompt_of(23, 1, 20), 4));  // room for one token
  BOOST_TEST(batch.queued() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
