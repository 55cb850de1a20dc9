// Rank 0's store API over real HTTP: the store's behaviour suite through it (a Store that speaks Agent Lightning's
// routes, against the MemoryStore the MPI runners would share), then its JSON shapes, status codes and the token.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "http_store.hpp"

namespace arclight::serve {

BOOST_AUTO_TEST_SUITE(store_api)

// The store's behaviour suite, each case on a fresh store, through the HTTP API.
BOOST_DATA_TEST_CASE(store_suite, boost::unit_test::data::xrange(suite::cases().size()), index) {
  auto [name, run] = suite::cases()[index];
  BOOST_TEST_CONTEXT(name) {
    HttpHarness h;
    run(h);
  }
}

BOOST_AUTO_TEST_CASE(what_an_mpi_runner_does_an_http_client_sees_at_once) {
  HttpHarness h;
  const Rollout r = h.memory().enqueue(suite::task("from rank 0"));
  const AttemptedRollout taken = *h.client().dequeue("python-runner");
  BOOST_TEST(taken.rollout.id == r.id);
  h.memory().add_span(suite::span_of(taken));  // as a runner's span batch arrives over MPI
  const Json next = h.client().call("POST", "/spans/next", {{"rollout_id", rollout_name(r.id)}});
  BOOST_TEST(next["sequence_id"] == 2);
  BOOST_TEST((h.memory().get_rollout(r.id).status == RolloutStatus::running));
}

// What Agent Lightning's server answers for what it does not hold (its client raises on any 4xx): spans of an unknown
// rollout or attempt are an empty page (a next sequence id for one stays 404: the store's contract). The latest
// resources are never rank 0's ledger of trained rollouts, and a rollout named twice in a query is listed once.
BOOST_AUTO_TEST_CASE(what_the_store_does_not_hold_is_answered_as_agent_lightning_does) {
  HttpHarness h;
  httplib::Client c("127.0.0.1", h.port());
  c.set_bearer_token_auth(token.c_str());
  const Rollout r = h.memory().enqueue(suite::task("one"));
  const AttemptedRollout taken = *h.client().dequeue("w");
  h.memory().add_span(suite::span_of(taken));
  const Rollout other = h.memory().enqueue(suite::task("two"));
  const AttemptedRollout other_taken = *h.client().dequeue("w");
  const auto total = [&](const std::string& query) {
    const auto answer = c.Get(("/v1/agl/spans?" + query).c_str());
    BOOST_REQUIRE(answer);
    BOOST_TEST(answer->status == 200, query);
    return Json::parse(answer->body)["total"].get<int>();
  };
  BOOST_TEST(total("rollout_id=" + rollout_name(r.id)) == 1);
  BOOST_TEST(total("rollout_id=ro-999") == 0);
  BOOST_TEST(total("rollout_id=ro-abcdef123456") == 0);
  BOOST_TEST(total("rollout_id=" + rollout_name(r.id) + "&attempt_id=" + attempt_name(other_taken.attempt.id)) == 0);
  BOOST_TEST(total("rollout_id=" + rollout_name(r.id) + "&attempt_id=at-999") == 0);
  BOOST_TEST(total("rollout_id=" + rollout_name(r.id) + "&attempt_id=" + attempt_name(taken.attempt.id)) == 1);
  BOOST_TEST(total("rollout_id=" + rollout_name(other.id) + "&attempt_id=latest") == 0);
  BOOST_TEST(c.Post("/v1/agl/spans/next", R"({"rollout_id": "ro-999"})", "application/json")->status == 404);
  // The store's word for "the latest attempt" is no attempt's name: it named the latest one's spans.
  BOOST_TEST(total("rollout_id=" + rollout_name(r.id) + "&attempt_id=at-18446744073709551615") == 0);
  // The attempts of a rollout the store does not hold: an empty page (Agent Lightning queries by rollout id).
  for (const char* path : {"/v1/agl/rollouts/ro-999/attempts", "/v1/agl/rollouts/nonsense/attempts"}) {
    const auto answer = c.Get(path);
    BOOST_TEST(answer->status == 200, path);
    BOOST_TEST(Json::parse(answer->body)["total"] == 0, path);
  }
  // A list filter given empty matches nothing (Agent Lightning's `within []`); under "or" the other filters still do.
  const auto searched = [&](const char* path, const char* body) {
    const auto answer = c.Post(path, body, "application/json");
    BOOST_TEST(answer->status == 200, body);
    return Json::parse(answer->body)["total"].get<int>();
  };
  BOOST_TEST(searched("/v1/agl/rollouts/search", "{}") == 2);
  BOOST_TEST(searched("/v1/agl/rollouts/search", R"({"rollout_id_in": []})") == 0);
  BOOST_TEST(searched("/v1/agl/rollouts/search", R"({"status_in": []})") == 0);
  BOOST_TEST(searched("/v1/agl/rollouts/search", R"({"status_in": [], "rollout_id_contains": "ro-",
                                                     "filter_logic": "or"})") == 2);
  BOOST_TEST(searched("/v1/agl/rollouts/search", R"({"rollout_id_in": [], "filter_logic": "or"})") == 0);
  BOOST_TEST(searched(("/v1/agl/rollouts/" + rollout_name(r.id) + "/attempts/search").c_str(), "{}") == 1);
  BOOST_TEST(
      searched(("/v1/agl/rollouts/" + rollout_name(r.id) + "/attempts/search").c_str(), R"({"status_in": []})") == 0);
  BOOST_TEST(searched("/v1/agl/workers/search", "{}") == 1);
  BOOST_TEST(searched("/v1/agl/workers/search", R"({"status_in": []})") == 0);

  const Json twice = Json::parse(
      c.Get(("/v1/agl/rollouts?rollout_id_in=" + rollout_name(r.id) + "&rollout_id_in=" + rollout_name(r.id)).c_str())
          ->body);
  BOOST_TEST(twice["total"] == 1);
  BOOST_TEST(twice["items"].size() == 1u);

  // Before any policy version, a rollout enqueued without resources runs with the latest; rank 0's ledger is none.
  const Json mine =
      Json::parse(c.Post("/v1/agl/resources", R"({"prompt": {"resource_type": "prompt_template", "template": "x"}})",
                         "application/json")
                      ->body);
  h.memory().add_resources("trained", std::string("\x01", 1));
  const Json latest = Json::parse(c.Get("/v1/agl/resources/latest")->body);
  BOOST_TEST(latest["resources_id"] == mine["resources_id"]);
  const Json listed = Json::parse(c.Get("/v1/agl/resources")->body);
  BOOST_TEST(listed["total"] == 1);
  const Json enqueued = Json::parse(
      c.Post("/v1/agl/queues/rollouts/enqueue", R"({"rollouts": [{"input": 1}]})", "application/json")->body);
  BOOST_TEST(enqueued[0]["resources_id"] == mine["resources_id"]);
}

// Agent Lightning's client sends every field of a RolloutConfig, its timeouts null unless set: here they are the job's
// (rollout.*), so that a rollout whose runner is gone ends, and rank 0 lets go of the rollouts after it. 0 is none.
BOOST_AUTO_TEST_CASE(a_rollouts_timeouts_left_out_are_the_jobs) {
  StoreRouteOptions routes;
  routes.rollout_defaults.timeout_seconds = 300;
  routes.rollout_defaults.unresponsive_seconds = 30;
  routes.rollout_defaults.max_attempts = 2;
  routes.rollout_defaults.retry_condition = bit(AttemptStatus::unresponsive);
  HttpHarness h(routes);
  httplib::Client c("127.0.0.1", h.port());
  c.set_bearer_token_auth(token.c_str());
  const auto enqueue = [&](const std::string& config) {
    const auto answer = c.Post("/v1/agl/queues/rollouts/enqueue",
                               R"({"rollouts": [{"input": 1, "config": )" + config + "}]}", "application/json");
    BOOST_REQUIRE(answer->status == 201);
    return Json::parse(answer->body).at(0);
  };
  const Json agl =
      enqueue(R"({"timeout_seconds": null, "unresponsive_seconds": null, "max_attempts": 1, "retry_condition": []})");
  BOOST_TEST(agl["config"]["timeout_seconds"] == 300.0);
  BOOST_TEST(agl["config"]["unresponsive_seconds"] == 30.0);
  BOOST_TEST(agl["config"]["max_attempts"] == 1);
  BOOST_TEST(agl["config"]["retry_condition"] == Json::array());
  const Json empty = enqueue("{}");
  BOOST_TEST(empty["config"]["max_attempts"] == 2);
  BOOST_TEST(empty["config"]["retry_condition"] == Json::array({"unresponsive"}));
  const Json none = enqueue(R"({"timeout_seconds": 0, "unresponsive_seconds": 0})");
  BOOST_TEST(none["config"]["timeout_seconds"].is_null());
  BOOST_TEST(none["config"]["unresponsive_seconds"].is_null());
  // Sent back as answered (null: no limit), an update keeps the rollout's own; a field left out keeps it too.
  const std::string none_path = "/v1/agl/rollouts/" + none["rollout_id"].get<std::string>();
  const Json updated =
      Json::parse(c.Post(none_path.c_str(), Json({{"config", none["config"]}}).dump(), "application/json")->body);
  BOOST_TEST(updated["config"]["timeout_seconds"].is_null());
  BOOST_TEST(updated["config"]["unresponsive_seconds"].is_null());
  const Json fewer =
      Json::parse(c.Post(none_path.c_str(), R"({"config": {"max_attempts": 3}})", "application/json")->body);
  BOOST_TEST(fewer["config"]["max_attempts"] == 3);
  BOOST_TEST(fewer["config"]["timeout_seconds"].is_null());
  // The first one's runner goes silent: the watchdog ends its attempt, and (max_attempts 1) the rollout.
  const AttemptedRollout taken = *h.client().dequeue("gone");
  BOOST_TEST(rollout_name(taken.rollout.id) == agl["rollout_id"].get<std::string>());
  h.advance(31);
  h.scan();
  BOOST_TEST((h.memory().get_rollout(taken.rollout.id).status == RolloutStatus::failed));
}

BOOST_AUTO_TEST_CASE(agent_lightnings_shapes_and_quirks) {
  HttpHarness h;
  httplib::Client c("127.0.0.1", h.port());
  c.set_bearer_token_auth(token.c_str());
  // 201 for an enqueue; a rollout never attempted has no "attempt" key at all.
  auto created =
      c.Post("/v1/agl/queues/rollouts/enqueue", R"({"rollouts": [{"input": {"q": 1}}]})", "application/json");
  BOOST_REQUIRE(created);
  BOOST_TEST(created->status == 201);
  const Json rollout = Json::parse(created->body).at(0);
  BOOST_TEST(rollout["input"] == Json({{"q", 1}}));
  BOOST_TEST(rollout["status"] == "queuing");
  const std::string id = rollout["rollout_id"];
  const Json fetched = Json::parse(c.Get(("/v1/agl/rollouts/" + id).c_str())->body);
  BOOST_TEST(!fetched.contains("attempt"));
  h.client().dequeue("w1");
  BOOST_TEST(Json::parse(c.Get(("/v1/agl/rollouts/" + id).c_str())->body)["attempt"]["sequence_id"] == 1);
  // A missing rollout, attempt or resources is 200 null, in JSON.
  for (const char* path :
       {"/v1/agl/rollouts/ro-999", "/v1/agl/rollouts/nonsense", "/v1/agl/rollouts/ro-999/attempts/latest",
        "/v1/agl/resources/latest", "/v1/agl/resources/rs-9", "/v1/agl/workers/nobody"}) {
    auto result = c.Get(path);
    BOOST_REQUIRE(result);
    BOOST_TEST(result->status == 200, path);
    BOOST_TEST(result->body == "null", path);
    BOOST_TEST(result->get_header_value("Content-Type") == "application/json", path);
  }
  // An empty queue is an empty list; the health probe answers.
  BOOST_TEST(c.Post("/v1/agl/queues/rollouts/dequeue", "", "application/json")->body == "[]");
  BOOST_TEST(Json::parse(c.Get("/v1/agl/health")->body) == Json({{"status", "ok"}}));
  // Resources: 201, version 1, then an upsert gives version 2; a rollout enqueued without resources names the latest
  // policy version (what arclight's runners run with), not the latest of any resources.
  auto added =
      c.Post("/v1/agl/resources", R"({"main_llm": {"resource_type": "llm", "endpoint": "http://x", "model": "m"}})",
             "application/json");
  BOOST_TEST(added->status == 201);
  const Json v1 = Json::parse(added->body);
  BOOST_TEST(v1["version"] == 1);
  BOOST_TEST(v1["resources"]["main_llm"]["model"] == "m");
  const Json v2 = Json::parse(
      c.Post(("/v1/agl/resources/" + v1["resources_id"].get<std::string>()).c_str(), R"({"a": {}})", "application/json")
          ->body);
  BOOST_TEST(v2["version"] == 2);
  BOOST_TEST(v2["resources_id"] != v1["resources_id"]);  // versions are immutable: each has its id
  // The policy versions are the trainers' (their content is arclight's wire encoding): not written over HTTP.
  const std::string policy = resources_name(h.memory().add_resources("policy", std::string("\x01\x02", 2)).id);
  auto overwrite = c.Post("/v1/agl/resources/policy", "{}", "application/json");
  BOOST_TEST(overwrite->status == 409);
  BOOST_TEST(c.Post(("/v1/agl/resources/" + policy).c_str(), "{}", "application/json")->status == 409);
  BOOST_TEST(Json::parse(c.Get(("/v1/agl/resources/" + policy).c_str())->body)["resources"] == Json::object());
  c.Post("/v1/agl/resources", "{}", "application/json");
  h.advance(1.0);  // a later start_time, to sort by
  const Json later = Json::parse(c.Post("/v1/agl/queues/rollouts/enqueue",
                                        R"({"rollouts": [{"input": 1, "resources_id": null}]})", "application/json")
                                     ->body);
  BOOST_TEST(later[0]["resources_id"] == policy);
  // Pagination: the total before paging; limit 0 and a sort by no field are 400 with a detail string.
  const Json page = Json::parse(c.Post("/v1/agl/rollouts/search", R"({"limit": 1, "offset": 1, "sort_by": "start_time",
                                        "sort_order": "desc"})",
                                       "application/json")
                                    ->body);
  BOOST_TEST(page["total"] == 2);
  BOOST_TEST(page["items"].size() == 1u);
  BOOST_TEST(page["items"][0]["rollout_id"] == id);
  for (const char* bad :
       {R"({"limit": 0})", R"({"sort_by": "nonsense"})", R"({"offset": -1})", R"({"filter_logic": "xor"})"}) {
    auto result = c.Post("/v1/agl/rollouts/search", bad, "application/json");
    BOOST_TEST(result->status == 400, bad);
    BOOST_TEST(Json::parse(result->body)["detail"].is_string(), bad);
  }
  BOOST_TEST(Json::parse(c.Get("/v1/agl/rollouts?status_in=queuing&status_in=preparing")->body)["total"] == 2);
  // A body that does not validate is 422 in pydantic's shape; null where null is not taken is 400.
  auto unparsable = c.Post("/v1/agl/queues/rollouts/enqueue", "{not json", "application/json");
  BOOST_TEST(unparsable->status == 422);
  BOOST_TEST(Json::parse(unparsable->body)["detail"][0]["msg"].is_string());
  // Nested 100,000 deep (200 KB): the server's thread overflowed its stack dumping it; now refused like non-JSON,
  // while 256 levels still go.
  const auto nested = [](int depth) {
    return R"({"rollouts": [{"input": )" + std::string(depth, '[') + std::string(depth, ']') + "}]}";
  };
  BOOST_TEST(c.Post("/v1/agl/queues/rollouts/enqueue", nested(100000), "application/json")->status == 422);
  BOOST_TEST(c.Post("/v1/agl/queues/rollouts/enqueue", nested(250), "application/json")->status == 201);
  BOOST_TEST(c.Post(("/v1/agl/rollouts/" + id).c_str(), R"({"status": null})", "application/json")->status == 400);
  BOOST_TEST(c.Post(("/v1/agl/rollouts/" + id).c_str(), R"({"status": "bogus"})", "application/json")->status == 422);
  // A move the store refuses is 409 with its reason; what does not exist is 404.
  auto refused = c.Post(("/v1/agl/rollouts/" + id).c_str(), R"({"status": "running"})", "application/json");
  BOOST_TEST(refused->status == 409);
  BOOST_TEST(Json::parse(refused->body)["detail"].get<std::string>().find("cannot") != std::string::npos);
  BOOST_TEST(c.Post("/v1/agl/no/such/route", "{}", "application/json")->status == 404);
  // Workers: a heartbeat upserts one.
  const Json worker =
      Json::parse(c.Post("/v1/agl/workers/Worker-0", R"({"heartbeat_stats": {"cpu": 1}})", "application/json")->body);
  BOOST_TEST(worker["worker_id"] == "Worker-0");
  BOOST_TEST(c.Post("/v1/agl/workers/Worker-0", R"({"heartbeat_stats": null})", "application/json")->status == 400);
}

