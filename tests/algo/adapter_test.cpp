#include "arclight/algo/adapter.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "arclight/core/bytes.hpp"

using namespace arclight;
using namespace arclight::algo;

namespace {
store::Span llm(std::vector<std::int32_t> prompt, std::vector<std::int32_t> response, std::vector<float> logprobs,
                double version) {
  store::Span s;
  s.name = span_names::llm;
  s.attributes = {{"prompt_ids", store::TokenIds(prompt)},
                  {"response_ids", store::TokenIds(response)},
                  {"logprobs", store::Floats(logprobs)},
                  {"policy_version", version}};
  return s;
}
// Spans that record no temperature were sampled at 1 here.
Trajectory trajectory_of(const std::vector<store::Span>& spans) { return read_trajectory(spans, 1.0); }
store::Span reward(double value, int step) {
  store::Span s;
  s.name = span_names::reward;
  s.attributes = {{"reward", value}, {"step", double(step)}};
  return s;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(adapter)

BOOST_AUTO_TEST_CASE(a_multi_turn_episode_becomes_one_sequence_with_environment_tokens_masked) {
  // BOS=0; turn 1 guesses 16, feedback 32; turn 2 guesses 8.
  std::vector<store::Span> spans{llm({0}, {16}, {-1.5f}, 4), reward(1.0, 0), llm({0, 16, 32}, {8}, {-0.5f}, 5),
                                 reward(2.0, 1)};
  store::Span result;
  result.name = span_names::result;
  result.attributes = {{"success", 1.0}, {"guesses", 2.0}};
  spans.push_back(result);
  Trajectory t = trajectory_of(spans);
  BOOST_TEST(t.calls.size() == 2u);
  BOOST_TEST(t.rewards == (std::vector<double>{1.0, 2.0}));
  BOOST_TEST(t.metrics["guesses"] == 2.0);
  BOOST_TEST(t.oldest_version() == 4u);
  Sample s = trajectory_sample(t, {0.5, -0.25});
  BOOST_TEST(s.tokens == (std::vector<std::int32_t>{0, 16, 32, 8}));
  BOOST_TEST(s.action_mask == (std::vector<std::uint8_t>{0, 1, 0, 1}));  // the feedback token 32 is not trained on
  BOOST_TEST(s.behaviour_logprobs[1] == -1.5f);
  BOOST_TEST(s.behaviour_logprobs[3] == -0.5f);
  BOOST_TEST(s.advantages[1] == 0.5f);
  BOOST_TEST(s.advantages[3] == -0.25f);
  BOOST_TEST(s.advantages[2] == 0.0f);
  BOOST_TEST(s.policy_version == 4u);
}

BOOST_AUTO_TEST_CASE(transitions_give_one_sample_per_call) {
  Trajectory t = trajectory_of({llm({0}, {16}, {-1.5f}, 4), llm({0, 16, 32}, {8, 9}, {-0.5f, -0.1f}, 5)});
  auto samples = transition_samples(t, {1.0, 2.0});
  BOOST_REQUIRE(samples.size() == 2u);
  BOOST_TEST(samples[1].tokens == (std::vector<std::int32_t>{0, 16, 32, 8, 9}));
  BOOST_TEST(samples[1].action_mask == (std::vector<std::uint8_t>{0, 0, 0, 1, 1}));
  BOOST_TEST(samples[1].advantages[4] == 2.0f);
  BOOST_TEST(samples[1].policy_version == 5u);
}

BOOST_AUTO_TEST_CASE(an_episode_that_is_not_one_sequence_trains_call_by_call) {
  // The second prompt does not extend the first call's tokens (its text tokenized again: 16 became 15, 1): the whole
  // episode was refused, which ended the job; now its calls train one by one. A call with no response gives nothing.
  Trajectory t =
      trajectory_of({llm({0}, {16}, {-1.5f}, 4), llm({0, 15, 1, 32}, {8}, {-0.5f}, 5), llm({0, 7}, {}, {}, 5)});
  std::string why;
  auto samples = episode_samples(t, {1.0, 2.0, 3.0}, true, &why);
  BOOST_TEST(why == "policy call 0 is not a prefix of the episode's last prompt");
  BOOST_REQUIRE(samples.size() == 2u);
  BOOST_TEST(samples[0].tokens == (std::vector<std::int32_t>{0, 16}));
  BOOST_TEST(samples[1].tokens == (std::vector<std::int32_t>{0, 15, 1, 32, 8}));
  BOOST_TEST(samples[1].advantages[4] == 2.0f);
  // One sequence where it is one; as transitions when asked.
  Trajectory whole = trajectory_of({llm({0}, {16}, {-1.5f}, 4), llm({0, 16, 32}, {8}, {-0.5f}, 5)});
  why.clear();
  BOOST_TEST(episode_samples(whole, {1.0, 2.0}, true, &why).size() == 1u);
  BOOST_TEST(why.empty());
  BOOST_TEST(episode_samples(whole, {1.0, 2.0}, false).size() == 2u);
  // An episode of one call that produced nothing trains on nothing.
  BOOST_TEST(episode_samples(trajectory_of({llm({0, 3}, {}, {}, 1)}), {1.0}, true).empty());
}

store::Span agl_reward(const char* key, double value) {
  store::Span s;
  s.name = span_names::agl_annotation;
  s.attributes = {{"agentlightning.reward.0.name", std::string("primary")}, {key, value}};
  return s;
}

store::Span named(const std::string& name, std::vector<store::Attribute> attributes) {
  store::Span s;
  s.name = name;
  s.attributes = std::move(attributes);
  return s;
}

BOOST_AUTO_TEST_CASE(agent_lightning_rewards_go_to_the_latest_call_before_them_that_has_none) {
  // A reward before any call has nothing to go to; v0.3's reward.0.value and v0.2's `reward` both count; a second
  // reward after the same call goes to the call before it, as Agent Lightning matches them.
  Trajectory t = trajectory_of({agl_reward("agentlightning.reward.0.value", 5.0), llm({0}, {16}, {-1.5f}, 4),
                                llm({0, 16, 32}, {8}, {-0.5f}, 5), agl_reward("agentlightning.reward.0.value", 2.0),
                                agl_reward("reward", 0.5)});
  BOOST_TEST(t.rewards == (std::vector<double>{0.5, 2.0}));
  // No result span: the episode's figure is its total reward (what was credited to a call).
  BOOST_TEST(t.metrics.size() == 1u);
  BOOST_TEST(t.metrics["reward"] == 2.5);
  // One reward per call: a third after two calls finds none left.
  t = trajectory_of({llm({0}, {16}, {-1.5f}, 4), llm({0, 16, 32}, {8}, {-0.5f}, 5),
                     agl_reward("agentlightning.reward.0.value", 1.0), agl_reward("agentlightning.reward.0.value", 0.5),
                     agl_reward("agentlightning.reward.0.value", 0.25)});
  BOOST_TEST(t.rewards == (std::vector<double>{0.5, 1.0}));
  BOOST_TEST(t.metrics["reward"] == 1.5);
  // An annotation without a reward (a tag) changes nothing.
  store::Span tag;
  tag.name = span_names::agl_annotation;
  tag.attributes = {{"agentlightning.tag.0", std::string("done")}};
  BOOST_TEST(trajectory_of({llm({0}, {16}, {-1.5f}, 4), tag}).rewards == (std::vector<double>{0.0}));
}

BOOST_AUTO_TEST_CASE(of_several_reward_dimensions_dimension_0_is_the_reward) {
  // emit_reward({"brevity": 0.2, "correct": 1.0}, primary_key="correct") puts the primary dimension first.
  const store::Span reward =
      named(span_names::agl_annotation, {{"agentlightning.reward.0.name", std::string("correct")},
                                         {"agentlightning.reward.0.value", 1.0},
                                         {"agentlightning.reward.1.name", std::string("brevity")},
                                         {"agentlightning.reward.1.value", 0.2}});
  BOOST_TEST(trajectory_of({llm({0}, {16}, {-1.5f}, 4), reward}).rewards == (std::vector<double>{1.0}));
  // On a span of any name, as Agent Lightning reads it.
  const store::Span operation = named("agentlightning.operation", {{"agentlightning.reward.0.value", 0.5}});
  BOOST_TEST(trajectory_of({llm({0}, {16}, {-1.5f}, 4), operation}).rewards == (std::vector<double>{0.5}));
  // Dimension 1 alone is no reward.
  const store::Span second = named(span_names::agl_annotation, {{"agentlightning.reward.1.value", 0.2}});
  BOOST_TEST(trajectory_of({llm({0}, {16}, {-1.5f}, 4), second}).rewards == (std::vector<double>{0.0}));
}

BOOST_AUTO_TEST_CASE(agentops_rewards_are_json_in_task_or_entity_output_on_any_span) {
  auto rewards_with = [](std::vector<store::Attribute> attributes) {
    return trajectory_of({llm({0}, {16}, {-1.5f}, 4), named("reward_function.task", std::move(attributes))}).rewards;
  };
  using Text = std::string;
  BOOST_TEST(rewards_with({{"agentops.task.output", Text(R"({"type": "reward", "value": 0.75})")}})[0] == 0.75);
  BOOST_TEST(rewards_with({{"agentops.entity.output", Text(R"({"value": 1, "type": "reward"})")}})[0] == 1.0);
  // A task output that is not a reward leaves the entity output to be read.
  BOOST_TEST(rewards_with({{"agentops.task.output", Text(R"({"type": "answer", "value": 3})")},
                           {"agentops.entity.output", Text(R"({"type": "reward", "value": 0.25})")}})[0] == 0.25);
  // Not rewards: a null value, text that is not JSON, JSON that is no object, a value that is no number.
  for (const Text& output : {Text(R"({"type": "reward", "value": null})"), Text("reward 1.0"), Text("[1]"),
                             Text(R"({"type": "reward", "value": "high"})"), Text("")}) {
    BOOST_TEST_CONTEXT(output) { BOOST_TEST(rewards_with({{"agentops.task.output", output}})[0] == 0.0); }
  }
  // The plain `reward` counts on v0.2's explicit reward span (what its emit_reward wrote, and v0.3's trace adapter
  // still reads: it was read as 0 before) and on an annotation span, not on others.
  BOOST_TEST(rewards_with({{"reward", 1.0}})[0] == 0.0);
  for (const char* name : {"agentlightning.reward", "agentlightning.annotation"}) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(trajectory_of({llm({0}, {16}, {-1.5f}, 4), named(name, {{"reward", 0.75}})}).rewards ==
                 (std::vector<double>{0.75}));
    }
  }
}

