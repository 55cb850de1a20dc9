#pragma once
// The handlers of the store's HTTP API (store_routes.hpp), apart from the server so that the fuzzer drives them
// without one. Private to serve.
#include <chrono>
#include <vector>

#include "arclight/serve/http_server.hpp"
#include "arclight/serve/store_routes.hpp"
#include "arclight/store/store.hpp"
#include "store_json.hpp"

namespace arclight::serve {

class StoreApi {
 public:
  using Handler = HttpResponse (StoreApi::*)(const HttpRequest&);
  struct Route {
    const char* method;  // GET or POST
    const char* path;    // a pattern after /v1/agl; its groups become the request's captures
    Handler handler;
  };
  // Every route, in the order they must be matched (a literal segment before a captured one).
  static const std::vector<Route>& routes();

  StoreApi(store::Store& store, StoreRouteOptions options);

  // Answers one request on one route: Agent Lightning's JSON, or its error shape ({"detail": ...}: 400 for a request
  // the store cannot take, 404 for what does not exist, 409 for a move the store refuses, 422 for a body that does
  // not validate, 500 otherwise). Never throws.
  HttpResponse answer(Handler handler, const HttpRequest& request);
  // An error on the API's paths (the server's own included: no route, body too large, no token).
  static HttpResponse error_response(const HttpError& error);
  // Spans of an OTLP export (otlp.hpp's JSON) into the store; those of unknown rollouts or attempts are left out.
  void ingest_otlp(std::vector<Json> spans);

  HttpResponse health(const HttpRequest& request);
  HttpResponse statistics(const HttpRequest& request);
  HttpResponse enqueue(const HttpRequest& request);
  HttpResponse dequeue(const HttpRequest& request);
  HttpResponse start_rollout(const HttpRequest& request);
  HttpResponse query_rollouts(const HttpRequest& request);
  HttpResponse get_rollout(const HttpRequest& request);
  HttpResponse update_rollout(const HttpRequest& request);
  HttpResponse start_attempt(const HttpRequest& request);
  HttpResponse query_attempts(const HttpRequest& request);
  HttpResponse get_latest_attempt(const HttpRequest& request);
  HttpResponse update_attempt(const HttpRequest& request);
  HttpResponse add_resources(const HttpRequest& request);
  HttpResponse query_resources(const HttpRequest& request);
  HttpResponse get_latest_resources(const HttpRequest& request);
  HttpResponse get_resources(const HttpRequest& request);
  HttpResponse update_resources(const HttpRequest& request);
  HttpResponse add_span(const HttpRequest& request);
  HttpResponse next_sequence_id(const HttpRequest& request);
  HttpResponse query_spans(const HttpRequest& request);
  HttpResponse wait_for_rollouts(const HttpRequest& request);
  HttpResponse query_workers(const HttpRequest& request);
  HttpResponse get_worker(const HttpRequest& request);
  HttpResponse update_worker(const HttpRequest& request);

 private:
  Json rollout_item(const store::Rollout& rollout);  // with "attempt" when it has one
  Json resources_item(const store::ResourcesVersion& version) const;
  store::ResourcesVersion add_named(const std::string& content);

  store::Store& store_;
  StoreRouteOptions options_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace arclight::serve
