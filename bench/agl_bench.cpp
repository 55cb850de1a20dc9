// scripts/bench.sh agl: Agent Lightning's store API (serve::add_store_routes over a MemoryStore, on a serve::HttpServer
// set up as rank 0 sets it up: loopback, the job's secret as the URL's first path segment, 404 without it) under
// cpp-httplib clients on kept-alive connections, 1 client thread and CLIENTS threads. Requests/s of each operation
// on its own, in phases: enqueue (one rollout a request), dequeue, span ingest as JSON (POST /v1/agl/spans) and as
// OTLP/HTTP protobuf (POST /v1/traces: one span a request, and a rollout's 10 spans a request, as a batching exporter
// sends them), completing the attempt. Then the mix of bench/store_mpi.cpp over HTTP (per rollout: enqueue, dequeue,
// 10 spans, succeeded; 13 requests), which bench/agl.sh sets against the store over MPI and in-process. The spans are
// those of bench/store_mpi.cpp (8 attributes of 64 characters). Every answer must have its route's status, and after
// each phase the store must hold exactly what was sent: else a message and exit 1.
// Usage: bench_agl ROLLOUTS CLIENTS (ROLLOUTS for each run, shared among its client threads). Prints one JSON line.
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "arclight/core/clock.hpp"
#include "arclight/serve/http_server.hpp"
#include "arclight/serve/store_routes.hpp"
#include "arclight/store/memory_store.hpp"
#include "otlp_trace.pb.h"

using namespace arclight;
using Json = nlohmann::json;
using Steady = std::chrono::steady_clock;

namespace {

constexpr int spans_per_rollout = 10;
constexpr int attributes_per_span = 8;
const std::string trace_id_hex = "4bf92f3577b34da6a3ce929d0e0e4736";
const std::string trace_id_bytes("\x4b\xf9\x2f\x35\x77\xb3\x4d\xa6\xa3\xce\x92\x9d\x0e\x0e\x47\x36", 16);

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

void check(bool ok, const std::string& what) {
  if (!ok) fail("check failed: " + what);
}

std::string random_secret() {
  std::random_device device;
  std::string secret;
  for (int i = 0; i < 32; ++i) secret += "0123456789abcdef"[device() % 16];
  return secret;
}

// The attributes of bench/store_mpi.cpp's i-th span.
std::string attribute_key(int k) { return "attr" + std::to_string(k); }
std::string attribute_value(int i, int k) { return std::string(64, char('a' + (i + k) % 26)); }

// Span n of a rollout (0..9 as JSON, 10..29 over OTLP) has the span id n + 1: unique within its attempt, as the
// store wants (a repeated span id is a duplicate, not stored).
std::string span_id_hex(int n) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(n + 1));
  return hex;
}
std::string span_id_bytes(int n) {
  std::string bytes(8, '\0');
  for (int b = 0; b < 8; ++b) bytes[7 - b] = char(std::uint64_t(n + 1) >> (8 * b));
  return bytes;
}

// A span as Agent Lightning's client posts it (the whole Span model), all but its ids; span_body puts them first.
std::vector<std::string> span_json_tails() {
  std::vector<std::string> tails;
  for (int i = 0; i < spans_per_rollout; ++i) {
    Json attributes = Json::object();
    for (int k = 0; k < attributes_per_span; ++k) attributes[attribute_key(k)] = attribute_value(i, k);
    const std::string span_id = span_id_hex(i);
    const Json span = {
        {"sequence_id", i + 1},
        {"trace_id", trace_id_hex},
        {"span_id", span_id},
        {"parent_id", nullptr},
        {"name", "llm.generate"},
        {"status", {{"status_code", "OK"}, {"description", nullptr}}},
        {"attributes", std::move(attributes)},
        {"events", Json::array()},
        {"links", Json::array()},
        {"start_time", 1700000000.0 + i},
        {"end_time", 1700000000.5 + i},
        {"context",
         {{"trace_id", trace_id_hex}, {"span_id", span_id}, {"is_remote", false}, {"trace_state", Json::object()}}},
        {"parent", nullptr},
        {"resource", {{"attributes", Json::object()}, {"schema_url", ""}}}};
    tails.push_back(span.dump().substr(1));  // without its "{"
  }
  return tails;
}

std::string span_body(const std::string& rollout_id, const std::string& attempt_id, const std::string& tail) {
  return "{\"rollout_id\":\"" + rollout_id + "\",\"attempt_id\":\"" + attempt_id + "\"," + tail;
}

void add_string(google::protobuf::RepeatedPtrField<otlp::KeyValue>* pairs, const std::string& key,
                const std::string& value) {
  otlp::KeyValue* pair = pairs->Add();
  pair->set_key(key);
  pair->mutable_value()->set_string_value(value);
}

