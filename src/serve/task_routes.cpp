#include "arclight/serve/task_routes.hpp"

#include <map>
#include <mutex>

#include "arclight/serve/ids.hpp"
#include "store_api_args.hpp"
#include "store_json.hpp"
#include "arclight/text/json_input.hpp"

namespace arclight::serve {
namespace {

const std::string prefix = "/v1/agl";

HttpResponse json_answer(int status, const Json& body) {
  return {status, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace), nullptr};
}

HttpResponse detail(int status, const std::string& message) { return json_answer(status, {{"detail", message}}); }

// Pydantic's shape for a body that does not validate.
HttpResponse unprocessable(const std::string& message) {
  return json_answer(422, {{"detail", Json::array({{{"type", "value_error"}, {"loc", {"body"}}, {"msg", message}}})}});
}

// The body as a JSON object; no body is {} (Agent Lightning's client sends none for a plain dequeue).
std::optional<Json> object_body(const HttpRequest& request) {
  if (request.body.empty()) return Json::object();
  Json body = text::parse_json<Json>(request.body);
  if (!body.is_object()) return std::nullopt;
  return body;
}

class TaskRoutes {
 public:
  TaskRoutes(TaskBackend& backend, TaskRouteOptions options) : backend_(backend), options_(options) {}

  HttpResponse dequeue(const HttpRequest& request) {
    const auto body = object_body(request);
    if (!body) return unprocessable("expected a JSON object {\"limit\", \"worker_id\"}");
    const Json limit = body->value("limit", Json(1));
    const Json worker = body->value("worker_id", Json(""));
    if (!limit.is_number_integer() || limit.get<std::int64_t>() < 1 || limit.get<std::int64_t>() > 1000)
      return unprocessable("limit: expected an integer from 1 to 1000");
    if (!worker.is_string() && !worker.is_null()) return unprocessable("worker_id: expected a string");
    // Agent Lightning's runners name themselves (every process "Worker-0"): the process is known by its credentials.
    const auto taken = backend_.dequeue(worker.is_string() ? worker.get<std::string>() : "", request.basic_auth_user,
                                        limit.get<std::size_t>(), options_.dequeue_wait_seconds,
                                        [&request] { return request.client_gone(); });
    Json out = Json::array();
    for (const store::AttemptedRollout& attempted : taken) out.push_back(attempted_rollout_json(attempted));
    return json_answer(200, out);
  }

  HttpResponse add_span(const HttpRequest& request) {
    store::Span span;
    const Json body = text::parse_json<Json>(request.body);
    if (body.is_discarded())
      return unprocessable("the body is not JSON (or nests deeper than " + std::to_string(text::max_json_depth) +
                           " levels)");
    try {
      span = span_from_json(body);
    } catch (const std::exception& e) {  // not a span
      return unprocessable(e.what());
    }
    const Json echo = span_json(span);
    span.sequence_id = 0;  // this runner's counter is its own (next_sequence_id below): the store issues the span's
    if (!backend_.add_span(std::move(span)))
      return detail(404, "rollout " + echo["rollout_id"].get<std::string>() + ", attempt " +
                             echo["attempt_id"].get<std::string>() + " is not running on this runner");
    return json_answer(201, echo);
  }

  // A counter per rollout, as Agent Lightning's store keeps one; the store orders spans by its own sequence ids.
  HttpResponse next_sequence_id(const HttpRequest& request) {
    const auto body = object_body(request);
    const auto rollout = body && body->value("rollout_id", Json()).is_string()
                             ? parse_rollout_name((*body)["rollout_id"].get<std::string>())
                             : std::nullopt;
    if (!rollout) return unprocessable("rollout_id: expected a rollout id (ro-<n>)");
    std::lock_guard<std::mutex> lock(mutex_);
    if (!sequence_ids_.count(*rollout) && sequence_ids_.size() >= options_.sequence_counters) {
      if (sequence_ids_.empty() || *rollout < sequence_ids_.begin()->first)
        return json_answer(200, {{"sequence_id", 1}});  // older than every rollout kept: counted, not kept
      sequence_ids_.erase(sequence_ids_.begin());       // the oldest rollout's
    }
    return json_answer(200, {{"sequence_id", ++sequence_ids_[*rollout]}});
  }

  HttpResponse update_attempt(const HttpRequest& request) {
    const auto rollout = parse_rollout_name(request.captures.at(0));
    const auto attempt = request.captures.at(1) == "latest" ? std::optional(store::latest_attempt)
                                                            : parse_attempt_name(request.captures.at(1));
    const auto body = object_body(request);
    if (!body) return unprocessable("expected a JSON object {\"status\"}");
    const Json status_json = body->value("status", Json("running"));  // no status: a heartbeat
    const auto status =
        status_json.is_string() ? store::parse_attempt_status(status_json.get<std::string>()) : std::nullopt;
    if (!status || (*status != store::AttemptStatus::succeeded && *status != store::AttemptStatus::failed &&
                    *status != store::AttemptStatus::running))
      return unprocessable("status: expected succeeded, failed or running");
    const auto updated = rollout && attempt ? backend_.update_attempt(*rollout, *attempt, *status) : std::nullopt;
    if (!updated)
      return detail(404, "rollout " + request.captures[0] + ", attempt " + request.captures[1] +
                             " is not running on this runner");
    return json_answer(200, attempt_json(*updated));
  }

  HttpResponse update_worker(const HttpRequest& request) {
    const auto body = object_body(request);
    if (!body) return unprocessable("expected a JSON object {\"heartbeat_stats\"}");
    if (const auto stats = body->find("heartbeat_stats"); stats != body->end() && !stats->is_object())
      return unprocessable("heartbeat_stats: expected an object");
    return json_answer(200,
                       store_args::worker_json(backend_.heartbeat(request.captures.at(0), request.basic_auth_user)));
  }

 private:
  TaskBackend& backend_;
  TaskRouteOptions options_;
  std::mutex mutex_;
  std::map<store::RolloutId, std::uint64_t> sequence_ids_;
};

// Errors on these routes are Agent Lightning's {"detail": ...}, a server fault included.
HttpHandler guarded(std::shared_ptr<TaskRoutes> routes, HttpResponse (TaskRoutes::*route)(const HttpRequest&)) {
  return [routes, route](const HttpRequest& request) {
    try {
      return ((*routes).*route)(request);
    } catch (const std::exception& e) {
      return json_answer(500, {{"detail", "Internal server error"}, {"error_type", "Error"}, {"traceback", e.what()}});
    }
  };
}

}  // namespace

void add_task_routes(HttpServer& server, TaskBackend& backend, TaskRouteOptions options) {
  auto routes = std::make_shared<TaskRoutes>(backend, options);
  server.get(prefix + "/health", [](const HttpRequest&) { return json_answer(200, {{"status", "ok"}}); });
  server.post(prefix + "/queues/rollouts/dequeue", guarded(routes, &TaskRoutes::dequeue));
  server.post(prefix + "/spans", guarded(routes, &TaskRoutes::add_span));
  server.post(prefix + "/spans/next", guarded(routes, &TaskRoutes::next_sequence_id));
  // Not .../attempts/search: on an agl runner the store routes beside these answer it (query_attempts).
  server.post(prefix + "/rollouts/([^/]+)/attempts/((?!search$)[^/]+)", guarded(routes, &TaskRoutes::update_attempt));
  server.post(prefix + "/workers/([^/]+)", guarded(routes, &TaskRoutes::update_worker));
}

}  // namespace arclight::serve