// A span comes back as it was sent, what the record does not model included, and the record keeps what arclight
// reads: an integer attribute is the double the adapter takes, and the JSON answer says 5, not 5.0.
// A rollout's mode left out or null is Agent Lightning's None: null in every answer (it was "train", and Agent
// Lightning's runner took its training path for it), set by an update's null too; "none" is no mode's name.
BOOST_AUTO_TEST_CASE(a_rollout_without_a_mode_is_null_as_agent_lightning_has_it) {
  HttpHarness h;
  httplib::Client c("127.0.0.1", h.port());
  c.set_bearer_token_auth(token.c_str());
  const Json enqueued =
      Json::parse(c.Post("/v1/agl/queues/rollouts/enqueue",
                         R"({"rollouts": [{"input": 1}, {"input": 2, "mode": null}, {"input": 3, "mode": "val"}]})",
                         "application/json")
                      ->body);
  BOOST_REQUIRE(enqueued.size() == 3u);
  BOOST_TEST(enqueued[0]["mode"].is_null());
  BOOST_TEST(enqueued[1]["mode"].is_null());
  BOOST_TEST(enqueued[2]["mode"] == "val");
  const std::string path = "/v1/agl/rollouts/" + enqueued[2]["rollout_id"].get<std::string>();
  BOOST_TEST(Json::parse(c.Post(path.c_str(), R"({"mode": null})", "application/json")->body)["mode"].is_null());
  BOOST_TEST(Json::parse(c.Get(path.c_str())->body)["mode"].is_null());
  const Json started = Json::parse(c.Post("/v1/agl/rollouts", R"({"input": 4})", "application/json")->body);
  BOOST_TEST(started["mode"].is_null());
  BOOST_TEST(
      c.Post("/v1/agl/queues/rollouts/enqueue", R"({"rollouts": [{"input": 5, "mode": "none"}]})", "application/json")
          ->status == 422);
  BOOST_TEST(c.Post(path.c_str(), R"({"mode": "none"})", "application/json")->status == 422);
}

