#pragma once
// Rank 0's store over HTTP, as Agent Lightning v0.3's LightningStore server answers (../shared/agl-v0.3-interfaces.md,
// section 1): every route under /v1/agl, and OTLP/HTTP trace ingest at /v1/traces. It serves the Store the MPI runners
// use, through the same interface, so an HTTP client and an MPI runner see one state machine. Where the server takes
// its token in the path (HttpServerOptions::token_in_path), the routes also answer under /<token>.
#include <cstddef>
#include <optional>
#include <string>

#include "arclight/serve/http_server.hpp"
#include "arclight/store/store.hpp"

namespace arclight::serve {

// The LLM that a policy version is to an Agent Lightning agent: the endpoint that serves it (.../v1), and how.
struct PolicyLlm {
  std::string endpoint;
  std::string model;
  std::string api_key;
  double temperature = 1.0;
};

struct StoreRouteOptions {
  double max_wait_seconds = 10;  // the longest POST /waits/rollouts waits (Agent Lightning's client asks for <= 0.1 s)
  bool otlp = true;              // POST /v1/traces: spans of an OTLP/HTTP export go to the store
  std::size_t otlp_max_inflated_bytes = 16 << 20;
  // Set: resources named "policy" (arclight's policy versions) read as Agent Lightning's NamedResources
  // {"main_llm": {"resource_type": "proxy_llm", ...}} naming this LLM, so that a LitAgent's `llm` is this endpoint.
  // Unset (rank 0, which serves no LLM): they read as {}.
  std::optional<PolicyLlm> policy_llm;
  // A rollout's config fields left out or null: the job's rollout.* (store::MemoryStore's default_config).
  store::RolloutConfig rollout_defaults;
};

// `store` outlives the server. Added before the server starts.
void add_store_routes(HttpServer& server, store::Store& store, StoreRouteOptions options = {});

}  // namespace arclight::serve