// An OTLP export of spans [first, first + count) of a rollout, as Agent Lightning's tracer sends it: the rollout and
// attempt as resource attributes, no sequence id (the store issues them).
std::string otlp_export(const std::string& rollout_id, const std::string& attempt_id, int first, int count) {
  otlp::ExportTraceServiceRequest request;
  otlp::ResourceSpans* group = request.add_resource_spans();
  auto* resource = group->mutable_resource()->mutable_attributes();
  add_string(resource, "service.name", "bench");
  add_string(resource, "agentlightning.rollout_id", rollout_id);
  add_string(resource, "agentlightning.attempt_id", attempt_id);
  otlp::ScopeSpans* scope = group->add_scope_spans();
  for (int n = first; n < first + count; ++n) {
    const int i = n % spans_per_rollout;
    otlp::Span* span = scope->add_spans();
    span->set_trace_id(trace_id_bytes);
    span->set_span_id(span_id_bytes(n));
    span->set_name("llm.generate");
    span->set_start_time_unix_nano(1700000000000000000ull + i * 1000000000ull);
    span->set_end_time_unix_nano(1700000000500000000ull + i * 1000000000ull);
    span->mutable_status()->set_code(otlp::Status::STATUS_CODE_OK);
    for (int k = 0; k < attributes_per_span; ++k)
      add_string(span->mutable_attributes(), attribute_key(k), attribute_value(i, k));
  }
  return request.SerializeAsString();
}

// The store API as rank 0 serves it (src/app/store_api_server.cpp), over a fresh MemoryStore.
struct StoreApiServer {
  SystemClock clock;
  store::MemoryStore store{clock};
  std::string secret = random_secret();
  serve::HttpServer http{options(secret)};

  StoreApiServer() {
    serve::add_store_routes(http, store);
    http.start();
  }
  static serve::HttpServerOptions options(const std::string& secret) {
    serve::HttpServerOptions o;
    o.bearer_token = secret;
    o.token_in_path = true;
    o.missing_token_status = 404;
    o.read_timeout = o.write_timeout = o.idle_timeout = std::chrono::seconds(30);
    return o;
  }
};

// One client thread's kept-alive connection, its paths under the base URL http://127.0.0.1:PORT/<secret> as Agent
// Lightning's client keeps it.
class ApiClient {
 public:
  ApiClient(int port, const std::string& secret) : http_("127.0.0.1", port), prefix_("/" + secret) {
    http_.set_keep_alive(true);
    http_.set_tcp_nodelay(true);  // as aiohttp, Agent Lightning's client, sets it
    http_.set_connection_timeout(5, 0);
    http_.set_read_timeout(30, 0);
    http_.set_write_timeout(30, 0);
  }
  // The answer's body; anything but `expected_status` fails.
  std::string post(const std::string& path, const std::string& body, const char* content_type, int expected_status) {
    return checked("POST", path, http_.Post(prefix_ + path, body, content_type), expected_status);
  }
  std::string get(const std::string& path, int expected_status, bool with_secret = true) {
    return checked("GET", path, http_.Get(with_secret ? prefix_ + path : path), expected_status);
  }

 private:
  static std::string checked(const char* method, const std::string& path, httplib::Result result, int expected) {
    if (!result) fail(std::string(method) + " " + path + ": " + httplib::to_string(result.error()));
    if (result->status != expected)
      fail(std::string(method) + " " + path + ": status " + std::to_string(result->status) + " (expected " +
           std::to_string(expected) + "): " + result->body.substr(0, 300));
    return std::move(result->body);
  }
  httplib::Client http_;
  std::string prefix_;
};

const char* const json_type = "application/json";
const char* const protobuf_type = "application/x-protobuf";

