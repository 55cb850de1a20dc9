// Agent Lightning v0.3's LightningStore routes over the Store interface (../shared/agl-v0.3-interfaces.md, 1.1-1.4).
// Ids are the store's, spelled ro-<n>, at-<n>, rs-<n> (ids.hpp); where arclight's store is stricter than Agent
// Lightning's (a final rollout takes nothing more, a rollout's status moves only with its attempts or to cancelled /
// failed), the refusal is a 409 with the store's reason.
#include "store_api.hpp"

#include <iterator>
#include <unordered_set>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/serve/ids.hpp"
#include "store_api_args.hpp"
#include "arclight/text/json_input.hpp"

namespace arclight::serve {
namespace {

// Whether the store holds the rollout (and the attempt) a span query names: a query of spans it holds that did not
// read back stays an error.
bool holds_spans_of(store::Store& store, const store::SpanFilter& filter) {
  if (store.query_rollouts(store::RolloutFilter{0, {filter.rollout_id}, std::nullopt}, {}).items.empty()) return false;
  if (filter.attempt_id == 0 || filter.attempt_id == store::latest_attempt) return true;
  for (const store::Attempt& a : store.query_attempts(store::AttemptFilter{filter.rollout_id, 0, ""}, {}).items)
    if (a.id == filter.attempt_id) return true;
  return false;
}

using namespace store_args;
using store::StoreError;

HttpResponse json_answer(int status, const Json& body) {
  return {status, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace), nullptr, {}};
}

#define ROLLOUT_FIELDS \
  "rollout_id", "input", "start_time", "end_time", "mode", "resources_id", "status", "config", "metadata"
#define ATTEMPT_FIELDS                                                                                               \
  "rollout_id", "attempt_id", "sequence_id", "start_time", "end_time", "status", "worker_id", "last_heartbeat_time", \
      "metadata"
#define SPAN_FIELDS                                                                                              \
  "rollout_id", "attempt_id", "sequence_id", "trace_id", "span_id", "parent_id", "name", "status", "attributes", \
      "events", "links", "start_time", "end_time", "context", "parent", "resource"
#define WORKER_FIELDS                                                                                     \
  "worker_id", "status", "heartbeat_stats", "last_heartbeat_time", "last_dequeue_time", "last_busy_time", \
      "last_idle_time", "current_rollout_id", "current_attempt_id"
#define RESOURCES_FIELDS "resources_id", "create_time", "update_time", "version", "resources"

}  // namespace

const std::vector<StoreApi::Route>& StoreApi::routes() {
  static const std::vector<Route> all = {
      {"GET", "/health", &StoreApi::health},
      {"GET", "/statistics", &StoreApi::statistics},
      {"POST", "/queues/rollouts/enqueue", &StoreApi::enqueue},
      {"POST", "/queues/rollouts/dequeue", &StoreApi::dequeue},
      {"POST", "/rollouts/search", &StoreApi::query_rollouts},
      {"GET", "/rollouts", &StoreApi::query_rollouts},
      {"POST", "/rollouts", &StoreApi::start_rollout},
      {"POST", "/rollouts/([^/]+)/attempts/search", &StoreApi::query_attempts},
      {"GET", "/rollouts/([^/]+)/attempts/latest", &StoreApi::get_latest_attempt},
      {"GET", "/rollouts/([^/]+)/attempts", &StoreApi::query_attempts},
      {"POST", "/rollouts/([^/]+)/attempts", &StoreApi::start_attempt},
      {"POST", "/rollouts/([^/]+)/attempts/([^/]+)", &StoreApi::update_attempt},
      {"GET", "/rollouts/([^/]+)", &StoreApi::get_rollout},
      {"POST", "/rollouts/([^/]+)", &StoreApi::update_rollout},
      {"POST", "/attempts/search", &StoreApi::query_attempts},  // arclight's: every rollout's attempts
      {"GET", "/resources/latest", &StoreApi::get_latest_resources},
      {"GET", "/resources", &StoreApi::query_resources},
      {"POST", "/resources", &StoreApi::add_resources},
      {"GET", "/resources/([^/]+)", &StoreApi::get_resources},
      {"POST", "/resources/([^/]+)", &StoreApi::update_resources},
      {"POST", "/spans/next", &StoreApi::next_sequence_id},
      {"POST", "/spans/search", &StoreApi::query_spans},
      {"GET", "/spans", &StoreApi::query_spans},
      {"POST", "/spans", &StoreApi::add_span},
      {"POST", "/waits/rollouts", &StoreApi::wait_for_rollouts},
      {"POST", "/workers/search", &StoreApi::query_workers},
      {"GET", "/workers", &StoreApi::query_workers},
      {"GET", "/workers/([^/]+)", &StoreApi::get_worker},
      {"POST", "/workers/([^/]+)", &StoreApi::update_worker},
  };
  return all;
}

