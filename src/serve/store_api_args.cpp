// The store API's request arguments and answers' JSON (store_api_args.hpp).
#include "store_api_args.hpp"

#include <charconv>

#include "arclight/serve/ids.hpp"
#include "arclight/text/json_input.hpp"

namespace arclight::serve::store_args {
namespace {

using store::StoreError;

std::int64_t integer_of(const std::string& key, const std::string& text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) throw unprocessable(key + ": expected an integer");
  return value;
}

}  // namespace

// The body as a JSON object; no body is {} (Agent Lightning's client sends none for a plain dequeue or heartbeat).
Json object_body(const HttpRequest& request) {
  if (request.body.empty()) return Json::object();
  Json body = text::parse_json<Json>(request.body);
  if (body.is_discarded())
    throw unprocessable("the body is not JSON (or nests deeper than " + std::to_string(text::max_json_depth) +
                        " levels)");
  if (!body.is_object()) throw unprocessable("the body must be a JSON object");
  return body;
}

// A GET query as the JSON object its POST twin takes: keys ending in _in are lists (repeated keys), limit, offset and
// after_sequence_id integers, the rest strings.
Json query_object(const HttpRequest& request) {
  Json out = Json::object();
  for (const auto& [key, value] : request.params) {
    if (key.size() > 3 && key.compare(key.size() - 3, 3, "_in") == 0) {
      if (!out.contains(key)) out[key] = Json::array();
      out[key].push_back(value);
    } else if (key == "limit" || key == "offset" || key == "after_sequence_id") {
      out[key] = integer_of(key, value);
    } else {
      out[key] = value;
    }
  }
  return out;
}

Json arguments_of(const HttpRequest& request) {
  return request.method == "GET" ? query_object(request) : object_body(request);
}