BOOST_AUTO_TEST_CASE(a_span_comes_back_as_it_was_sent) {
  HttpHarness h;
  httplib::Client c("127.0.0.1", h.port());
  c.set_bearer_token_auth(token.c_str());
  h.memory().enqueue(suite::task("one"));
  const AttemptedRollout taken = *h.client().dequeue("w");
  Json sent = Json::parse(R"({"sequence_id": 4, "trace_id": "t", "span_id": "s", "parent_id": null, "name": "tool",
      "status": {"description": "no code given"},
      "attributes": {"turn": 5, "big": 18446744073709551615, "words": ["a", "b"], "map": {"k": [1, "x"]},
                     "none": null, "ids": [1, 2], "reward": 0.5},
      "events": [{"name": "e", "attributes": {"n": 1}, "timestamp": 2.5}], "links": [],
      "start_time": 1.5, "end_time": 2.0, "context": {"trace_id": "t", "span_id": "s", "is_remote": false,
      "trace_state": {}}, "parent": null, "resource": {"attributes": {"service.name": "agent"}, "schema_url": ""},
      "custom": {"kept": true}})");
  sent["rollout_id"] = rollout_name(taken.rollout.id);
  sent["attempt_id"] = attempt_name(taken.attempt.id);
  BOOST_TEST(c.Post("/v1/agl/spans", sent.dump(), "application/json")->status == 201);
  const Json page = Json::parse(c.Get(("/v1/agl/spans?rollout_id=" + rollout_name(taken.rollout.id)).c_str())->body);
  BOOST_REQUIRE(page["items"].size() == 1u);
  Json expected = sent;
  expected["status"]["status_code"] = "UNSET";  // pydantic's default
  // The same keys, values and JSON types (compared with the keys sorted: the answer has Span's order)
  const auto sorted = [](const Json& j) { return nlohmann::json::parse(j.dump()).dump(); };
  BOOST_TEST(sorted(page["items"][0]) == sorted(expected));
  SpanFilter of_the_rollout;
  of_the_rollout.rollout_id = taken.rollout.id;
  const Span stored = h.memory().query_spans(of_the_rollout, {}).items.at(0);
  BOOST_TEST(std::get<double>(*stored.find("turn")) == 5.0);
  BOOST_TEST(std::get<std::string>(*stored.find("map")) == R"({"k":[1,"x"]})");
}