StoreApi::StoreApi(store::Store& store, StoreRouteOptions options)
    : store_(store), options_(options), started_(std::chrono::steady_clock::now()) {}

HttpResponse StoreApi::error_response(const HttpError& error) {
  if (error.status() == 422)  // pydantic's shape
    return json_answer(422, {{"detail", Json::array({{{"type", "value_error"},
                                                      {"loc", Json::array({"body"})},
                                                      {"msg", error.what()},
                                                      {"input", nullptr}}})}});
  if (error.status() >= 500 && error.status() != 501)
    return json_answer(error.status(),
                       {{"detail", "Internal server error"}, {"error_type", "Error"}, {"traceback", error.what()}});
  return json_answer(error.status(), {{"detail", error.what()}});
}

HttpResponse StoreApi::answer(Handler handler, const HttpRequest& request) {
  try {
    return (this->*handler)(request);
  } catch (const HttpError& e) {
    return error_response(e);
  } catch (const StoreError& e) {
    const int status = e.code() == StoreError::not_found ? 404 : e.code() == StoreError::invalid_argument ? 400 : 409;
    return error_response(HttpError(status, e.what()));
  } catch (const StoreJsonError& e) {
    return error_response(unprocessable(e.what()));
  } catch (const Json::exception& e) {  // a value of the wrong kind that a check let through
    return error_response(unprocessable(e.what()));
  } catch (const std::exception& e) {
    const std::size_t api = request.path.find("/v1/");  // what comes before may be the job's secret
    log::warn("store api: ", request.method, " ", request.path.substr(api == std::string::npos ? 0 : api), ": ",
              e.what());
    return error_response(HttpError(500, e.what(), "server_error"));
  }
}

// ---- health, statistics -----------------------------------------------------------------

HttpResponse StoreApi::health(const HttpRequest&) { return json_answer(200, {{"status", "ok"}}); }

HttpResponse StoreApi::statistics(const HttpRequest&) {
  const store::Statistics s = store_.statistics();
  std::uint64_t rollouts = 0, attempts = 0;
  Json rollouts_by_status = Json::object(), attempts_by_status = Json::object();
  for (int i = 0; i < store::rollout_status_count; ++i) {
    rollouts += s.rollouts[i];
    rollouts_by_status[std::string(store::to_string(static_cast<store::RolloutStatus>(i)))] = s.rollouts[i];
  }
  for (int i = 0; i < store::attempt_status_count; ++i) {
    attempts += s.attempts[i];
    attempts_by_status[std::string(store::to_string(static_cast<store::AttemptStatus>(i)))] = s.attempts[i];
  }
  const double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return json_answer(200, {{"name", "arclight"},
                           {"total_rollouts", rollouts},
                           {"total_attempts", attempts},
                           {"total_spans", s.spans},
                           {"total_resources", s.resources},
                           {"total_workers", s.workers},
                           {"uptime", uptime},
                           {"total_span_bytes", s.span_bytes},
                           {"queue_length", s.queue_length},
                           {"rollouts_by_status", std::move(rollouts_by_status)},
                           {"attempts_by_status", std::move(attempts_by_status)}});
}

// ---- the queue --------------------------------------------------------------------------------

Json StoreApi::rollout_item(const store::Rollout& rollout) {
  if (rollout.attempt_count == 0) return rollout_json(rollout);  // never attempted: no "attempt" key at all
  return attempted_rollout_json({rollout, store_.get_latest_attempt(rollout.id)});
}

