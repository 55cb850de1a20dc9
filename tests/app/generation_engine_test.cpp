// The endpoint's engine (src/app/generation_engine.hpp) over a real policy: requests from many threads answered with
// the policy's own tokens, new weights taken only between responses, bad requests refused before they queue.
#include "../../src/app/generation_engine.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/types.h>

#include <chrono>
#include <thread>
#include <vector>

#include "arclight/core/error.hpp"
#include "arclight/serve/http_server.hpp"

using namespace arclight;

namespace {

ModelConfig small_model() {
  ModelConfig c;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_ff = 64;
  c.max_seq = 24;
  return c;
}

serve::GenerationRequest greedy(std::vector<std::int32_t> prompt, int tokens) {
  serve::GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = tokens;
  r.temperature = 0;
  return r;
}

std::vector<std::int32_t> read_all(serve::GenerationStream& stream) {
  std::vector<std::int32_t> ids;
  std::vector<serve::StreamedToken> got;
  while (stream.next(got, std::chrono::milliseconds(10))) {
    for (const auto& t : got) ids.push_back(t.id);
    got.clear();
  }
  for (const auto& t : got) ids.push_back(t.id);
  return ids;
}

// Steps the engine until every stream has finished.
void run_until_finished(app::GenerationEngine& engine, const std::vector<std::shared_ptr<serve::GenerationStream>>& s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto running = [&] {
    for (const auto& stream : s)
      if (stream->finish_reason() == serve::Finish::running) return true;
    return false;
  };
  while (running()) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the engine did not finish its requests");
    engine.step();
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(generation_engine)

BOOST_AUTO_TEST_CASE(requests_from_many_threads_get_the_policy_s_own_greedy_tokens) {
  model::Policy policy(small_model(), 40, 1);
  app::GenerationEngine engine(policy, 3);  // fewer rows than requests: some wait for a row
  engine.resume(7);
  std::vector<std::vector<std::int32_t>> prompts{{1, 2, 3}, {4}, {5, 6}, {7, 8, 9, 10}, {11, 12}, {13}};
  std::vector<std::shared_ptr<serve::GenerationStream>> streams(prompts.size());
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] { streams[i] = engine.submit(greedy(prompts[i], 5)); });
  for (auto& c : clients) c.join();
  run_until_finished(engine, streams);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto alone = policy.generate({prompts[i]}, 5, model::Sampling{0, 0, 1.0});
    BOOST_TEST(read_all(*streams[i]) == alone[0].tokens, "prompt " << i);
    BOOST_TEST(streams[i]->policy_version() == 7u);
    BOOST_TEST((streams[i]->finish_reason() == serve::Finish::length));
  }
}

BOOST_AUTO_TEST_CASE(new_weights_wait_until_the_responses_under_way_have_ended) {
  model::Policy policy(small_model(), 40, 1);
  model::Policy other(small_model(), 40, 2);  // the next version's weights
  app::GenerationEngine engine(policy, 4);
  engine.resume(1);
  const std::vector<std::int32_t> prompt{3, 1, 4};
  const auto old_answer = policy.generate({prompt}, 8, model::Sampling{0, 0, 1.0})[0].tokens;
  const auto new_answer = other.generate({prompt}, 8, model::Sampling{0, 0, 1.0})[0].tokens;
  BOOST_REQUIRE(old_answer != new_answer);

  auto before = engine.submit(greedy(prompt, 8));
  engine.step();
  engine.step();  // `before` is under way on version 1
  engine.drain();
  auto during = engine.submit(greedy(prompt, 8));  // arrives while draining: waits
  while (!engine.drained()) engine.step();
  BOOST_TEST((before->finish_reason() == serve::Finish::length));
  BOOST_TEST((during->finish_reason() == serve::Finish::running));  // not started on the old weights
  const auto weights = other.flat_parameters();
  policy.load_flat_parameters(weights.data(), weights.size());
  engine.resume(2);
  run_until_finished(engine, {during});
  BOOST_TEST(read_all(*before) == old_answer);
  BOOST_TEST(before->policy_version() == 1u);
  BOOST_TEST(read_all(*during) == new_answer);
  BOOST_TEST(during->policy_version() == 2u);
}

// A response of more choices than free rows (n = 6 on 4 rows) that new weights catch half admitted: its other choices
// still run on its version, then the weights load. (They joined the next version's batch, one GRPO group of two.)
BOOST_AUTO_TEST_CASE(a_response_larger_than_the_free_rows_runs_whole_on_one_version) {
  model::Policy policy(small_model(), 40, 1);
  model::Policy other(small_model(), 40, 2);
  app::GenerationEngine engine(policy, 4);
  engine.resume(1);
  const std::vector<std::int32_t> prompt{3, 1, 4};
  const auto old_answer = policy.generate({prompt}, 6, model::Sampling{0, 0, 1.0})[0].tokens;
  BOOST_REQUIRE(old_answer != other.generate({prompt}, 6, model::Sampling{0, 0, 1.0})[0].tokens);
  const auto group = engine.submit_group(std::vector<serve::GenerationRequest>(6, greedy(prompt, 6)));
  engine.step();  // four of the six under way
  engine.drain();
  const auto next = engine.submit(greedy(prompt, 6));  // a new response: waits for the next version
  int steps = 0;
  while (!engine.drained() && ++steps < 1000) engine.step();
  BOOST_REQUIRE(engine.drained());
  for (const auto& choice : group) {
    BOOST_TEST((choice->finish_reason() == serve::Finish::length));
    BOOST_TEST(read_all(*choice) == old_answer);
    BOOST_TEST(choice->policy_version() == 1u);
  }
  BOOST_TEST((next->finish_reason() == serve::Finish::running));
  // A group with one request the engine cannot run is refused whole, nothing of it queued.
  std::vector<serve::GenerationRequest> one_bad(2, greedy(prompt, 6));
  one_bad[1].prompt = {99};
  BOOST_CHECK_THROW(engine.submit_group(one_bad), UsageError);
  const auto weights = other.flat_parameters();
  policy.load_flat_parameters(weights.data(), weights.size());
  engine.resume(2);
  run_until_finished(engine, {next});
  BOOST_TEST(next->policy_version() == 2u);
  BOOST_TEST(!engine.step());  // nothing of the refused group ran
}