const Json* find(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// An optional string: absent or null is nullopt.
std::optional<std::string> optional_string(const Json& object, const char* key) {
  const Json* value = find(object, key);
  if (!value || value->is_null()) return std::nullopt;
  if (!value->is_string()) throw unprocessable(std::string(key) + ": expected a string");
  return value->get<std::string>();
}

std::optional<std::vector<std::string>> string_list(const Json& object, const char* key) {
  const Json* value = find(object, key);
  if (!value || value->is_null()) return std::nullopt;
  std::vector<std::string> out;
  if (!value->is_array()) throw unprocessable(std::string(key) + ": expected a list of strings");
  for (const Json& item : *value) {
    if (!item.is_string()) throw unprocessable(std::string(key) + ": expected a list of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

// A key that may be left out but, where given, must not be null (Agent Lightning answers 400).
const Json* not_null(const Json& object, const char* key) {
  const Json* value = find(object, key);
  if (value && value->is_null()) throw bad_request(std::string(key) + " cannot be null");
  return value;
}

double seconds_of(const Json& value, const char* key) {
  if (!value.is_number() || value.get<double>() < 0) throw unprocessable(std::string(key) + ": expected seconds >= 0");
  return value.get<double>();
}

// A field left out or null is the job's (rollout.*), not Agent Lightning's (no timeouts): a rollout that never ends,
// its runner gone, would hold back rank 0's release of every rollout after it (store_release.cpp) for the rest of the
// run.
store::RolloutConfig config_of(const Json& json, const store::RolloutConfig& defaults) {
  if (!json.is_object()) throw unprocessable("config: expected an object");
  store::RolloutConfig config = defaults;
  if (const Json* v = find(json, "timeout_seconds"); v && !v->is_null())
    config.timeout_seconds = seconds_of(*v, "config.timeout_seconds");
  if (const Json* v = find(json, "unresponsive_seconds"); v && !v->is_null())
    config.unresponsive_seconds = seconds_of(*v, "config.unresponsive_seconds");
  if (const Json* v = find(json, "max_attempts"); v && !v->is_null()) {
    if (!v->is_number_integer() || v->get<std::int64_t>() < 1 || v->get<std::int64_t>() > 1000000)
      throw unprocessable("config.max_attempts: expected an integer >= 1");
    config.max_attempts = v->get<std::uint32_t>();
  }
  if (const auto retry = status_bits<store::AttemptStatus>(json, "retry_condition", store::attempt_status_count))
    config.retry_condition = *retry;
  return config;
}

std::string metadata_of(const Json& value) {
  if (value.is_null()) return "";
  if (!value.is_object()) throw unprocessable("metadata: expected an object");
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::optional<store::RolloutId> rollout_of(const std::string& name) { return parse_rollout_name(name); }

store::RolloutId existing_rollout(const std::string& name) {
  const auto id = rollout_of(name);
  if (!id) throw StoreError(StoreError::not_found, "no rollout " + name);
  return *id;
}

PageRequest page_request(const Json& args, std::initializer_list<const char*> fields) {
  PageRequest p;
  if (const Json* v = find(args, "limit"); v && !v->is_null()) {
    if (!v->is_number_integer()) throw unprocessable("limit: expected an integer");
    p.limit = v->get<std::int64_t>();
  }
  if (const Json* v = find(args, "offset"); v && !v->is_null()) {
    if (!v->is_number_integer()) throw unprocessable("offset: expected an integer");
    p.offset = v->get<std::int64_t>();
  }
  if (p.limit == 0 || p.limit < -1) throw bad_request("limit must be positive, or -1 for all");
  if (p.offset < 0) throw bad_request("offset must be >= 0");
  if (const auto sort_by = optional_string(args, "sort_by")) {
    if (std::none_of(fields.begin(), fields.end(), [&](const char* f) { return *sort_by == f; }))
      throw bad_request("sort_by: no field " + *sort_by);
    p.sort_by = *sort_by;
  }
  const std::string order = optional_string(args, "sort_order").value_or("asc");
  if (order != "asc" && order != "desc") throw bad_request("sort_order must be asc or desc");
  p.descending = order == "desc";
  const std::string logic = optional_string(args, "filter_logic").value_or("and");
  if (logic != "and" && logic != "or") throw bad_request("filter_logic must be and or or");
  p.any_filter = logic == "or";
  return p;
}

bool contains(const std::string& text, const std::optional<std::string>& part) {
  return part && text.find(*part) != std::string::npos;
}

// Null sorts last; numbers compare as numbers; other kinds by nlohmann's order.
bool sorts_before(const Json& a, const Json& b) {
  if (a.is_null() || b.is_null()) return !a.is_null() && b.is_null();
  if (a.is_number() && b.is_number()) return a.get<double>() < b.get<double>();
  return a < b;
}

Json page_json(std::vector<Json> items, std::size_t total, const PageRequest& p) {
  return {{"items", std::move(items)}, {"limit", p.limit}, {"offset", p.offset}, {"total", total}};
}

Json worker_json(const store::Worker& w) {
  const auto time_or_null = [](double t) { return t == 0 ? Json() : Json(t); };
  return {{"worker_id", w.id},
          {"status", store::to_string(w.status)},
          {"heartbeat_stats", nullptr},
          {"last_heartbeat_time", time_or_null(w.last_heartbeat_time)},
          {"last_dequeue_time", time_or_null(w.last_dequeue_time)},
          {"last_busy_time", time_or_null(w.last_busy_time)},
          {"last_idle_time", time_or_null(w.last_idle_time)},
          {"current_rollout_id", w.current_rollout ? Json(rollout_name(w.current_rollout)) : Json()},
          {"current_attempt_id", w.current_attempt ? Json(attempt_name(w.current_attempt)) : Json()},
          {"heartbeats", w.heartbeats}};
}

// A resources version as a ResourcesUpdate: its content when that is a JSON object (NamedResources), else {}.
Json resources_json(const store::ResourcesVersion& v) {
  Json resources = text::parse_json<Json>(v.content);
  if (!resources.is_object()) resources = Json::object();
  return {{"resources_id", resources_name(v.id)}, {"create_time", v.create_time},
          {"update_time", v.create_time},         {"version", v.version},
          {"resources", std::move(resources)},    {"name", v.name}};
}

// Rank 0's ledger ("trained", a version each step) is arclight's bookkeeping, not resources to run with.
std::optional<store::ResourcesVersion> latest_client_resources(store::Store& store) {
  for (store::ResourcesId n = store.statistics().resources; n > 0; --n) {
    try {
      store::ResourcesVersion v = store.get_resources(n);
      if (v.name != store::trained_resources) return v;
    } catch (const StoreError& e) {
      if (e.code() != StoreError::not_found) throw;  // one lost with a damaged checkpoint segment: the one before
    }
  }
  return std::nullopt;
}

std::optional<store::ResourcesVersion> resources_or_none(store::Store& store, const std::string& id) {
  try {
    if (const auto number = parse_resources_name(id)) return store.get_resources(*number);
    if (id.empty()) return latest_client_resources(store);
    return store.get_latest_resources(id);
  } catch (const StoreError& e) {
    if (e.code() != StoreError::not_found) throw;
    return std::nullopt;
  }
}

// resources_id of a new rollout or an update: rs-<n> or a resources name (its latest version).
store::ResourcesId resources_of(store::Store& store, const std::string& id) {
  if (const auto number = parse_resources_name(id)) return *number;
  return store.get_latest_resources(id).id;
}

store::Mode mode_of(const Json& value) {
  return value.is_null() ? store::Mode::none : enum_of<store::Mode>(value, "mode", store::named_mode_count);
}

// EnqueueRolloutRequest / RolloutRequest.
store::NewRollout new_rollout_of(store::Store& store, const Json& json, const store::RolloutConfig& defaults) {
  if (!json.is_object()) throw unprocessable("a rollout must be a JSON object");
  const Json* input = find(json, "input");
  if (!input) throw unprocessable("input: missing");
  store::NewRollout r;
  r.input = input->dump(-1, ' ', false, Json::error_handler_t::replace);
  const Json* mode = find(json, "mode");
  r.mode = mode ? mode_of(*mode) : store::Mode::none;  // left out: Agent Lightning's None too
  if (const auto resources = optional_string(json, "resources_id")) {
    r.resources_id = resources_of(store, *resources);
  } else {  // the latest policy version (what arclight's runners run rollouts with), else the latest resources
    try {
      r.resources_id = store.get_latest_resources(store::policy_resources).id;
    } catch (const StoreError& e) {
      if (e.code() != StoreError::not_found) throw;
      if (const auto latest = latest_client_resources(store)) r.resources_id = latest->id;
    }
  }
  if (const Json* config = find(json, "config"); config && !config->is_null()) r.config = config_of(*config, defaults);
  if (const Json* metadata = find(json, "metadata")) r.metadata = metadata_of(*metadata);
  return r;
}

}  // namespace arclight::serve::store_args
