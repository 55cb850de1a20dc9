#pragma once
// The store API's request arguments (Agent Lightning's JSON bodies and GET queries: paging, filters, rollout
// configs) and the JSON of what it answers with, apart from the routes in store_api.cpp. Private to serve.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "arclight/serve/http_server.hpp"
#include "arclight/store/store.hpp"
#include "store_json.hpp"

namespace arclight::serve::store_args {

inline HttpError bad_request(const std::string& message) { return HttpError(400, message); }
inline HttpError unprocessable(const std::string& message) { return HttpError(422, message); }

// The paging, sorting and filter logic of a query (_validate_paginated_request).
struct PageRequest {
  std::int64_t limit = -1, offset = 0;
  std::string sort_by;
  bool descending = false;
  bool any_filter = false;  // filter_logic "or"
};

// Filters combined by filter_logic; none given matches everything.
class Filters {
 public:
  explicit Filters(bool any) : any_(any) {}
  void add(bool given, bool matches) {
    if (!given) return;
    ++given_;
    matched_ += matches;
  }
  bool pass() const { return given_ == 0 || (any_ ? matched_ > 0 : matched_ == given_); }

 private:
  bool any_;
  int given_ = 0, matched_ = 0;
};

// The body as a JSON object; no body is {} (Agent Lightning's client sends none for a plain dequeue or heartbeat).
Json object_body(const HttpRequest& request);

// A GET query as the JSON object its POST twin takes: keys ending in _in are lists (repeated keys), limit, offset and
// after_sequence_id integers, the rest strings.
Json query_object(const HttpRequest& request);

// The query of a GET, the body of a POST.
Json arguments_of(const HttpRequest& request);

const Json* find(const Json& object, const char* key);

// An optional string: absent or null is nullopt.
std::optional<std::string> optional_string(const Json& object, const char* key);

// A list of strings; left out or null: nullopt. As a filter, a list given empty matches nothing (Agent Lightning's
// `within []`), one left out is no filter.
std::optional<std::vector<std::string>> string_list(const Json& object, const char* key);

// A key that may be left out but, where given, must not be null (Agent Lightning answers 400).
const Json* not_null(const Json& object, const char* key);

double seconds_of(const Json& value, const char* key);

store::RolloutConfig config_of(const Json& json, const store::RolloutConfig& defaults);

std::string metadata_of(const Json& value);

std::optional<store::RolloutId> rollout_of(const std::string& name);

store::RolloutId existing_rollout(const std::string& name);

PageRequest page_request(const Json& args, std::initializer_list<const char*> fields);

bool contains(const std::string& text, const std::optional<std::string>& part);

// Null sorts last; numbers compare as numbers; other kinds by nlohmann's order.
bool sorts_before(const Json& a, const Json& b);

Json page_json(std::vector<Json> items, std::size_t total, const PageRequest& p);

Json worker_json(const store::Worker& w);

// A resources version as a ResourcesUpdate: its content when that is a JSON object (NamedResources), else {}.
Json resources_json(const store::ResourcesVersion& v);

// The newest resources version but rank 0's ledger of trained rollouts ("trained"); none before the first.
std::optional<store::ResourcesVersion> latest_client_resources(store::Store& store);
std::optional<store::ResourcesVersion> resources_or_none(store::Store& store, const std::string& id);

// resources_id of a new rollout or an update: rs-<n> or a resources name (its latest version).
store::ResourcesId resources_of(store::Store& store, const std::string& id);

// A rollout's `mode` as sent: a mode's name, or null (Agent Lightning's None).
store::Mode mode_of(const Json& value);

// EnqueueRolloutRequest / RolloutRequest.
store::NewRollout new_rollout_of(store::Store& store, const Json& json, const store::RolloutConfig& defaults);

template <class Enum>
Enum enum_of(const Json& value, const char* key, int count) {
  if (value.is_string())
    for (int i = 0; i < count; ++i)
      if (store::to_string(static_cast<Enum>(i)) == value.get<std::string>()) return static_cast<Enum>(i);
  throw unprocessable(std::string(key) + ": not a known value");
}

// A list of enum values as bits; left out or null: nullopt (as string_list).
template <class Enum>
std::optional<std::uint8_t> status_bits(const Json& object, const char* key, int count) {
  const auto names = string_list(object, key);
  if (!names) return std::nullopt;
  std::uint8_t bits = 0;
  for (const std::string& name : *names) bits |= store::bit(enum_of<Enum>(Json(name), key, count));
  return bits;
}

// The places in `all` of one page's items: in the store's order, or sorted by a field of their JSON, `json`, which is
// filled with every item's as `to_json` writes it where the page is sorted (left empty otherwise).
template <class T, class ToJson>
std::vector<std::size_t> page_places(const std::vector<T>& all, const PageRequest& p, const ToJson& to_json,
                                     std::vector<Json>& json) {
  const std::size_t total = all.size();
  const std::size_t begin = std::min(total, static_cast<std::size_t>(p.offset));
  const std::size_t count = p.limit < 0 ? total - begin : std::min(total - begin, static_cast<std::size_t>(p.limit));
  std::vector<std::size_t> order(total);
  for (std::size_t i = 0; i < total; ++i) order[i] = i;
  if (!p.sort_by.empty()) {
    json.clear();
    for (const T& item : all) json.push_back(to_json(item));
    const auto key = [&](std::size_t i) { return json[i].contains(p.sort_by) ? json[i][p.sort_by] : Json(); };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return p.descending ? sorts_before(key(b), key(a)) : sorts_before(key(a), key(b));
    });
  }
  return {order.begin() + static_cast<std::ptrdiff_t>(begin),
          order.begin() + static_cast<std::ptrdiff_t>(begin + count)};
}

// One page of `all`, converted by `to_json` (once each).
template <class T, class ToJson>
Json paginated(const std::vector<T>& all, const PageRequest& p, const ToJson& to_json) {
  std::vector<Json> json;
  std::vector<Json> items;
  for (const std::size_t i : page_places(all, p, to_json, json))
    items.push_back(json.empty() ? to_json(all[i]) : std::move(json[i]));
  return page_json(std::move(items), all.size(), p);
}

}  // namespace arclight::serve::store_args