// On a runner rank (agent.name = "agl"), a policy version is the LLM that the runner's endpoint serves, in the shape
// of Agent Lightning's ProxyLLM; other resources read as they were written.
BOOST_AUTO_TEST_CASE(policy_versions_read_as_a_proxy_llm_where_one_is_served) {
  StoreRouteOptions routes;
  routes.policy_llm = PolicyLlm{"http://127.0.0.1:5000/v1", "tiny", "the-secret", 0.7};
  HttpHarness h(routes);
  h.memory().add_resources("policy", std::string("\x01", 1));
  const ResourcesVersion second = h.memory().update_resources("policy", std::string("\x02", 1));
  h.memory().add_resources("prompts", R"({"p": {"resource_type": "prompt_template", "template": "x"}})");
  httplib::Client c("127.0.0.1", h.port());
  c.set_bearer_token_auth(token.c_str());
  const Json update = Json::parse(c.Get(("/v1/agl/resources/" + resources_name(second.id)).c_str())->body);
  BOOST_TEST(update["version"] == 2);
  const Json llm = update["resources"]["main_llm"];
  BOOST_TEST(llm == Json::parse(R"({"resource_type": "proxy_llm", "endpoint": "http://127.0.0.1:5000/v1",
      "model": "tiny", "api_key": "the-secret", "sampling_parameters": {"temperature": 0.7}})"));
  const Json all = Json::parse(c.Get("/v1/agl/resources")->body);
  BOOST_TEST(all["total"] == 3);
  BOOST_TEST(all["items"][0]["resources"]["main_llm"]["resource_type"] == "proxy_llm");
  BOOST_TEST(all["items"][2]["resources"]["p"]["template"] == "x");
}