HttpResponse StoreApi::enqueue(const HttpRequest& request) {
  const Json body = object_body(request);
  const Json* rollouts = find(body, "rollouts");
  if (!rollouts || !rollouts->is_array()) throw unprocessable("rollouts: expected a list");
  std::vector<store::NewRollout> batch;
  for (const Json& r : *rollouts) batch.push_back(new_rollout_of(store_, r, options_.rollout_defaults));
  Json out = Json::array();
  for (const store::Rollout& r : store_.enqueue(std::move(batch))) out.push_back(rollout_json(r));
  return json_answer(201, out);
}

HttpResponse StoreApi::dequeue(const HttpRequest& request) {
  const Json body = object_body(request);
  std::int64_t limit = 1;
  if (const Json* v = find(body, "limit"); v && !v->is_null()) {
    if (!v->is_number_integer() || v->get<std::int64_t>() < 1 || v->get<std::int64_t>() > 10000)
      throw unprocessable("limit: expected an integer from 1 to 10000");
    limit = v->get<std::int64_t>();
  }
  Json out = Json::array();
  for (const store::AttemptedRollout& a :
       store_.dequeue(optional_string(body, "worker_id").value_or(""), static_cast<std::size_t>(limit)))
    out.push_back(attempted_rollout_json(a));
  return json_answer(200, out);
}

HttpResponse StoreApi::start_rollout(const HttpRequest& request) {
  const Json body = object_body(request);
  store::NewRollout rollout = new_rollout_of(store_, body, options_.rollout_defaults);
  return json_answer(201, attempted_rollout_json(store_.start_rollout(
                              std::move(rollout), optional_string(body, "worker_id").value_or(""))));
}

// ---- rollouts -----------------------------------------------------------------------------------

HttpResponse StoreApi::query_rollouts(const HttpRequest& request) {
  const Json args = arguments_of(request);
  const PageRequest page = page_request(args, {ROLLOUT_FIELDS});
  const auto ids = string_list(args, "rollout_id_in");
  const auto id_part = optional_string(args, "rollout_id_contains");
  const auto statuses = status_bits<store::RolloutStatus>(args, "status_in", store::rollout_status_count);
  const auto modes = status_bits<store::Mode>(args, "mode_in", store::named_mode_count);  // arclight's
  store::RolloutFilter filter;
  if (!page.any_filter) {  // the store narrows what it can; the rest below
    if ((statuses && *statuses == 0) || (modes && *modes == 0)) return json_answer(200, page_json({}, 0, page));
    filter.statuses = statuses.value_or(0);
    std::unordered_set<store::RolloutId> named;  // a rollout named twice is listed once, as Agent Lightning's filter
    for (const std::string& id : ids.value_or(std::vector<std::string>{}))
      if (const auto number = rollout_of(id); number && named.insert(*number).second) filter.ids.push_back(*number);
    if (ids && filter.ids.empty()) return json_answer(200, page_json({}, 0, page));
  }
  std::vector<store::Rollout> candidates = store_.query_rollouts(filter, {}).items;
  if (page.any_filter && ids && !ids->empty()) {  // named ones too: a listing of all holds only the rollouts in memory
    store::RolloutFilter named;
    for (const std::string& id : *ids)
      if (const auto number = rollout_of(id)) named.ids.push_back(*number);
    std::unordered_set<store::RolloutId> listed;
    for (const store::Rollout& r : candidates) listed.insert(r.id);
    for (store::Rollout& r : store_.query_rollouts(named, {}).items)
      if (listed.insert(r.id).second) candidates.push_back(std::move(r));
    std::sort(candidates.begin(), candidates.end(),
              [](const store::Rollout& a, const store::Rollout& b) { return a.id < b.id; });  // the store's order
  }
  std::vector<store::Rollout> matches;
  for (store::Rollout& r : candidates) {
    const std::string name = rollout_name(r.id);
    Filters f(page.any_filter);
    f.add(statuses.has_value(), statuses.value_or(0) & store::bit(r.status));
    f.add(ids.has_value(), ids && std::find(ids->begin(), ids->end(), name) != ids->end());
    f.add(id_part.has_value(), contains(name, id_part));
    f.add(modes.has_value(), modes.value_or(0) & store::bit(r.mode));
    if (f.pass()) matches.push_back(std::move(r));
  }
  return json_answer(200,
                     paginated(std::move(matches), page, [&](const store::Rollout& r) { return rollout_item(r); }));
}