BOOST_AUTO_TEST_CASE(agent_lightnings_own_llm_call_spans_are_not_calls) {
  // What its AgentOps instrumentation writes: token ids, but neither log-probs nor a policy version. The endpoint's
  // `llm` span of the same call is the one trained on.
  const store::Span theirs = named("openai.chat.completion", {{"prompt_token_ids", store::TokenIds{0}},
                                                              {"response_token_ids", store::TokenIds{16}},
                                                              {"gen_ai.response.id", std::string("chatcmpl-1")}});
  Trajectory t = trajectory_of({llm({0}, {16}, {-1.5f}, 4), theirs, agl_reward("agentlightning.reward.0.value", 1.0)});
  BOOST_TEST(t.calls.size() == 1u);
  BOOST_TEST(t.rewards == (std::vector<double>{1.0}));
  BOOST_TEST(trajectory_of({theirs}).calls.empty());
}

BOOST_AUTO_TEST_CASE(inconsistent_or_incomplete_spans_are_refused) {
  // The second prompt does not extend the first call.
  Trajectory t = trajectory_of({llm({0}, {16}, {-1.f}, 1), llm({0, 17, 32}, {8}, {-1.f}, 1)});
  BOOST_CHECK_THROW(trajectory_sample(t, {0, 0}), DecodeError);
  store::Span bare;
  bare.name = span_names::llm;
  BOOST_CHECK_THROW(trajectory_of({bare}), DecodeError);
  BOOST_CHECK_THROW(trajectory_of({llm({0}, {1}, {-1.f}, 1), reward(1.0, 3)}), DecodeError);  // no step 3
  BOOST_CHECK_THROW(trajectory_of({llm({0}, {1, 2}, {-1.f}, 1)}), DecodeError);               // logprobs short
  // Log-probs no drawn token has (an outside client's span): this rollout is refused, not the step's gradient made NaN.
  for (const float bad : {std::nanf(""), -std::numeric_limits<float>::infinity(), 0.5f, -9999.f})
    BOOST_CHECK_THROW(trajectory_of({llm({0}, {1, 2}, {-1.f, bad}, 1)}), DecodeError);
  trajectory_of({llm({0}, {1, 2}, {0.f, -999.f}, 1)});  // certain, and most unlikely: both drawn tokens' log-probs
  // Versions and steps are whole numbers from 0 (a client's -1 was cast to a version from the far future).
  for (const double bad : {-1.0, 0.5, 1e30, std::nan("")}) {
    BOOST_TEST_CONTEXT(bad) {
      BOOST_CHECK_THROW(trajectory_of({llm({0}, {1}, {-1.f}, bad)}), DecodeError);
      store::Span late_step = reward(1.0, 0);
      late_step.attributes[1].value = bad;
      BOOST_CHECK_THROW(trajectory_of({llm({0}, {1}, {-1.f}, 1), late_step}), DecodeError);
    }
  }
}

