// libFuzzer target for the store API's request handling (store_api.cpp) over a MemoryStore: no server, no MPI. An
// input's first byte picks the route; up to the first newline come the path's captures (split on '/'), the rest is
// the body (POST) or the query string (GET: k=v&k=v). Every answer must be JSON with a status the API gives: a 500
// would be a request that reached an error nobody handled.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "arclight/core/clock.hpp"
#include "arclight/store/memory_store.hpp"
#include "store_api.hpp"

using namespace arclight;
using namespace arclight::store;
using arclight::serve::StoreApi;

namespace {
ManualClock clock_;
std::unique_ptr<MemoryStore> fuzz_store;
std::unique_ptr<StoreApi> api;
int runs = 0;

void fresh_store() {
  RolloutConfig config;
  config.max_attempts = 2;
  config.retry_condition = bit(AttemptStatus::failed);
  api.reset();
  fuzz_store = std::make_unique<MemoryStore>(clock_, config);
  std::vector<NewRollout> rollouts(4);
  rollouts[0].input = R"({"question": "2+2"})";
  fuzz_store->enqueue(rollouts);
  for (const AttemptedRollout& a : fuzz_store->dequeue("w", 2)) {
    Span span;
    span.rollout_id = a.rollout.id;
    span.attempt_id = a.attempt.id;
    span.name = "llm";
    span.attributes.push_back({"tokens", TokenIds{1, 2}});
    fuzz_store->add_span(span);
  }
  fuzz_store->add_resources("policy", R"({"main": {"resource_type": "llm"}})");
  serve::StoreRouteOptions options;
  options.max_wait_seconds = 0;  // a wait answers at once
  api = std::make_unique<StoreApi>(*fuzz_store, options);
}

std::size_t groups_of(const char* pattern) {
  std::size_t n = 0;
  for (const char* c = pattern; *c; ++c) n += *c == '(';
  return n;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == separator) {
      parts.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!fuzz_store || ++runs % 2000 == 0) fresh_store();  // bounded memory over long runs
  if (size < 1) return 0;
  const auto& routes = StoreApi::routes();
  const StoreApi::Route& route = routes[data[0] % routes.size()];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t newline = rest.find('\n');
  const std::string_view captures = newline == std::string_view::npos ? std::string_view() : rest.substr(0, newline);
  const std::string_view body = newline == std::string_view::npos ? rest : rest.substr(newline + 1);

  serve::HttpRequest request;
  request.method = route.method;
  request.path = std::string("/v1/agl") + route.path;
  std::vector<std::string> given = split(captures, '/');
  for (std::size_t i = 0; i < groups_of(route.path); ++i) request.captures.push_back(i < given.size() ? given[i] : "");
  if (request.method == "GET") {
    for (const std::string& pair : split(body, '&')) {
      const std::size_t eq = pair.find('=');
      if (eq != std::string::npos) request.params.emplace(pair.substr(0, eq), pair.substr(eq + 1));
    }
  } else {
    request.body = std::string(body);
  }
  const serve::HttpResponse response = api->answer(route.handler, request);
  const int s = response.status;
  if (!(s == 200 || s == 201 || s == 400 || s == 404 || s == 409 || s == 422)) std::abort();
  if (response.content_type != "application/json") std::abort();
  if (serve::Json::parse(response.body, nullptr, false).is_discarded()) std::abort();
  return 0;
}