// GET /resources lists the versions without their content and reads the content of its page's only; the page comes
// in the order asked. A version lost with a damaged checkpoint segment is left out: the query answers the others.
BOOST_AUTO_TEST_CASE(a_resources_query_pages_and_sorts_what_the_store_lists) {
  HttpHarness h;
  ManualClock clock;
  MemoryStore before(clock);
  before.add_resources("lost", R"({"k": {"n": 0}})");
  before.enqueue(suite::task("a rollout ends the first segment"));
  const std::size_t first_segment = before.export_history(0, before.log_lengths().first).size();
  for (int n = 1; n <= 4; ++n)
    before.add_resources("r" + std::to_string(n), R"({"k": {"n": )" + std::to_string(n) + "}}");
  const MemoryStore::Snapshot whole = before.export_state();
  h.memory().import_state(whole.tables, whole.history.substr(first_segment), whole.span_log, first_segment);
  httplib::Client c("127.0.0.1", h.port());
  c.set_bearer_token_auth(token.c_str());
  const auto page = [&](const std::string& query) {
    return Json::parse(c.Get(("/v1/agl/resources" + query).c_str())->body);
  };
  const Json all = page("");
  BOOST_TEST(all["total"] == 4);
  BOOST_TEST(all["items"][0]["resources_id"] == "rs-2");
  BOOST_TEST(all["items"][3]["resources"]["k"]["n"] == 4);
  const Json newest = page("?limit=2&offset=1&sort_by=resources_id&sort_order=desc");
  BOOST_TEST(newest["total"] == 4);
  BOOST_REQUIRE(newest["items"].size() == 2u);
  BOOST_TEST(newest["items"][0]["name"] == "r3");
  BOOST_TEST(newest["items"][0]["resources"]["k"]["n"] == 3);
  BOOST_TEST(newest["items"][1]["resources"]["k"]["n"] == 2);
  const Json one = page("?resources_id=rs-4");
  BOOST_TEST(one["total"] == 1);
  BOOST_TEST(one["items"][0]["resources"]["k"]["n"] == 3);
}

