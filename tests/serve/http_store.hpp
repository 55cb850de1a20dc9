#pragma once
// A Store that speaks rank 0's store API over real HTTP (Agent Lightning's routes), so that the store's behaviour suite
// runs through it, and the harness of a MemoryStore on a manual clock behind a real server. For store_api_test.cpp.
#include <httplib.h>

#include <memory>
#include <mutex>

#include "../store/store_suite.hpp"
#include "arclight/serve/http_server.hpp"
#include "arclight/serve/ids.hpp"
#include "arclight/serve/store_routes.hpp"
#include "arclight/store/memory_store.hpp"
#include "store_json.hpp"

namespace arclight::serve {
namespace {  // one test file's

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
  r.mode = j["mode"].is_null() ? Mode::none : enum_from<Mode>(j["mode"], named_mode_count);
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
          {"mode", r.mode == Mode::none ? Json() : Json(to_string(r.mode))},
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
    if (update.mode) body["mode"] = *update.mode == Mode::none ? Json() : Json(to_string(*update.mode));
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
  std::vector<ResourcesVersion> get_resources(const std::vector<ResourcesId>& ids) override {
    std::vector<ResourcesVersion> out;
    for (ResourcesId id : ids) out.push_back(get_resources(id));
    return out;
  }
  std::vector<ResourcesVersion> list_resources() override {
    std::vector<ResourcesVersion> out;
    const Json page = call("GET", "/resources");
    for (const Json& item : page["items"]) {
      out.push_back(resources_from(item));
      out.back().content.clear();
    }
    return out;
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
}  // namespace arclight::serve