HttpResponse StoreApi::get_rollout(const HttpRequest& request) {
  const auto id = rollout_of(request.captures.at(0));
  if (!id) return json_answer(200, nullptr);
  try {
    return json_answer(200, rollout_item(store_.get_rollout(*id)));
  } catch (const StoreError& e) {
    if (e.code() != StoreError::not_found) throw;
    return json_answer(200, nullptr);  // as Agent Lightning's client reads a missing rollout: None
  }
}

HttpResponse StoreApi::update_rollout(const HttpRequest& request) {
  const store::RolloutId id = existing_rollout(request.captures.at(0));
  const Json body = object_body(request);
  store::RolloutUpdate update;
  if (find(body, "input")) throw bad_request("input: a rollout keeps the input it was enqueued with");
  if (const Json* v = not_null(body, "status"))
    update.status = enum_of<store::RolloutStatus>(*v, "status", store::rollout_status_count);
  if (const Json* v = find(body, "mode")) update.mode = mode_of(*v);
  if (const Json* v = find(body, "resources_id")) {
    if (!v->is_null() && !v->is_string()) throw unprocessable("resources_id: expected a string");
    update.resources_id = v->is_null() ? 0 : resources_of(store_, v->get<std::string>());
  }
  // Fields left out or null keep the rollout's own: its answer writes "no limit" as null, and a client sending that
  // config back must not get the job's limits.
  if (const Json* v = not_null(body, "config")) update.config = config_of(*v, store_.get_rollout(id).config);
  if (const Json* v = find(body, "metadata")) update.metadata = metadata_of(*v);
  return json_answer(200, rollout_json(store_.update_rollout(id, update)));
}

// ---- attempts -----------------------------------------------------------------------------------

HttpResponse StoreApi::start_attempt(const HttpRequest& request) {
  const store::RolloutId id = existing_rollout(request.captures.at(0));
  const Json body = object_body(request);
  return json_answer(201,
                     attempted_rollout_json(store_.start_attempt(id, optional_string(body, "worker_id").value_or(""))));
}

HttpResponse StoreApi::query_attempts(const HttpRequest& request) {
  const Json args = arguments_of(request);
  const PageRequest page = page_request(args, {ATTEMPT_FIELDS});
  store::AttemptFilter filter;
  const auto statuses =
      status_bits<store::AttemptStatus>(args, "status_in", store::attempt_status_count);  // arclight's
  filter.statuses = statuses.value_or(0);
  filter.worker_id = optional_string(args, "worker_id").value_or("");  // arclight's
  const Json none = page_json({}, 0, page);  // a rollout the store does not hold has no attempts, as Agent Lightning
  if (statuses && *statuses == 0) return json_answer(200, none);  // answers a query by its id
  if (!request.captures.empty()) {
    const auto id = rollout_of(request.captures[0]);
    if (!id) return json_answer(200, none);
    filter.rollout_id = *id;
  }
  try {
    return json_answer(200, paginated(store_.query_attempts(filter, {}).items, page, attempt_json));
  } catch (const StoreError& e) {
    if (e.code() != StoreError::not_found) throw;
    return json_answer(200, none);
  }
}

HttpResponse StoreApi::get_latest_attempt(const HttpRequest& request) {
  const auto id = rollout_of(request.captures.at(0));
  if (!id) return json_answer(200, nullptr);
  try {
    return json_answer(200, attempt_json(store_.get_latest_attempt(*id)));
  } catch (const StoreError& e) {
    if (e.code() != StoreError::not_found) throw;
    return json_answer(200, nullptr);
  }
}