// Runs work(thread, its client) on every client's thread at once: the seconds until the last ends. A thread's
// exception is rethrown here.
template <class Work>
double timed(std::vector<std::unique_ptr<ApiClient>>& clients, Work work) {
  std::vector<std::exception_ptr> errors(clients.size());
  std::vector<std::thread> threads;
  const auto start = Steady::now();
  for (std::size_t t = 0; t < clients.size(); ++t)
    threads.emplace_back([&, t] {
      try {
        work(t, *clients[t]);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (std::thread& thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(Steady::now() - start).count();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return seconds;
}

struct Ids {
  std::string rollout, attempt;
};

// A dequeue's answer: exactly one attempted rollout.
Ids one_dequeued(const std::string& body) {
  const Json answer = Json::parse(body, nullptr, false);
  check(answer.is_array() && answer.size() == 1, "a dequeue answered one attempted rollout: " + body.substr(0, 300));
  const Json& item = answer[0];
  check(item.contains("attempt") && item["status"] == "preparing", "the dequeued rollout has its attempt, preparing");
  return {item.at("rollout_id").get<std::string>(), item.at("attempt").at("attempt_id").get<std::string>()};
}

std::string enqueue_body() { return R"({"rollouts":[{"input":"task"}]})"; }
std::string dequeue_body(std::size_t thread) {
  return "{\"limit\":1,\"worker_id\":\"bench-" + std::to_string(thread) + "\"}";
}
std::string attempt_path(const Ids& ids) { return "/v1/agl/rollouts/" + ids.rollout + "/attempts/" + ids.attempt; }
const std::string succeeded_body = R"({"status":"succeeded"})";

std::vector<std::unique_ptr<ApiClient>> connect(const StoreApiServer& server, int threads) {
  std::vector<std::unique_ptr<ApiClient>> clients;
  for (int t = 0; t < threads; ++t) {
    clients.push_back(std::make_unique<ApiClient>(server.http.port(), server.secret));
    clients.back()->get("/v1/agl/health", 200);  // opens the connection, outside the timings
  }
  return clients;
}

std::uint64_t total(const std::uint64_t* counts, std::size_t n) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += counts[i];
  return sum;
}

struct PhaseFigures {
  int clients;
  double enqueue, dequeue, spans_json, spans_otlp, otlp_batch_spans, complete;
};

// Each operation on its own: every thread does its share of a phase, the next phase starts when all are done.
PhaseFigures run_phases(int threads, int rollouts) {
  StoreApiServer server;
  auto clients = connect(server, threads);
  clients[0]->get("/v1/agl/health", 404, false);  // without the secret, nothing is there
  const int per_thread = rollouts / threads, n = per_thread * threads;
  PhaseFigures f{threads, 0, 0, 0, 0, 0, 0};
  auto stats = [&] { return server.store.statistics(); };

  f.enqueue = n / timed(clients, [&](std::size_t, ApiClient& c) {
                for (int r = 0; r < per_thread; ++r)
                  c.post("/v1/agl/queues/rollouts/enqueue", enqueue_body(), json_type, 201);
              });
  check(stats().queue_length == std::uint64_t(n), "every enqueued rollout is queuing");

  std::vector<std::vector<std::string>> answers(threads);
  f.dequeue = n / timed(clients, [&](std::size_t t, ApiClient& c) {
                for (int r = 0; r < per_thread; ++r)
                  answers[t].push_back(c.post("/v1/agl/queues/rollouts/dequeue", dequeue_body(t), json_type, 200));
              });
  std::vector<std::vector<Ids>> ids(threads);
  std::set<std::string> distinct;
  for (int t = 0; t < threads; ++t)
    for (const std::string& body : answers[t]) {
      ids[t].push_back(one_dequeued(body));
      distinct.insert(ids[t].back().rollout);
    }
  check(distinct.size() == std::size_t(n), "every dequeue got a rollout of its own");
  check(stats().queue_length == 0 && total(stats().attempts, store::attempt_status_count) == std::uint64_t(n),
        "the queue is empty and every rollout has one attempt");

  // Bodies are built before the clock starts, as the MPI and in-process benchmarks build their spans.
  const std::vector<std::string> tails = span_json_tails();
  std::vector<std::vector<std::string>> bodies(threads);
  for (int t = 0; t < threads; ++t)
    for (const Ids& i : ids[t])
      for (const std::string& tail : tails) bodies[t].push_back(span_body(i.rollout, i.attempt, tail));
  f.spans_json =
      double(n) * spans_per_rollout / timed(clients, [&](std::size_t t, ApiClient& c) {
        for (const std::string& body : bodies[t])
          check(c.post("/v1/agl/spans", body, json_type, 201) != "null", "a span was stored, not a duplicate");
      });
  check(stats().spans == std::uint64_t(n) * spans_per_rollout, "the store holds every JSON span");

  for (int t = 0; t < threads; ++t) {
    bodies[t].clear();
    for (const Ids& i : ids[t])
      for (int s = 0; s < spans_per_rollout; ++s)
        bodies[t].push_back(otlp_export(i.rollout, i.attempt, spans_per_rollout + s, 1));
  }
  f.spans_otlp = double(n) * spans_per_rollout / timed(clients, [&](std::size_t t, ApiClient& c) {
                   for (const std::string& body : bodies[t]) c.post("/v1/traces", body, protobuf_type, 200);
                 });
  // OTLP answers 200 whatever it keeps (as Agent Lightning's server does): the store's count is the check.
  check(stats().spans == std::uint64_t(n) * spans_per_rollout * 2, "the store holds every OTLP span");

  for (int t = 0; t < threads; ++t) {
    bodies[t].clear();
    for (const Ids& i : ids[t])
      bodies[t].push_back(otlp_export(i.rollout, i.attempt, 2 * spans_per_rollout, spans_per_rollout));
  }
  f.otlp_batch_spans = double(n) * spans_per_rollout / timed(clients, [&](std::size_t t, ApiClient& c) {
                         for (const std::string& body : bodies[t]) c.post("/v1/traces", body, protobuf_type, 200);
                       });
  check(stats().spans == std::uint64_t(n) * spans_per_rollout * 3, "the store holds every batched OTLP span");

  f.complete = n / timed(clients, [&](std::size_t t, ApiClient& c) {
                 for (const Ids& i : ids[t]) c.post(attempt_path(i), succeeded_body, json_type, 200);
               });
  const store::Statistics end = stats();
  check(end.rollouts[int(store::RolloutStatus::succeeded)] == std::uint64_t(n) &&
            end.attempts[int(store::AttemptStatus::succeeded)] == std::uint64_t(n),
        "every rollout and attempt succeeded");
  // Each rollout got its own 30 spans, with the sequence ids 1..30 (10 from the client, 20 issued by the store).
  for (const auto& thread_ids : ids)
    for (const Ids& i : thread_ids) {
      store::SpanFilter filter;
      filter.rollout_id = std::stoull(i.rollout.substr(3));  // "ro-<n>"
      const auto spans = server.store.query_spans(filter, {}).items;
      std::set<std::uint64_t> sequence_ids;
      for (const store::Span& s : spans) sequence_ids.insert(s.sequence_id);
      check(spans.size() == 3 * spans_per_rollout && sequence_ids.size() == spans.size() &&
                *sequence_ids.rbegin() == spans.size(),
            "rollout " + i.rollout + " holds its 30 spans, sequence ids 1..30");
    }
  return f;
}

// bench/store_mpi.cpp's mix over HTTP: per rollout enqueue, dequeue, 10 spans, succeeded; each thread in turn.
double run_mix(int threads, int rollouts) {
  StoreApiServer server;
  auto clients = connect(server, threads);
  const int per_thread = rollouts / threads, n = per_thread * threads;
  const std::vector<std::string> tails = span_json_tails();
  const double seconds = timed(clients, [&](std::size_t t, ApiClient& c) {
    for (int r = 0; r < per_thread; ++r) {
      c.post("/v1/agl/queues/rollouts/enqueue", enqueue_body(), json_type, 201);
      const Ids ids = one_dequeued(c.post("/v1/agl/queues/rollouts/dequeue", dequeue_body(t), json_type, 200));
      for (const std::string& tail : tails)
        c.post("/v1/agl/spans", span_body(ids.rollout, ids.attempt, tail), json_type, 201);
      c.post(attempt_path(ids), succeeded_body, json_type, 200);
    }
  });
  const store::Statistics end = server.store.statistics();
  check(end.rollouts[int(store::RolloutStatus::succeeded)] == std::uint64_t(n) &&
            total(end.rollouts, store::rollout_status_count) == std::uint64_t(n) &&
            end.spans == std::uint64_t(n) * spans_per_rollout,
        "the mix left every rollout succeeded with its spans");
  return n * (3.0 + spans_per_rollout) / seconds;
}

std::string figures_json(const PhaseFigures& f, double mix) {
  char out[512];
  std::snprintf(out, sizeof out,
                "{\"clients\": %d, \"enqueue_per_s\": %.0f, \"dequeue_per_s\": %.0f, \"spans_json_per_s\": %.0f, "
                "\"spans_otlp_per_s\": %.0f, \"otlp_batch_spans_per_s\": %.0f, \"complete_per_s\": %.0f, "
                "\"mix_ops_per_s\": %.0f}",
                f.clients, f.enqueue, f.dequeue, f.spans_json, f.spans_otlp, f.otlp_batch_spans, f.complete, mix);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::atoi(argv[2]) < 1 || std::atoi(argv[1]) < std::atoi(argv[2])) {
    std::fprintf(stderr, "usage: bench_agl ROLLOUTS CLIENTS (1 <= CLIENTS <= ROLLOUTS)\n");
    return 2;
  }
  const int rollouts = std::atoi(argv[1]), many = std::atoi(argv[2]);
  try {
    std::string json;
    for (int threads : many == 1 ? std::vector<int>{1} : std::vector<int>{1, many}) {
      const PhaseFigures f = run_phases(threads, rollouts);
      const double mix = run_mix(threads, rollouts);
      std::printf(
          "store API over HTTP, %d client thread(s), requests/s: enqueue %.0f, dequeue %.0f, span JSON %.0f, span "
          "OTLP %.0f (10 spans a request: %.0f spans/s), attempt succeeded %.0f; the mix %.0f ops/s\n",
          threads, f.enqueue, f.dequeue, f.spans_json, f.spans_otlp, f.otlp_batch_spans, f.complete, mix);
      json += (json.empty() ? "" : ", ") + figures_json(f, mix);
    }
    std::printf("{\"rollouts\": %d, \"http\": [%s]}\n", rollouts, json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_agl: %s\n", e.what());
    return 1;
  }
  return 0;
}
