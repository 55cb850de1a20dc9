#include "store_json.hpp"

#include <limits>
#include <set>

#include "arclight/serve/ids.hpp"
#include "arclight/text/json_input.hpp"

namespace arclight::serve {
namespace {

Json time_or_null(double t) { return t == 0 ? Json() : Json(t); }

// Rollout inputs are opaque bytes: JSON when they parse as JSON, else a string.
Json opaque_json(const std::string& bytes) {
  Json value = text::parse_json<Json>(bytes);
  return value.is_discarded() ? Json(bytes) : value;
}

Json metadata_json(const std::string& bytes) {
  if (bytes.empty()) return Json::object();
  Json value = text::parse_json<Json>(bytes);
  return value.is_object() ? value : Json();
}

Json config_json(const store::RolloutConfig& config) {
  Json retry = Json::array();
  for (int s = 0; s < store::attempt_status_count; ++s)
    if (config.retries_on(static_cast<store::AttemptStatus>(s)))
      retry.push_back(store::to_string(static_cast<store::AttemptStatus>(s)));
  return {{"timeout_seconds", time_or_null(config.timeout_seconds)},
          {"unresponsive_seconds", time_or_null(config.unresponsive_seconds)},
          {"max_attempts", config.max_attempts},
          {"retry_condition", std::move(retry)}};
}

std::string string_of(const Json& span, const char* key, bool required) {
  const auto it = span.find(key);
  if (it == span.end() || it->is_null()) {
    if (required) throw StoreJsonError(std::string(key) + ": missing");
    return "";
  }
  if (!it->is_string()) throw StoreJsonError(std::string(key) + ": expected a string");
  return it->get<std::string>();
}

double time_of(const Json& span, const char* key) {
  const auto it = span.find(key);
  if (it == span.end() || it->is_null()) return 0;
  if (!it->is_number()) throw StoreJsonError(std::string(key) + ": expected a number");
  return it->get<double>();
}

bool all_token_ids(const Json& list) {
  for (const Json& v : list)
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
        v.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max())
      return false;
  return true;
}

bool all_numbers(const Json& list) {
  for (const Json& v : list)
    if (!v.is_number()) return false;
  return true;
}

store::AttributeValue attribute_of(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>();
  if (v.is_array() && all_token_ids(v)) return v.get<store::TokenIds>();
  if (v.is_array() && all_numbers(v)) return v.get<store::Floats>();
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json attribute_json(const store::AttributeValue& value) {
  return std::visit([](const auto& v) { return Json(v); }, value);
}

store::SpanStatus status_of(const Json& span) {
  const auto it = span.find("status");
  if (it == span.end() || it->is_null()) return store::SpanStatus::unset;
  const std::string code = it->is_object() ? string_of(*it, "status_code", false) : "";
  if (code == "OK") return store::SpanStatus::ok;
  if (code == "ERROR") return store::SpanStatus::error;
  if (code == "UNSET" || code.empty()) return store::SpanStatus::unset;
  throw StoreJsonError("status.status_code: expected UNSET, OK or ERROR");
}

const char* status_name(store::SpanStatus status) {
  switch (status) {
    case store::SpanStatus::ok: return "OK";
    case store::SpanStatus::error: return "ERROR";
    default: return "UNSET";
  }
}

// Agent Lightning's span fields that arclight does not model, as a span without them answers.
const Json& unmodelled_defaults() {
  static const Json defaults = {{"events", Json::array()},
                                {"links", Json::array()},
                                {"context", nullptr},
                                {"parent", nullptr},
                                {"resource", {{"attributes", Json::object()}, {"schema_url", ""}}}};
  return defaults;
}

bool modelled_key(const std::string& key) {
  static const std::set<std::string, std::less<>> keys = {"rollout_id", "attempt_id", "sequence_id", "trace_id",
                                                          "span_id",    "parent_id",  "name",        "status",
                                                          "attributes", "start_time", "end_time"};
  return keys.count(key) > 0;
}

// Whether a stored attribute answers with the JSON it came as (an integer becomes a double, a list of strings a
// string, a float list float32 values).
bool kept_exactly(const Json& value, const store::AttributeValue& stored) {
  if (value.is_string() || value.is_boolean() || value.is_number_float()) return true;
  if (!value.is_array()) return false;
  return attribute_json(stored).dump() == value.dump();
}

// What a client's span holds that the fields of store::Span would lose (Span::extra_json), "" when nothing: the
// attributes whose JSON they change, a status with a description, then the other fields in the order they came.
std::string extra_json_of(const Json& span, const std::vector<store::Attribute>& attributes) {
  Json extra = Json::object();
  if (const auto given = span.find("attributes"); given != span.end() && given->is_object())
    for (const store::Attribute& a : attributes)
      if (const Json& value = given->at(a.key); !kept_exactly(value, a.value)) extra["attributes"][a.key] = value;
  if (const auto status = span.find("status"); status != span.end() && status->is_object())
    for (const auto& [key, value] : status->items())
      if (key != "status_code" && !value.is_null()) {
        extra["status"] = *status;
        break;
      }
  for (const auto& [key, value] : span.items()) {
    if (modelled_key(key)) continue;
    const auto standard = unmodelled_defaults().find(key);
    if (standard == unmodelled_defaults().end() || *standard != value) extra[key] = value;
  }
  return extra.empty() ? "" : extra.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

Json rollout_json(const store::Rollout& r) {
  return {{"rollout_id", rollout_name(r.id)},
          {"input", opaque_json(r.input)},
          {"start_time", r.start_time},
          {"end_time", time_or_null(r.end_time)},
          {"mode", r.mode == store::Mode::none ? Json() : Json(store::to_string(r.mode))},
          {"resources_id", r.resources_id == 0 ? Json() : Json(resources_name(r.resources_id))},
          {"status", store::to_string(r.status)},
          {"config", config_json(r.config)},
          {"metadata", metadata_json(r.metadata)}};
}

Json attempt_json(const store::Attempt& a) {
  return {{"rollout_id", rollout_name(a.rollout_id)},
          {"attempt_id", attempt_name(a.id)},
          {"sequence_id", a.sequence_id},
          {"start_time", a.start_time},
          {"end_time", time_or_null(a.end_time)},
          {"status", store::to_string(a.status)},
          {"worker_id", a.worker_id.empty() ? Json() : Json(a.worker_id)},
          {"last_heartbeat_time", time_or_null(a.last_heartbeat_time)},
          {"metadata", Json()}};
}

Json attempted_rollout_json(const store::AttemptedRollout& attempted) {
  Json out = rollout_json(attempted.rollout);
  out["attempt"] = attempt_json(attempted.attempt);
  return out;
}

store::Span span_from_json(const Json& json) {
  if (!json.is_object()) throw StoreJsonError("a span must be a JSON object");
  store::Span span;
  const auto rollout = parse_rollout_name(string_of(json, "rollout_id", true));
  const auto attempt = parse_attempt_name(string_of(json, "attempt_id", true));
  if (!rollout || !attempt) throw StoreJsonError("rollout_id, attempt_id: not ids this store gave (ro-<n>, at-<n>)");
  span.rollout_id = *rollout;
  span.attempt_id = *attempt;
  span.name = string_of(json, "name", true);
  span.trace_id = string_of(json, "trace_id", false);
  span.span_id = string_of(json, "span_id", false);
  span.parent_id = string_of(json, "parent_id", false);
  span.status = status_of(json);
  const auto sequence =
      json.find("sequence_id");  // the client's (from /spans/next); absent or < 1: the store issues one
  if (sequence != json.end() && sequence->is_number_unsigned())
    span.sequence_id = sequence->get<std::uint64_t>();
  else if (sequence != json.end() && sequence->is_number_integer() && sequence->get<std::int64_t>() > 0)
    span.sequence_id = static_cast<std::uint64_t>(sequence->get<std::int64_t>());
  span.start_time = time_of(json, "start_time");
  span.end_time = time_of(json, "end_time");
  const auto attributes = json.find("attributes");
  if (attributes != json.end() && !attributes->is_null()) {
    if (!attributes->is_object()) throw StoreJsonError("attributes: expected an object");
    for (const auto& [key, value] : attributes->items()) span.attributes.push_back({key, attribute_of(value)});
  }
  span.extra_json = extra_json_of(json, span.attributes);
  return span;
}

Json span_json(const store::Span& span) {
  Json attributes = Json::object();
  for (const store::Attribute& a : span.attributes) attributes[a.key] = attribute_json(a.value);
  const Json& standard = unmodelled_defaults();
  Json out = {{"rollout_id", rollout_name(span.rollout_id)},
              {"attempt_id", attempt_name(span.attempt_id)},
              {"sequence_id", span.sequence_id},
              {"trace_id", span.trace_id},
              {"span_id", span.span_id},
              {"parent_id", span.parent_id.empty() ? Json() : Json(span.parent_id)},
              {"name", span.name},
              {"status", {{"status_code", status_name(span.status)}, {"description", nullptr}}},
              {"attributes", std::move(attributes)},
              {"events", standard.at("events")},
              {"links", standard.at("links")},
              {"start_time", span.start_time},
              {"end_time", time_or_null(span.end_time)},
              {"context", standard.at("context")},
              {"parent", standard.at("parent")},
              {"resource", standard.at("resource")}};
  if (span.extra_json.empty()) return out;
  const Json extra = text::parse_json<Json>(span.extra_json);
  if (!extra.is_object()) return out;  // extra_json_of wrote an object: what the checksums let through stays out
  for (const auto& [key, value] : extra.items()) {
    if (key == "attributes" && value.is_object()) {
      for (const auto& [name, attribute] : value.items()) out["attributes"][name] = attribute;
    } else if (key == "status" && value.is_object()) {
      out["status"] = value;
      if (!value.contains("status_code")) out["status"]["status_code"] = status_name(span.status);
    } else if (!modelled_key(key)) {  // what extra_json_of wrote; the record's own fields stay the record's
      out[key] = value;
    }
  }
  return out;
}

}  // namespace arclight::serve