// The same prompt asked twice (n = 2, a retry) with the same answer: each call is a sample of its own with its own
// advantage; one sequence trained those tokens once, with the second call's.
BOOST_AUTO_TEST_CASE(calls_that_answer_over_each_other_train_call_by_call) {
  const Trajectory t = trajectory_of({llm({0}, {16}, {-1.5f}, 4), llm({0}, {16}, {-0.5f}, 4)});
  std::string why;
  const auto samples = episode_samples(t, {1.0, -1.0}, true, &why);
  BOOST_TEST(why == "policy call 1 answers over the response of the call before it");
  BOOST_REQUIRE(samples.size() == 2u);
  BOOST_TEST(action_tokens(samples) == 2.0);
  BOOST_TEST(samples[0].advantages[1] == 1.0f);
  BOOST_TEST(samples[1].advantages[1] == -1.0f);
  BOOST_TEST(samples[1].behaviour_logprobs[1] == -0.5f);
}

// An outside agent's span the trainers' forward cannot take (a token id past the vocabulary, a call longer than
// model.max_seq) is this rollout refused: the trainer it reached ended the job with LibTorch's "index out of range".
BOOST_AUTO_TEST_CASE(a_call_the_model_cannot_take_is_refused) {
  const Trajectory fits = trajectory_of({llm({0, 5}, {9, 3}, {-1.f, -1.f}, 1), llm({0, 5, 9, 3, 7}, {8}, {-1.f}, 1)});
  check_fits_model(fits, 10, 6);
  BOOST_CHECK_THROW(check_fits_model(fits, 9, 6), DecodeError);   // id 9 in a vocabulary of 9
  BOOST_CHECK_THROW(check_fits_model(fits, 10, 5), DecodeError);  // 5 + 1 tokens
  BOOST_CHECK_THROW(check_fits_model(trajectory_of({llm({-1}, {1}, {-1.f}, 1)}), 10, 6), DecodeError);
}

