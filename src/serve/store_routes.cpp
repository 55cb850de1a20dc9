// add_store_routes over the handlers of store_api.cpp (apart, so that their fuzzer builds without the HTTP server).
#include "arclight/serve/store_routes.hpp"

#include <memory>

#include "otlp.hpp"
#include "store_api.hpp"

namespace arclight::serve {

void add_store_routes(HttpServer& server, store::Store& store, StoreRouteOptions options) {
  auto api = std::make_shared<StoreApi>(store, options);
  const std::string prefix = server.token_prefix_pattern();
  if (options.otlp) {
    OtlpOptions otlp;
    otlp.path = prefix + "/v1/traces";
    otlp.max_inflated_bytes = options.otlp_max_inflated_bytes;
    add_otlp_route(
        server, [api](std::vector<Json> spans) { api->ingest_otlp(std::move(spans)); }, otlp);
  }
  // OTLP's other signals, which Agent Lightning's server does not take either: 501, so an exporter stops at once.
  for (const char* signal : {"/v1/metrics", "/v1/logs", "/v1/development/profiles"})
    server.post(prefix + signal, [](const HttpRequest&) {
      return StoreApi::error_response(HttpError(501, "only traces are taken (POST /v1/traces)"));
    });
  for (const StoreApi::Route& route : StoreApi::routes()) {
    const std::string pattern = prefix + "/v1/agl" + route.path;
    HttpHandler handler = [api, h = route.handler](const HttpRequest& request) { return api->answer(h, request); };
    if (std::string(route.method) == "GET")
      server.get(pattern, std::move(handler));
    else
      server.post(pattern, std::move(handler));
  }
  // The server's own errors there (no route, no token, a body too large) in the same shape.
  server.format_errors("(/[^/]+)?/v1/agl(/.*)?",
                       [](const HttpRequest&, const HttpError& error) { return StoreApi::error_response(error); });
}

}  // namespace arclight::serve