BOOST_AUTO_TEST_CASE(cancelled_and_closed_requests_end_and_bad_ones_are_refused) {
  model::Policy policy(small_model(), 40, 1);
  app::GenerationEngine engine(policy, 2);
  engine.resume(0);
  // Stop tokens beyond the vocabulary (a template's, over a smaller model) are dropped, not an error.
  auto beyond = greedy({1, 2}, 3);
  beyond.stop_tokens = {40, 258};
  auto answered = engine.submit(beyond);
  while (answered->finish_reason() == serve::Finish::running) engine.step();
  BOOST_TEST((answered->finish_reason() == serve::Finish::length));
  auto cancelled = engine.submit(greedy({1, 2}, 10));
  engine.step();
  cancelled->cancel();
  engine.step();
  BOOST_TEST((cancelled->finish_reason() == serve::Finish::cancelled));
  auto waiting = engine.submit(greedy({1}, 4));
  engine.close("stopping");
  BOOST_TEST((waiting->finish_reason() == serve::Finish::error));
  BOOST_TEST(waiting->error() == "stopping");
  BOOST_CHECK_THROW(engine.submit(greedy({}, 4)), UsageError);
  BOOST_CHECK_THROW(engine.submit(greedy({40}, 4)), UsageError);                              // outside the vocabulary
  BOOST_CHECK_THROW(engine.submit(greedy(std::vector<std::int32_t>(24, 1), 1)), UsageError);  // no room to answer
  BOOST_CHECK_THROW(engine.submit(greedy({1}, 0)), UsageError);
  // What the batch would refuse on the engine's thread (a 500, the response's other choices run): refused here, the
  // whole response with it.
  auto too_many_alternatives = greedy({1}, 4);
  too_many_alternatives.top_logprobs = 21;
  auto no_mass = greedy({1}, 4);
  no_mass.top_p = 0;
  BOOST_CHECK_THROW(engine.submit_group({greedy({1}, 4), too_many_alternatives}), UsageError);
  BOOST_CHECK_THROW(engine.submit(no_mass), UsageError);
  // A request after the close would wait for ever (and the HTTP server's stop for it): refused, 503.
  BOOST_CHECK_EXCEPTION(engine.submit(greedy({1}, 4)), serve::HttpError,
                        [](const serve::HttpError& e) { return e.status() == 503; });
}

// A request's top_k reaches the sampler: the one most likely token at temperature 1 is the greedy answer.
BOOST_AUTO_TEST_CASE(top_k_of_one_draws_the_greedy_tokens) {
  model::Policy policy(small_model(), 40, 1);
  app::GenerationEngine engine(policy, 2);
  engine.resume(0);
  auto request = greedy({1, 2, 3}, 8);
  request.temperature = 1;
  request.top_k = 1;
  const auto stream = engine.submit(request);
  run_until_finished(engine, {stream});
  BOOST_TEST(read_all(*stream) == policy.generate({{1, 2, 3}}, 8, model::Sampling{0, 0, 1.0})[0].tokens);
}

// A step that throws (out of memory on a device: here a weight of the wrong shape, so the forward fails inside the
// step) ends the requests in the batch with its error; the engine serves the next request with a new batch.
BOOST_AUTO_TEST_CASE(a_step_that_fails_ends_its_requests_and_the_engine_serves_on) {
  model::Policy policy(small_model(), 40, 1);
  app::GenerationEngine engine(policy, 2);
  engine.resume(0);
  torch::Tensor embedding = policy.parameters().at(0);
  const torch::Tensor kept = embedding.detach().clone();
  embedding.set_data(torch::zeros({1, 1}));
  const auto failed = engine.submit(greedy({1, 2, 3}, 5));
  const auto also_failed = engine.submit(greedy({4}, 5));
  run_until_finished(engine, {failed, also_failed});
  for (const auto& stream : {failed, also_failed}) {
    BOOST_TEST((stream->finish_reason() == serve::Finish::error));
    BOOST_TEST(stream->error().find("the decode step failed") == 0u, stream->error());
  }
  embedding.set_data(kept);
  const auto next = engine.submit(greedy({1, 2, 3}, 5));
  run_until_finished(engine, {next});
  BOOST_TEST((next->finish_reason() == serve::Finish::length));
  BOOST_TEST(read_all(*next) == policy.generate({{1, 2, 3}}, 5, model::Sampling{0, 0, 1.0})[0].tokens);
}

BOOST_AUTO_TEST_SUITE_END()