BOOST_AUTO_TEST_CASE(each_action_token_keeps_the_temperature_of_its_call) {
  // An outside agent's calls at temperatures 0.7 and 1.3; a span written before spans recorded one had grpo's.
  store::Span first = llm({0}, {16}, {-1.5f}, 4), second = llm({0, 16, 32}, {8, 9}, {-0.5f, -0.1f}, 5);
  first.attributes.push_back({"temperature", 0.7});
  second.attributes.push_back({"temperature", 1.3});
  const Trajectory t = read_trajectory({first, second}, 0.9);
  const Sample whole = trajectory_sample(t, {1.0, 2.0});
  BOOST_TEST(whole.temperatures == (std::vector<float>{1.f, 0.7f, 1.f, 1.3f, 1.3f}));
  const std::vector<Sample> calls = transition_samples(t, {1.0, 2.0});
  BOOST_TEST(calls[0].temperatures == (std::vector<float>{1.f, 0.7f}));
  BOOST_TEST(calls[1].temperatures == (std::vector<float>{1.f, 1.f, 1.f, 1.3f, 1.3f}));
  const Trajectory unrecorded = read_trajectory({llm({0}, {16}, {-1.5f}, 4)}, 0.9);
  BOOST_TEST(trajectory_sample(unrecorded, {1.0}).temperatures == (std::vector<float>{1.f, 0.9f}));
  // A temperature that is not a number of at least greedy_below (a span any agent may send) refuses the episode.
  for (const double bad : {0.0, -1.0, std::nan(""), 1e9}) {
    store::Span span = llm({0}, {16}, {-1.5f}, 4);
    span.attributes.push_back({"temperature", bad});
    BOOST_CHECK_THROW(read_trajectory({span}, 1.0), DecodeError);
  }
  store::Span text = llm({0}, {16}, {-1.5f}, 4);
  text.attributes.push_back({"temperature", std::string("0.7")});
  BOOST_CHECK_THROW(read_trajectory({text}, 1.0), DecodeError);
}

BOOST_AUTO_TEST_CASE(samples_round_trip_through_their_encoding) {
  Sample a;
  a.tokens = {0, 5, 7};
  a.action_mask = {0, 1, 1};
  a.behaviour_logprobs = {0, -1, -2};
  a.temperatures = {1, 0.7f, 1.3f};
  a.advantages = {0, 0.5f, -0.5f};
  a.policy_version = 9;
  Sample empty;
  auto back = decode_samples(encode_samples({a, empty}));
  BOOST_REQUIRE(back.size() == 2u);
  BOOST_TEST(back[0].tokens == a.tokens);
  BOOST_TEST(back[0].advantages == a.advantages);
  BOOST_TEST(back[0].temperatures == a.temperatures);
  BOOST_TEST(back[0].policy_version == 9u);
  BOOST_TEST(back[1].tokens.empty());
  std::string bytes = encode_samples({a});
  BOOST_CHECK_THROW(decode_samples(bytes.substr(0, bytes.size() - 1)), DecodeError);
  BOOST_TEST(action_tokens({a}) == 2.0);
}

BOOST_AUTO_TEST_SUITE_END()