HttpResponse StoreApi::update_attempt(const HttpRequest& request) {
  const store::RolloutId rollout = existing_rollout(request.captures.at(0));
  const std::string& name = request.captures.at(1);
  const auto attempt = name == "latest" ? std::optional(store::latest_attempt) : parse_attempt_name(name);
  if (!attempt) throw StoreError(StoreError::not_found, "no attempt " + name);
  const Json body = object_body(request);
  store::AttemptUpdate update;
  if (const Json* v = not_null(body, "status"))
    update.status = enum_of<store::AttemptStatus>(*v, "status", store::attempt_status_count);
  if (const Json* v = not_null(body, "worker_id")) {
    if (!v->is_string()) throw unprocessable("worker_id: expected a string");
    update.worker_id = v->get<std::string>();
  }
  if (const Json* v = not_null(body, "last_heartbeat_time")) {
    if (!v->is_number()) throw unprocessable("last_heartbeat_time: expected a number");
    update.last_heartbeat_time = v->get<double>();
  }
  not_null(body, "metadata");  // arclight keeps no attempt metadata
  return json_answer(200, attempt_json(store_.update_attempt(rollout, *attempt, update)));
}

// ---- resources ----------------------------------------------------------------------------------

store::ResourcesVersion StoreApi::add_named(const std::string& content) {
  // A fresh name for resources that come without one; another client may take a name first.
  for (std::uint64_t n = store_.statistics().resources + 1, tries = 0; tries < 64; ++n, ++tries) {
    try {
      return store_.add_resources("resources-" + std::to_string(n), content);
    } catch (const StoreError& e) {
      if (e.code() != StoreError::invalid_transition) throw;
    }
  }
  throw Error("no free resources name after 64 tries");
}

Json StoreApi::resources_item(const store::ResourcesVersion& version) const {
  Json item = resources_json(version);
  if (version.name != store::policy_resources || !options_.policy_llm) return item;
  const PolicyLlm& llm = *options_.policy_llm;
  item["resources"] = {{"main_llm",
                        {{"resource_type", "proxy_llm"},
                         {"endpoint", llm.endpoint},
                         {"model", llm.model},
                         {"api_key", llm.api_key},
                         {"sampling_parameters", {{"temperature", llm.temperature}}}}}};
  return item;
}

HttpResponse StoreApi::add_resources(const HttpRequest& request) {
  const Json body = object_body(request);  // NamedResources
  return json_answer(201, resources_item(add_named(body.dump(-1, ' ', false, Json::error_handler_t::replace))));
}

HttpResponse StoreApi::query_resources(const HttpRequest& request) {
  const Json args = arguments_of(request);
  const PageRequest page = page_request(args, {RESOURCES_FIELDS});
  const auto id = optional_string(args, "resources_id");
  const auto id_part = optional_string(args, "resources_id_contains");
  // Listed without their content: an archived version's is read back from the checkpoint, only for the page's
  // versions (or every match's where the page is sorted by it), in one pass.
  const auto with_content = [&](const std::vector<store::ResourcesVersion>& listed) {
    std::vector<store::ResourcesId> ids;
    for (const store::ResourcesVersion& v : listed) ids.push_back(v.id);
    return store_.get_resources(ids);
  };
  std::vector<store::ResourcesVersion> matches;
  for (store::ResourcesVersion& v : store_.list_resources()) {
    if (v.name == store::trained_resources) continue;  // rank 0's ledger, not resources (latest_client_resources)
    Filters f(page.any_filter);
    f.add(id.has_value(), id == resources_name(v.id));
    f.add(id_part.has_value(), contains(resources_name(v.id), id_part));
    if (f.pass()) matches.push_back(std::move(v));
  }
  const auto item = [&](const store::ResourcesVersion& v) { return resources_item(v); };
  if (page.sort_by == "resources") return json_answer(200, paginated(with_content(matches), page, item));
  std::vector<Json> listed;  // without content: what a sort by any other field reads
  std::vector<store::ResourcesVersion> shown;
  for (const std::size_t i : page_places(matches, page, item, listed)) shown.push_back(matches[i]);
  std::vector<Json> items;
  for (const store::ResourcesVersion& v : with_content(shown)) items.push_back(item(v));
  return json_answer(200, page_json(std::move(items), matches.size(), page));
}

HttpResponse StoreApi::get_latest_resources(const HttpRequest&) {
  const auto latest = resources_or_none(store_, "");
  return json_answer(200, latest ? resources_item(*latest) : Json());
}