BOOST_AUTO_TEST_CASE(without_the_token_nothing_is_there) {
  HttpHarness h;
  httplib::Client c("127.0.0.1", h.port());
  for (const std::string& path :
       std::vector<std::string>{"/v1/agl/health", "/wrong/v1/agl/health", "/" + token + "x/v1/agl/health"}) {
    auto result = c.Get(path.c_str());
    BOOST_REQUIRE(result);
    BOOST_TEST(result->status == 404, path);
  }
  BOOST_TEST(Json::parse(c.Get("/v1/agl/statistics")->body)["detail"] == "Not Found");
  // One answer whatever the path: OTLP's protobuf status or OpenAI's shape told what is served there (and matching
  // the error patterns, which hold the secret, took longer the more of it a path got right).
  for (const auto& result : {c.Post("/v1/traces", "x", "application/x-protobuf"), c.Get("/"),
                             c.Post("/v1/chat/completions", "{}", "application/json")}) {
    BOOST_REQUIRE(result);
    BOOST_TEST(result->status == 404);
    BOOST_TEST(result->get_header_value("Content-Type") == "application/json");
    BOOST_TEST(result->body == R"({"detail": "Not Found"})");
  }
  BOOST_TEST(c.Get(("/" + token + "/v1/agl/health").c_str())->status == 200);
  // A path that has no route under the secret: the answer does not repeat the secret (answers end up in logs).
  const auto unrouted = c.Get(("/" + token + "/v1/agl/no/such/route").c_str());
  BOOST_REQUIRE(unrouted);
  BOOST_TEST(unrouted->status == 404);
  BOOST_TEST(unrouted->body.find(token) == std::string::npos, unrouted->body);
  BOOST_TEST(unrouted->body.find("/<secret>/v1/agl/no/such/route") != std::string::npos, unrouted->body);
  httplib::Client wrong("127.0.0.1", h.port());
  wrong.set_bearer_token_auth("not-the-token");
  BOOST_TEST(wrong.Get("/v1/agl/health")->status == 404);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace arclight::serve
