// The task routes for outside agents, in Agent Lightning v0.3's JSON shapes.
#include <boost/test/unit_test.hpp>

#include "fakes.hpp"

namespace arclight::serve::testing {

BOOST_AUTO_TEST_SUITE(task_routes)

BOOST_AUTO_TEST_CASE(health_is_ok_in_json) {
  Served served;
  const auto result = served.client->Get("/v1/agl/health");
  BOOST_TEST(result->get_header_value("Content-Type") == "application/json");
  BOOST_TEST(json::parse(result->body) == json({{"status", "ok"}}));
}

BOOST_AUTO_TEST_CASE(dequeue_answers_attempted_rollouts_then_an_empty_list) {
  Served served;
  const json taken = served.ok("/v1/agl/queues/rollouts/dequeue", {{"limit", 1}, {"worker_id", "w1"}});
  BOOST_REQUIRE(taken.size() == 1);
  const json& r = taken[0];
  BOOST_TEST(r["rollout_id"] == "ro-3");
  BOOST_TEST(r["input"] == json({{"secret", 42}}));  // the opaque input, as the JSON it is
  BOOST_TEST(r["status"] == "preparing");
  BOOST_TEST(r["mode"] == "train");
  BOOST_TEST(r["resources_id"].is_null());
  BOOST_TEST(r["end_time"].is_null());
  BOOST_TEST(r["metadata"] == json::object());
  BOOST_TEST(r["config"]["max_attempts"] == 1);
  BOOST_TEST(r["config"]["retry_condition"] == json::array());
  BOOST_TEST(r["attempt"]["attempt_id"] == "at-5");
  BOOST_TEST(r["attempt"]["rollout_id"] == "ro-3");
  BOOST_TEST(r["attempt"]["sequence_id"] == 1);
  BOOST_TEST(r["attempt"]["worker_id"] == "w1");
  BOOST_TEST(served.ok("/v1/agl/queues/rollouts/dequeue", json::object()) == json::array());
  BOOST_TEST(served.backend.waits.at(1) == 0.25);  // the configured long poll
}

// Agent Lightning's runners all call themselves "Worker-0": the request's credentials (Basic authentication's user, the
// process's worker id) reach the runner beside the name.
BOOST_AUTO_TEST_CASE(a_dequeue_carries_its_credentials_user) {
  Served served;
  httplib::Client process("127.0.0.1", served.server.port());
  process.set_basic_auth("runner-2-w1", token.c_str());
  const auto result =
      process.Post("/v1/agl/queues/rollouts/dequeue", json({{"worker_id", "Worker-0"}}).dump(), "application/json");
  BOOST_REQUIRE(result->status == 200);
  served.ok("/v1/agl/queues/rollouts/dequeue", {{"worker_id", "w2"}});  // a bearer token: no user
  BOOST_TEST(served.backend.callers == std::vector<std::string>({"runner-2-w1", ""}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_dequeue_with_a_bad_limit_is_422_with_detail) {
  Served served;
  const auto result = served.post("/v1/agl/queues/rollouts/dequeue", {{"limit", 0}});
  BOOST_TEST(result->status == 422);
  BOOST_TEST(json::parse(result->body)["detail"][0]["msg"].is_string());
}

BOOST_AUTO_TEST_CASE(a_reward_span_becomes_a_store_span_and_is_echoed_with_201) {
  Served served;
  const json span = {{"rollout_id", "ro-3"},
                     {"attempt_id", "at-5"},
                     {"sequence_id", 1},
                     {"trace_id", "0123456789abcdef0123456789abcdef"},
                     {"span_id", "0123456789abcdef"},
                     {"parent_id", nullptr},
                     {"name", "agentlightning.annotation"},
                     {"status", {{"status_code", "OK"}, {"description", nullptr}}},
                     {"attributes",
                      {{"agentlightning.reward.0.name", "primary"},
                       {"agentlightning.reward.0.value", 0.5},
                       {"done", true},
                       {"ids", {1, 2, 3}},
                       {"weights", {0.5, 1}},
                       {"nested", {{"a", 1}}}}},
                     {"start_time", 10.0},
                     {"end_time", 11.0}};
  const auto result = served.post("/v1/agl/spans", span);
  BOOST_TEST(result->status == 201);
  const json echo = json::parse(result->body);
  BOOST_TEST(echo["name"] == "agentlightning.annotation");
  BOOST_TEST(echo["attributes"]["agentlightning.reward.0.value"] == 0.5);
  BOOST_REQUIRE(served.backend.spans.size() == 1);
  const store::Span& stored = served.backend.spans[0];
  BOOST_TEST(stored.rollout_id == 3u);
  BOOST_TEST(stored.attempt_id == 5u);
  BOOST_TEST((stored.status == store::SpanStatus::ok));
  BOOST_TEST(stored.end_time == 11.0);
  BOOST_TEST(std::get<std::string>(*stored.find("agentlightning.reward.0.name")) == "primary");
  BOOST_TEST(std::get<double>(*stored.find("agentlightning.reward.0.value")) == 0.5);
  BOOST_TEST(std::get<bool>(*stored.find("done")));
  BOOST_TEST(std::get<store::TokenIds>(*stored.find("ids")) == (store::TokenIds{1, 2, 3}));
  BOOST_TEST(std::get<store::Floats>(*stored.find("weights")) == (store::Floats{0.5f, 1.0f}));
  BOOST_TEST(std::get<std::string>(*stored.find("nested")) == "{\"a\":1}");  // kept as its JSON text
}

BOOST_AUTO_TEST_CASE(a_span_of_an_attempt_not_here_is_404_with_detail) {
  Served served;
  const auto result = served.post("/v1/agl/spans", {{"rollout_id", "ro-3"}, {"attempt_id", "at-9"}, {"name", "x"}});
  BOOST_TEST(result->status == 404);
  BOOST_TEST(json::parse(result->body)["detail"].is_string());
}

BOOST_AUTO_TEST_CASE(a_span_that_is_not_one_is_422) {
  Served served;
  BOOST_TEST(served.post("/v1/agl/spans", {{"rollout_id", "ro-3"}, {"attempt_id", "at-5"}})->status == 422);
  BOOST_TEST(served.client->Post("/v1/agl/spans", "{nope", "application/json")->status == 422);
  const std::string deep = R"({"rollout_id": "ro-3", "attempt_id": "at-5", "name": "x", "attributes": {"a": )" +
                           std::string(1000, '[') + std::string(1000, ']') + "}}";
  BOOST_TEST(served.client->Post("/v1/agl/spans", deep, "application/json")->status == 422);
  BOOST_TEST(served.backend.spans.empty());
}

BOOST_AUTO_TEST_CASE(next_sequence_ids_count_up_per_rollout) {
  Served served;
  const json ro3 = {{"rollout_id", "ro-3"}, {"attempt_id", "at-5"}};
  BOOST_TEST(served.ok("/v1/agl/spans/next", ro3)["sequence_id"] == 1);
  BOOST_TEST(served.ok("/v1/agl/spans/next", ro3)["sequence_id"] == 2);
  BOOST_TEST(served.ok("/v1/agl/spans/next", {{"rollout_id", "ro-4"}, {"attempt_id", "at-1"}})["sequence_id"] == 1);
}

// The counters kept are the newest rollouts': memory stays bounded over a run of millions of rollouts.
BOOST_AUTO_TEST_CASE(only_the_newest_rollouts_keep_their_sequence_counters) {
  HttpServer server(test_options());
  FakeTaskBackend backend;
  add_task_routes(server, backend, {0.25, 2});
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  client.set_bearer_token_auth(token.c_str());
  const auto next = [&](const std::string& rollout) {
    const auto result = client.Post("/v1/agl/spans/next", json{{"rollout_id", rollout}, {"attempt_id", "at-1"}}.dump(),
                                    "application/json");
    BOOST_REQUIRE(result && result->status == 200);
    return json::parse(result->body)["sequence_id"].get<int>();
  };
  BOOST_TEST(next("ro-3") == 1);
  BOOST_TEST(next("ro-4") == 1);
  BOOST_TEST(next("ro-4") == 2);
  BOOST_TEST(next("ro-5") == 1);  // ro-3's counter goes
  BOOST_TEST(next("ro-4") == 3);
  BOOST_TEST(next("ro-5") == 2);
  BOOST_TEST(next("ro-3") == 1);  // counted anew, not kept: older than both kept
  BOOST_TEST(next("ro-3") == 1);
  BOOST_TEST(next("ro-5") == 3);
  BOOST_TEST(next("ro-4") == 4);
  BOOST_TEST(next("ro-6") == 1);  // ro-4's goes
  BOOST_TEST(next("ro-5") == 4);
  BOOST_TEST(next("ro-4") == 1);
}

BOOST_AUTO_TEST_CASE(an_attempts_end_answers_the_attempt) {
  Served served;
  const json attempt = served.ok("/v1/agl/rollouts/ro-3/attempts/at-5", {{"status", "succeeded"}});
  BOOST_TEST(attempt["attempt_id"] == "at-5");
  BOOST_TEST(attempt["status"] == "succeeded");
  BOOST_TEST(attempt["end_time"] == 150.0);
  BOOST_TEST(served.ok("/v1/agl/rollouts/ro-3/attempts/latest", {{"status", "running"}})["end_time"].is_null());
}

BOOST_AUTO_TEST_CASE(an_attempt_update_not_here_is_404_and_a_bad_status_422) {
  Served served;
  const auto missing = served.post("/v1/agl/rollouts/ro-3/attempts/at-6", {{"status", "failed"}});
  BOOST_TEST(missing->status == 404);
  BOOST_TEST(json::parse(missing->body)["detail"].is_string());
  BOOST_TEST(served.post("/v1/agl/rollouts/ro-3/attempts/at-5", {{"status", "timeout"}})->status == 422);
}

// Agent Lightning's update_worker, every 10 s: the process that sends it is known by its credentials, as at dequeue.
BOOST_AUTO_TEST_CASE(a_workers_heartbeat_goes_to_the_backend_with_its_credentials_user) {
  Served served;
  httplib::Client process("127.0.0.1", served.server.port());
  process.set_basic_auth("runner-2-w1", token.c_str());
  const auto result = process.Post("/v1/agl/workers/Worker-0",
                                   json({{"heartbeat_stats", {{"cpu_percent", 3.5}}}}).dump(), "application/json");
  BOOST_REQUIRE(result->status == 200);
  BOOST_TEST(json::parse(result->body)["worker_id"] == "runner-2-w1");
  BOOST_TEST(served.backend.callers == std::vector<std::string>({"runner-2-w1"}), boost::test_tools::per_element());
  BOOST_TEST(served.post("/v1/agl/workers/Worker-0", {{"heartbeat_stats", 7}})->status == 422);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace arclight::serve::testing
