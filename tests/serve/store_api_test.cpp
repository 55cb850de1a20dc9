// Rank 0's store API over real HTTP: the store's behaviour suite through it (a Store that speaks Agent Lightning's
// routes, against the MemoryStore the MPI runners would share), then its JSON shapes, status codes and the token.
#include <httplib.h>

#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>
#include <mutex>

#include "../store/store_suite.hpp"
#include "arclight/serve/http_server.hpp"
#include "arclight/serve/ids.hpp"
#include "arclight/serve/store_routes.hpp"
#include "arclight/store/memory_store.hpp"
#include "store_json.hpp"

namespace arclight::serve {
namespace {

using namespace arclight::store;
const std::string token = "0123456789abcdef0123456789abcdef";

double time_of(const Json& v) { return v.is_null() ? 0 : v.get<double>(); }

RolloutConfig config_from(const Json& j) {
  RolloutConfig c;
  c.timeout_seconds = time_of(j["timeout_seconds"]);
  c.unresponsive_seconds = time_of(j["unresponsive_seconds"]);
  c.max_attempts = j["max_attempts"].get<std::uint32_t>();
  for (const Json& s : j["retry_condition"]) c.retry_condition |= bit(*parse_attempt_status(s.get<std::string>()));
  return c;
}

Json config_to(const RolloutConfig& c) {
  Json retry = Json::array();
  for (int s = 0; s < attempt_status_count; ++s)
    if (c.retries_on(static_cast<AttemptStatus>(s))) retry.push_back(to_string(static_cast<AttemptStatus>(s)));
  return {{"timeout_seconds", c.timeout_seconds},
          {"unresponsive_seconds", c.unresponsive_seconds},
          {"max_attempts", c.max_attempts},
          {"retry_condition", retry}};
}

template <class Enum>
Enum enum_from(const Json& j, int count) {
  for (int i = 0; i < count; ++i)
    if (to_string(static_cast<Enum>(i)) == j.get<std::string>()) return static_cast<Enum>(i);
  throw std::runtime_error("unknown value " + j.dump());
}

Attempt attempt_from(const Json& j) {
  Attempt a;
  a.id = *parse_attempt_name(j["attempt_id"].get<std::string>());
  a.rollout_id = *parse_rollout_name(j["rollout_id"].get<std::string>());
  a.sequence_id = j["sequence_id"].get<std::uint32_t>();
  a.worker_id = j["worker_id"].is_null() ? "" : j["worker_id"].get<std::string>();
  a.status = enum_from<AttemptStatus>(j["status"], attempt_status_count);
  a.start_time = time_of(j["start_time"]);
  a.end_time = time_of(j["end_time"]);
  a.last_heartbeat_time = time_of(j["last_heartbeat_time"]);
  return a;
}

Rollout rollout_from(const Json& j) {
  Rollout r;
  r.id = *parse_rollout_name(j["rollout_id"].get<std::string>());
  r.input = j["input"].is_string() ? j["input"].get<std::string>() : j["input"].dump();
  r.mode = enum_from<Mode>(j["mode"], mode_count);
  r.resources_id = j["resources_id"].is_null() ? 0 : *parse_resources_name(j["resources_id"].get<std::string>());
  r.status = enum_from<RolloutStatus>(j["status"], rollout_status_count);
  r.config = config_from(j["config"]);
  r.metadata = j["metadata"].empty() ? "" : j["metadata"].dump();
  r.start_time = time_of(j["start_time"]);
  r.end_time = time_of(j["end_time"]);
  if (j.contains("attempt")) r.attempt_count = j["attempt"]["sequence_id"].get<std::uint32_t>();
  return r;
}

AttemptedRollout attempted_from(const Json& j) { return {rollout_from(j), attempt_from(j.at("attempt"))}; }

Json new_rollout_to(const NewRollout& r) {
  return {{"input", r.input},
          {"mode", to_string(r.mode)},
          {"resources_id", r.resources_id ? Json(resources_name(r.resources_id)) : Json()},
          {"config", r.config ? config_to(*r.config) : Json()},
          {"metadata", r.metadata.empty() ? Json() : Json::parse(r.metadata)}};
}

// The resources' content, carried as NamedResources.
Json resources_to(const std::string& content) { return {{"arclight", {{"resource_type", "text"}, {"text", content}}}}; }

ResourcesVersion resources_from(const Json& j) {
  ResourcesVersion v;
  v.id = *parse_resources_name(j["resources_id"].get<std::string>());
  v.name = j["name"].get<std::string>();
  v.version = j["version"].get<std::uint64_t>();
  v.create_time = j["create_time"].get<double>();
  v.content = j["resources"]["arclight"]["text"].get<std::string>();
  return v;
}

Worker worker_from(const Json& j) {
  Worker w;
  w.id = j["worker_id"].get<std::string>();
  w.status = enum_from<WorkerStatus>(j["status"], worker_status_count);
  w.last_heartbeat_time = time_of(j["last_heartbeat_time"]);
  w.heartbeats = j["heartbeats"].get<std::uint64_t>();
  w.current_rollout =
      j["current_rollout_id"].is_null() ? 0 : *parse_rollout_name(j["current_rollout_id"].get<std::string>());
  w.current_attempt =
      j["current_attempt_id"].is_null() ? 0 : *parse_attempt_name(j["current_attempt_id"].get<std::string>());
  w.last_dequeue_time = time_of(j["last_dequeue_time"]);
  w.last_busy_time = time_of(j["last_busy_time"]);
  w.last_idle_time = time_of(j["last_idle_time"]);
  return w;
}

Json paging_to(Json query, Paging p) {
  query["limit"] = p.limit == std::numeric_limits<std::size_t>::max() ? -1 : static_cast<std::int64_t>(p.limit);
  query["offset"] = p.offset;
  return query;
}

// The Store interface over Agent Lightning's routes, as a Python runner would call them (test only). Refusals come
// back as the StoreError their status stands for.
class HttpStore : public Store {
 public:
  explicit HttpStore(int port) : client_("127.0.0.1", port) {}
  using Store::dequeue;
  using Store::enqueue;
  using Store::query_attempts;

