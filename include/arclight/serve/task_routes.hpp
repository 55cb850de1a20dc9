#pragma once
// The task interface of a runner for its outside agents: a strict subset of Agent Lightning v0.3's store API
// (../shared/agl-v0.3-interfaces.md), so one client serves this and rank 0's full store API. Under /v1/agl:
//   GET  /health                                  {"status": "ok"}
//   POST /queues/rollouts/dequeue                 {"limit", "worker_id"} -> [AttemptedRollout] (long poll)
//   POST /spans                                   Span -> 201 Span (a reward, an episode's result)
//   POST /spans/next                              {"rollout_id", "attempt_id"} -> {"sequence_id"}
//   POST /rollouts/{rid}/attempts/{aid|latest}    {"status": succeeded|failed|running} -> Attempt
// Errors are {"detail": ...}: 404 for an attempt this runner does not run, 422 for a body that does not parse.
#include "arclight/serve/http_server.hpp"
#include "arclight/serve/runner_api.hpp"

namespace arclight::serve {

struct TaskRouteOptions {
  double dequeue_wait_seconds = 1.0;  // how long a dequeue waits for a rollout when the queue is empty
  // Rollouts whose /spans/next counter is kept, the newest (highest ids): an older one's counts from 1 again (the store
  // issues the sequence ids it orders spans by). Without a bound a runner kept one for every rollout of the run.
  std::size_t sequence_counters = 65536;
};

// `backend` outlives the server.
void add_task_routes(HttpServer& server, TaskBackend& backend, TaskRouteOptions options = {});

}  // namespace arclight::serve