HttpResponse StoreApi::get_resources(const HttpRequest& request) {
  const auto found = resources_or_none(store_, request.captures.at(0));
  return json_answer(200, found ? resources_item(*found) : Json());
}

// An upsert: rs-<n> or a name gets its next version (versions are immutable: each has an id of its own); a new name
// is created.
HttpResponse StoreApi::update_resources(const HttpRequest& request) {
  const std::string& id = request.captures.at(0);
  const std::string content = object_body(request).dump(-1, ' ', false, Json::error_handler_t::replace);
  const auto number = parse_resources_name(id);
  const std::string name = number ? store_.get_resources(*number).name : id;
  if (name == store::policy_resources ||
      name == store::trained_resources)  // arclight's own (wire-encoded): the trainers and rank 0 write them
    throw StoreError(StoreError::invalid_transition, "resources '" + name + "' are arclight's own, not written here");
  if (number) return json_answer(200, resources_item(store_.update_resources(name, content)));
  try {
    return json_answer(200, resources_item(store_.update_resources(id, content)));
  } catch (const StoreError& e) {
    if (e.code() != StoreError::not_found) throw;
  }
  try {
    return json_answer(200, resources_item(store_.add_resources(id, content)));
  } catch (const StoreError& e) {  // another client created it in between
    if (e.code() != StoreError::invalid_transition) throw;
    return json_answer(200, resources_item(store_.update_resources(id, content)));
  }
}

// ---- spans --------------------------------------------------------------------------------------

HttpResponse StoreApi::add_span(const HttpRequest& request) {
  Json body = text::parse_json<Json>(request.body);
  if (body.is_discarded())
    throw unprocessable("the body is not JSON (or nests deeper than " + std::to_string(text::max_json_depth) +
                        " levels)");
  store::Span span = span_from_json(body);
  Json echo = span_json(span);
  const std::uint64_t sequence_id = store_.add_span(std::move(span));
  if (sequence_id == 0) return json_answer(201, nullptr);  // its attempt holds this span id: kept once, as AGL does
  echo["sequence_id"] = sequence_id;
  return json_answer(201, echo);
}

// A rollout this store does not hold is 404 (Agent Lightning's per-id counter answers 1, and the span sent next is
// its 500): the store's contract, which every implementation keeps (tests/store/store_suite.hpp).
HttpResponse StoreApi::next_sequence_id(const HttpRequest& request) {
  const Json body = object_body(request);
  const auto rollout = optional_string(body, "rollout_id");
  if (!rollout) throw unprocessable("rollout_id: missing");
  return json_answer(200, {{"sequence_id", store_.next_sequence_id(existing_rollout(*rollout))}});
}

// A rollout or attempt this store does not hold (or an attempt of another rollout) has no spans: an empty page, as
// Agent Lightning answers.
HttpResponse StoreApi::query_spans(const HttpRequest& request) {
  const Json args = arguments_of(request);
  const PageRequest page = page_request(args, {SPAN_FIELDS});
  const auto rollout = optional_string(args, "rollout_id");
  if (!rollout) throw unprocessable("rollout_id: missing");
  store::SpanFilter filter;
  filter.rollout_id = rollout_of(*rollout).value_or(0);
  const auto attempt = optional_string(args, "attempt_id");
  filter.attempt_id = !attempt               ? 0
                      : *attempt == "latest" ? store::latest_attempt
                                             : parse_attempt_name(*attempt).value_or(0);
  if (const Json* v = find(args, "after_sequence_id"); v && !v->is_null()) {  // arclight's
    if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<std::int64_t>() >= 0))
      throw unprocessable("after_sequence_id: expected an integer >= 0");
    filter.after_sequence_id = v->is_number_unsigned() ? v->get<std::uint64_t>() : v->get<std::int64_t>();
  }
  struct Exact {
    const char* key;
    const char* part_key;
    std::string store::Span::*field;
  };
  static const Exact fields[] = {{"trace_id", "trace_id_contains", &store::Span::trace_id},
                                 {"span_id", "span_id_contains", &store::Span::span_id},
                                 {"parent_id", "parent_id_contains", &store::Span::parent_id},
                                 {"name", "name_contains", &store::Span::name}};
  std::vector<std::pair<std::optional<std::string>, std::optional<std::string>>> wanted;
  for (const Exact& e : fields) wanted.emplace_back(optional_string(args, e.key), optional_string(args, e.part_key));
  std::vector<store::Span> spans;
  try {
    if (filter.rollout_id != 0 && (!attempt || filter.attempt_id != 0)) spans = store_.query_spans(filter, {}).items;
  } catch (const StoreError& e) {  // asked only then: a rollout let go of is read back once, not three times
    if (e.code() != StoreError::not_found || holds_spans_of(store_, filter)) throw;
  }
  std::vector<store::Span> matches;
  for (store::Span& span : spans) {
    Filters f(page.any_filter);
    for (std::size_t i = 0; i < std::size(fields); ++i) {
      const std::string& value = span.*fields[i].field;
      f.add(wanted[i].first.has_value(), wanted[i].first == value);
      f.add(wanted[i].second.has_value(), contains(value, wanted[i].second));
    }
    if (f.pass()) matches.push_back(std::move(span));
  }
  return json_answer(200, paginated(std::move(matches), page, span_json));
}