  // A request under /<token>/v1/agl; the answer's JSON.
  Json call(const std::string& method, const std::string& path, const Json& body = Json()) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string url = "/" + token + "/v1/agl" + path;
    auto result = method == "GET" ? client_.Get(url.c_str())
                                  : client_.Post(url.c_str(), body.is_null() ? "" : body.dump(), "application/json");
    if (!result) throw std::runtime_error("no answer to " + method + " " + path);
    BOOST_TEST(result->get_header_value("Content-Type") == "application/json", method << " " << path);
    const Json answer = Json::parse(result->body);
    if (result->status / 100 == 2) return answer;
    const std::string detail = answer["detail"].is_string() ? answer["detail"].get<std::string>() : answer.dump();
    switch (result->status) {
      case 404: throw StoreError(StoreError::not_found, detail);
      case 409: throw StoreError(StoreError::invalid_transition, detail);
      case 400:
      case 422: throw StoreError(StoreError::invalid_argument, detail);
      default: throw std::runtime_error(std::to_string(result->status) + ": " + detail);
    }
  }

  std::vector<Rollout> enqueue(std::vector<NewRollout> rollouts) override {
    Json list = Json::array();
    for (const NewRollout& r : rollouts) list.push_back(new_rollout_to(r));
    std::vector<Rollout> out;
    for (const Json& j : call("POST", "/queues/rollouts/enqueue", {{"rollouts", list}})) out.push_back(rollout_from(j));
    return out;
  }
  std::vector<AttemptedRollout> dequeue(const std::string& worker_id, std::size_t max_count) override {
    std::vector<AttemptedRollout> out;
    for (const Json& j : call("POST", "/queues/rollouts/dequeue", {{"limit", max_count}, {"worker_id", worker_id}}))
      out.push_back(attempted_from(j));
    return out;
  }
  AttemptedRollout start_rollout(NewRollout rollout, const std::string& worker_id) override {
    Json body = new_rollout_to(rollout);
    body["worker_id"] = worker_id;
    return attempted_from(call("POST", "/rollouts", body));
  }
  AttemptedRollout start_attempt(RolloutId rollout_id, const std::string& worker_id) override {
    return attempted_from(
        call("POST", "/rollouts/" + rollout_name(rollout_id) + "/attempts", {{"worker_id", worker_id}}));
  }
  std::vector<std::uint64_t> add_spans(std::vector<Span> spans) override {
    std::vector<std::uint64_t> out;
    for (Span& span : spans) {
      try {
        out.push_back(add_span(std::move(span)));
      } catch (const StoreError&) {
        out.push_back(0);
      }
    }
    return out;
  }
  std::uint64_t add_span(Span span) override {
    const Json echo = call("POST", "/spans", span_json(span));
    return echo.is_null() ? 0 : echo["sequence_id"].get<std::uint64_t>();  // null: a span sent again
  }
  std::uint64_t next_sequence_id(RolloutId rollout_id) override {
    return call("POST", "/spans/next",
                {{"rollout_id", rollout_name(rollout_id)}, {"attempt_id", "latest"}})["sequence_id"]
        .get<std::uint64_t>();
  }
  Attempt update_attempt(RolloutId rollout_id, AttemptId attempt_id, const AttemptUpdate& update) override {
    Json body = Json::object();
    if (update.status) body["status"] = to_string(*update.status);
    if (update.worker_id) body["worker_id"] = *update.worker_id;
    if (update.last_heartbeat_time) body["last_heartbeat_time"] = *update.last_heartbeat_time;
    const std::string attempt = attempt_id == latest_attempt ? "latest" : attempt_name(attempt_id);
    return attempt_from(call("POST", "/rollouts/" + rollout_name(rollout_id) + "/attempts/" + attempt, body));
  }
  Rollout update_rollout(RolloutId rollout_id, const RolloutUpdate& update) override {
    Json body = Json::object();
    if (update.status) body["status"] = to_string(*update.status);
    if (update.mode) body["mode"] = to_string(*update.mode);
    if (update.resources_id)
      body["resources_id"] = *update.resources_id ? Json(resources_name(*update.resources_id)) : Json();
    if (update.config) body["config"] = config_to(*update.config);
    if (update.metadata) body["metadata"] = update.metadata->empty() ? Json() : Json::parse(*update.metadata);
    return rollout_from(call("POST", "/rollouts/" + rollout_name(rollout_id), body));
  }
  Page<Rollout> query_rollouts(const RolloutFilter& filter, Paging paging) override {
    Json query = Json::object();
    for (int s = 0; s < rollout_status_count; ++s)
      if (filter.statuses & (1u << s)) query["status_in"].push_back(to_string(static_cast<RolloutStatus>(s)));
    for (RolloutId id : filter.ids) query["rollout_id_in"].push_back(rollout_name(id));
    if (filter.mode) query["mode_in"] = Json::array({to_string(*filter.mode)});
    const Json page = call("POST", "/rollouts/search", paging_to(query, paging));
    Page<Rollout> out;
    out.total = page["total"].get<std::size_t>();
    for (const Json& j : page["items"]) out.items.push_back(rollout_from(j));
    return out;
  }
  Page<Attempt> query_attempts(const AttemptFilter& filter, Paging paging) override {
    Json query = Json::object();
    for (int s = 0; s < attempt_status_count; ++s)
      if (filter.statuses & (1u << s)) query["status_in"].push_back(to_string(static_cast<AttemptStatus>(s)));
    if (!filter.worker_id.empty()) query["worker_id"] = filter.worker_id;
    // The store refuses the attempts of a rollout it does not hold; Agent Lightning's API answers an empty page.
    if (filter.rollout_id && call("GET", "/rollouts/" + rollout_name(filter.rollout_id)).is_null())
      throw StoreError(StoreError::not_found, "no rollout " + rollout_name(filter.rollout_id));
    const std::string path =
        filter.rollout_id ? "/rollouts/" + rollout_name(filter.rollout_id) + "/attempts/search" : "/attempts/search";
    const Json page = call("POST", path, paging_to(query, paging));
    Page<Attempt> out;
    out.total = page["total"].get<std::size_t>();
    for (const Json& j : page["items"]) out.items.push_back(attempt_from(j));
    return out;
  }
  Attempt get_latest_attempt(RolloutId rollout_id) override {
    const Json j = call("GET", "/rollouts/" + rollout_name(rollout_id) + "/attempts/latest");
    if (j.is_null()) throw StoreError(StoreError::not_found, "no attempt");
    return attempt_from(j);
  }
  Page<Span> query_spans(const SpanFilter& filter, Paging paging) override {
    Json query = {{"rollout_id", rollout_name(filter.rollout_id)}};
    if (filter.attempt_id == latest_attempt)
      query["attempt_id"] = "latest";
    else if (filter.attempt_id != 0)
      query["attempt_id"] = attempt_name(filter.attempt_id);
    if (!filter.name.empty()) query["name"] = filter.name;
    if (filter.after_sequence_id) query["after_sequence_id"] = filter.after_sequence_id;
    const Json page = call("POST", "/spans/search", paging_to(query, paging));
    Page<Span> out;
    out.total = page["total"].get<std::size_t>();
    for (const Json& j : page["items"]) {
      Span span = span_from_json(j);
      span.sequence_id = j["sequence_id"].get<std::uint64_t>();
      out.items.push_back(std::move(span));
    }
    return out;
  }
  // Agent Lightning's resource routes upsert; the store's add and update refuse what exists or does not.
  ResourcesVersion add_resources(const std::string& name, std::string content) override {
    if (!call("GET", "/resources/" + name).is_null())
      throw StoreError(StoreError::invalid_transition, "resources " + name + " exist");
    return resources_from(call("POST", "/resources/" + name, resources_to(content)));
  }
  ResourcesVersion update_resources(const std::string& name, std::string content) override {
    if (call("GET", "/resources/" + name).is_null()) throw StoreError(StoreError::not_found, "no resources " + name);
    return resources_from(call("POST", "/resources/" + name, resources_to(content)));
  }
  ResourcesVersion get_resources(ResourcesId id) override {
    const Json j = call("GET", "/resources/" + resources_name(id));
    if (j.is_null()) throw StoreError(StoreError::not_found, "no resources");
    return resources_from(j);
  }
  ResourcesVersion get_latest_resources(const std::string& name) override {
    const Json j = call("GET", name.empty() ? "/resources/latest" : "/resources/" + name);
    if (j.is_null()) throw StoreError(StoreError::not_found, "no resources");
    return resources_from(j);
  }
  std::vector<Rollout> wait_for_rollouts(const std::vector<RolloutId>& ids, double timeout_seconds) override {
    Json names = Json::array();
    for (RolloutId id : ids) names.push_back(rollout_name(id));
    std::vector<Rollout> out;
    for (const Json& j : call("POST", "/waits/rollouts", {{"rollout_ids", names}, {"timeout", timeout_seconds}}))
      out.push_back(rollout_from(j));
    return out;
  }
  Worker heartbeat(const std::string& worker_id) override {
    return worker_from(call("POST", "/workers/" + worker_id, {{"heartbeat_stats", {{"cpu_percent", 1.5}}}}));
  }
  std::vector<Worker> query_workers() override {
    std::vector<Worker> out;
    const Json page = call("POST", "/workers/search", Json::object());
    for (const Json& j : page["items"]) out.push_back(worker_from(j));
    return out;
  }
  Statistics statistics() override {
    const Json j = call("GET", "/statistics");
    Statistics s;
    for (int i = 0; i < rollout_status_count; ++i)
      s.rollouts[i] = j["rollouts_by_status"][std::string(to_string(static_cast<RolloutStatus>(i)))];
    for (int i = 0; i < attempt_status_count; ++i)
      s.attempts[i] = j["attempts_by_status"][std::string(to_string(static_cast<AttemptStatus>(i)))];
    s.spans = j["total_spans"];
    s.span_bytes = j["total_span_bytes"];
    s.workers = j["total_workers"];
    s.resources = j["total_resources"];
    s.queue_length = j["queue_length"];
    return s;
  }

 private:
  std::mutex mutex_;
  httplib::Client client_;
};

HttpServerOptions options() {
  HttpServerOptions o;
  o.bearer_token = token;
  o.token_in_path = true;
  o.missing_token_status = 404;
  o.worker_threads = 4;
  return o;
}

// A MemoryStore on a manual clock behind a real server, and the HTTP client of it.
class HttpHarness : public suite::Harness {
 public:
  explicit HttpHarness(StoreRouteOptions routes = {}) : server_(options()) {
    add_store_routes(server_, memory_, std::move(routes));
    server_.start();
    client_ = std::make_unique<HttpStore>(server_.port());
  }
  Store& store() override { return *client_; }
  void advance(double seconds) override { clock_.advance(seconds); }
  void scan() override { memory_.check_health(); }
  MemoryStore& memory() { return memory_; }
  HttpStore& client() { return *client_; }
  int port() const { return server_.port(); }

 private:
  ManualClock clock_;
  MemoryStore memory_{clock_};
  HttpServer server_;
  std::unique_ptr<HttpStore> client_;
};

}  // namespace

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
  const Span stored = h.memory().query_spans({taken.rollout.id}, {}).items.at(0);
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