void StoreApi::ingest_otlp(std::vector<Json> spans) {
  std::vector<store::Span> taken;
  std::size_t dropped = 0;
  for (const Json& json : spans) {
    try {
      taken.push_back(span_from_json(json));
    } catch (const StoreJsonError& e) {  // ids this store did not give
      ++dropped;
    }
  }
  for (std::uint64_t sequence_id : store_.add_spans(std::move(taken))) dropped += sequence_id == 0;
  if (dropped)
    log::debug("store api: ", dropped, " of ", spans.size(), " OTLP spans left out (unknown, ended or sent before)");
}

// ---- waits, workers -----------------------------------------------------------------------------

HttpResponse StoreApi::wait_for_rollouts(const HttpRequest& request) {
  const Json body = object_body(request);
  double timeout = options_.max_wait_seconds;
  if (const Json* v = find(body, "timeout"); v && !v->is_null()) {
    if (!v->is_number()) throw unprocessable("timeout: expected seconds");
    timeout = std::clamp(v->get<double>(), 0.0, options_.max_wait_seconds);
  }
  store::RolloutFilter known;  // unknown ids are left out, as Agent Lightning does
  for (const std::string& id : string_list(body, "rollout_ids").value_or(std::vector<std::string>{}))
    if (const auto number = rollout_of(id)) known.ids.push_back(*number);
  std::vector<store::RolloutId> ids;
  if (!known.ids.empty())
    for (const store::Rollout& r : store_.query_rollouts(known, {}).items) ids.push_back(r.id);
  Json out = Json::array();
  if (!ids.empty())
    for (const store::Rollout& r : store_.wait_for_rollouts(ids, timeout)) out.push_back(rollout_json(r));
  return json_answer(200, out);
}

HttpResponse StoreApi::query_workers(const HttpRequest& request) {
  const Json args = arguments_of(request);
  const PageRequest page = page_request(args, {WORKER_FIELDS});
  const auto statuses = status_bits<store::WorkerStatus>(args, "status_in", store::worker_status_count);
  const auto id_part = optional_string(args, "worker_id_contains");
  std::vector<store::Worker> matches;
  for (store::Worker& w : store_.query_workers()) {
    Filters f(page.any_filter);
    f.add(statuses.has_value(), statuses.value_or(0) & store::bit(w.status));
    f.add(id_part.has_value(), contains(w.id, id_part));
    if (f.pass()) matches.push_back(std::move(w));
  }
  return json_answer(200, paginated(std::move(matches), page, worker_json));
}

HttpResponse StoreApi::get_worker(const HttpRequest& request) {
  for (const store::Worker& w : store_.query_workers())
    if (w.id == request.captures.at(0)) return json_answer(200, worker_json(w));
  return json_answer(200, nullptr);
}

HttpResponse StoreApi::update_worker(const HttpRequest& request) {
  const Json body = object_body(request);
  if (const Json* stats = not_null(body, "heartbeat_stats"); stats && !stats->is_object())
    throw unprocessable("heartbeat_stats: expected an object");
  return json_answer(200, worker_json(store_.heartbeat(request.captures.at(0))));
}

}  // namespace arclight::serve
