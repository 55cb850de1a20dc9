// Rank 0's capacity for a cluster, on one machine (mpirun -np 1+C): many logical runners,
// multiplexed on C client ranks, each following a runner's message pattern with the sizes of
// configs/train_128gpu.toml (arith, 9 digits: one policy call of 21 prompt and 10 response
// tokens per episode, and a reward and a result span), against one rank 0 that serves its
// store as training does (MemoryStore, watchdog, StoreServer). Each logical runner, STEPS times
// over, dequeues its share of a step's rollouts and ends them with their spans in one request
// (end_attempts; fewer spans than runner.span_batch = 256, so none went before); like a runner
// rank it has one request in flight at a time, and a client rank has up to IN_FLIGHT of its
// logical runners' requests in flight at once (runners work side by side on a cluster). Rank 0
// then checks that every rollout succeeded with one attempt (none lost or answered twice) and
// that it saw every worker; the clients' request latencies come to rank 0. Last line: one JSON
// object.
//   bench_scale RUNNERS STEPS ROLLOUTS_PER_STEP STEP_SECONDS IN_FLIGHT
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <ctime>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <unordered_map>
#include <fstream>
#include <string>
#include <vector>

#include "arclight/comm/store_service.hpp"
#include "arclight/store/memory_store.hpp"

using namespace arclight;
using namespace arclight::store;
using Steady = std::chrono::steady_clock;

namespace {
constexpr int prompt_tokens = 21, response_tokens = 10, spans_per_episode = 3;

// This process's user and system CPU seconds, every thread's.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

// The spans of one arith episode, as a runner's tracer writes them.
void add_episode_spans(const AttemptedRollout& ar, std::vector<Span>& out) {
  Span llm;
  llm.rollout_id = ar.rollout.id;
  llm.attempt_id = ar.attempt.id;
  llm.name = "llm.call";
  llm.status = SpanStatus::ok;
  llm.attributes = {{"prompt_ids", TokenIds(std::vector<std::int32_t>(prompt_tokens, 3))},
                    {"response_ids", TokenIds(std::vector<std::int32_t>(response_tokens, 5))},
                    {"logprobs", Floats(std::vector<float>(response_tokens, -0.5f))},
                    {"policy_version", 7.0}};
  Span reward = llm;
  reward.name = "reward";
  reward.attributes = {{"reward", 0.8}, {"step", 0.0}};
  Span result = llm;
  result.name = "result";
  result.attributes = {{"token_accuracy", 0.8}, {"exact", 0.0}, {"success", 0.0}};
  out.push_back(std::move(llm));
  out.push_back(std::move(reward));
  out.push_back(std::move(result));
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const std::size_t k = std::min(v.size() - 1, static_cast<std::size_t>(p * double(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

// One client rank's logical runners. Each, like a runner rank, has one request in flight at a
// time: it dequeues its share, then ends those rollouts with their spans in one request, `steps`
// times over; up to `in_flight_most` of them have a request in flight at once. Each request's
// latency, send to reply, goes to `latencies`.
void run_logical_runners(int rank, int runners, int clients, int steps, int share, int in_flight_most,
                         std::vector<double>& latencies) {
  struct LogicalRunner {
    std::string name;
    int steps_left = 0;
    bool ending = false;  // its in-flight request is end_attempts (else dequeue)
    std::string request;
    MPI_Request send = MPI_REQUEST_NULL;
    Steady::time_point sent;
  };
  const int first = (rank - 1) * runners / clients, mine = rank * runners / clients - first;
  std::vector<LogicalRunner> logical(static_cast<std::size_t>(mine));
  std::deque<int> ready;
  for (int k = 0; k < mine; ++k) {
    logical[k].name = "runner-" + std::to_string(first + k);
    logical[k].steps_left = steps;
    ready.push_back(k);
  }
  std::unordered_map<std::uint32_t, int> runner_of;  // request id -> logical runner
  std::uint32_t next_id = 1;
  // Runner k's next request: a dequeue, or the end of the rollouts it holds; its buffer lives until the send completes.
  auto send = [&](int k, const std::vector<AttemptedRollout>* held) {
    LogicalRunner& r = logical[k];
    if (r.send != MPI_REQUEST_NULL) MPI_Wait(&r.send, MPI_STATUS_IGNORE);
    const std::uint32_t id = next_id++;
    if (held) {
      std::vector<Span> spans;
      std::vector<AttemptReport> ends;
      for (const AttemptedRollout& ar : *held) {
        add_episode_spans(ar, spans);
        AttemptReport report;
        report.rollout_id = ar.rollout.id;
        report.attempt_id = ar.attempt.id;
        report.update.status = AttemptStatus::succeeded;
        ends.push_back(report);
      }
      comm::wire::encode_into(r.request, comm::wire::Type::end_attempts, false, id, spans, ends);
    } else {
      comm::wire::encode_into(r.request, comm::wire::Type::dequeue, false, id, r.name, std::uint32_t(share));
    }
    r.ending = held != nullptr;
    runner_of[id] = k;
    r.sent = Steady::now();
    MPI_Isend(r.request.data(), static_cast<int>(r.request.size()), MPI_BYTE, 0,
              comm::StoreServer::request_tag(r.request.size()), MPI_COMM_WORLD, &r.send);
  };
  MPI_Barrier(MPI_COMM_WORLD);
  std::size_t in_flight = 0;
  std::string reply;
  std::vector<AttemptedRollout> held;
  AttemptsEnded ended;
  comm::IdleBackoff backoff(comm::IdleBackoff::Awaiting::reply);
  while (!ready.empty() || in_flight > 0) {
    while (!ready.empty() && in_flight < static_cast<std::size_t>(in_flight_most)) {
      send(ready.front(), nullptr);
      ready.pop_front();
      ++in_flight;
    }
    if (!comm::try_receive(MPI_COMM_WORLD, 0, comm::tag_store_reply, reply)) {
      backoff.idle();
      continue;
    }
    backoff.reset();
    const comm::wire::Header h = comm::wire::decode_header(reply);
    const auto found = runner_of.find(h.request_id);
    const int k = found == runner_of.end() ? -1 : found->second;
    const auto expected = k >= 0 && logical[k].ending ? comm::wire::Type::end_attempts : comm::wire::Type::dequeue;
    if (k < 0 || h.type != expected || !h.reply) {
      std::string why;
      if (h.type == comm::wire::Type::error) {
        ByteReader error(comm::wire::body_of(reply));
        error.u32();  // the code
        why = std::string(error.bytes());
      }
      std::fprintf(stderr, "bench_scale: rank %d got an unexpected reply to request %u %s\n", rank, h.request_id,
                   why.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    runner_of.erase(found);
    LogicalRunner& r = logical[k];
    latencies.push_back(std::chrono::duration<double>(Steady::now() - r.sent).count());
    ByteReader in(comm::wire::body_of(reply));
    if (!r.ending) {
      comm::wire::get(in, held);
      send(k, &held);  // its episodes ran: their spans and ends
    } else {
      comm::wire::get(in, ended);
      --in_flight;
      if (--r.steps_left > 0) ready.push_back(k);
    }
  }
  for (LogicalRunner& r : logical)
    if (r.send != MPI_REQUEST_NULL) MPI_Wait(&r.send, MPI_STATUS_IGNORE);
  const std::string bye = comm::wire::encode(comm::wire::Type::bye, false, 0);
  MPI_Send(bye.data(), static_cast<int>(bye.size()), MPI_BYTE, 0, comm::tag_store_request, MPI_COMM_WORLD);
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int runners = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const int per_step = argc > 3 ? std::atoi(argv[3]) : 8192;
  const double step_seconds = argc > 4 ? std::atof(argv[4]) : 0.3;
  const int in_flight = argc > 5 ? std::atoi(argv[5]) : 4;
  const int clients = size - 1;
  if (clients < 1 || runners < clients || per_step % runners != 0 || steps < 1 || in_flight < 1) {
    if (rank == 0)
      std::fprintf(stderr,
                   "bench_scale: need a client rank, a runner per client, rollouts per step divisible by runners, a "
                   "step and a request in flight\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int share = per_step / runners;  // rollouts per logical runner per step
  std::vector<double> latencies;         // a client's, in seconds
  double elapsed = 0, rank0_cpu = 0;     // rank 0's wall and CPU seconds serving
  double rank0_waiting = 0;              // the CPU seconds of its serving thread spent waiting
  long rss_before = 0, rss_after = 0;
  bool checks_pass = true;
  std::string why;
  if (rank == 0) {
    SystemClock clock;
    RolloutConfig rc;
    rc.timeout_seconds = 1800;
    rc.unresponsive_seconds = 120;
    MemoryStore store(clock, rc);
    Watchdog watchdog(store, watchdog_interval(rc));
    // Memory from before the rollouts exist: each one's record counts (allocator pages freed by the enqueue's
    // temporaries are kept and reused, so a reading after it would leave them out).
    rss_before = rss_kib();
    NewRollout task;
    task.input = "123456789+987654321";
    std::vector<NewRollout> all(static_cast<std::size_t>(steps) * per_step, task);
    store.enqueue(std::move(all));  // the coordinator's part, not timed
    comm::StoreServer server(MPI_COMM_WORLD, store);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Steady::now();
    const double cpu0 = cpu_seconds();
    // serve_until_all_done, with the CPU time of each wait taken apart: what rank 0 spends
    // waiting here (yielding the core to the clients, waking up) a saturated rank 0 never does.
    comm::IdleBackoff backoff(comm::IdleBackoff::Awaiting::next_message);
    while (server.clients_done() < size - 1) {
      if (server.poll() > 0) {
        backoff.reset();
      } else {
        const double before = thread_cpu_seconds();
        backoff.idle();
        rank0_waiting += thread_cpu_seconds() - before;
      }
    }
    elapsed = std::chrono::duration<double>(Steady::now() - t0).count();
    rank0_cpu = cpu_seconds() - cpu0;
    rss_after = rss_kib();
    const Statistics stats = store.statistics();
    const std::uint64_t expected = static_cast<std::uint64_t>(steps) * per_step;
    if (stats.rollouts[int(RolloutStatus::succeeded)] != expected)
      checks_pass = false, why += "succeeded " + std::to_string(stats.rollouts[int(RolloutStatus::succeeded)]) +
                                  " of " + std::to_string(expected) + "; ";
    if (stats.attempts[int(AttemptStatus::succeeded)] != expected)
      checks_pass = false, why += "attempts " + std::to_string(stats.attempts[int(AttemptStatus::succeeded)]) + "; ";
    if (stats.spans != expected * spans_per_episode)
      checks_pass = false, why += "spans " + std::to_string(stats.spans) + "; ";
    if (stats.workers != static_cast<std::uint64_t>(runners))
      checks_pass = false, why += "workers seen " + std::to_string(stats.workers) + "; ";
  } else {
    run_logical_runners(rank, runners, clients, steps, share, in_flight, latencies);
  }  // the clients' byes end the server's loop
  // The clients' latencies, to rank 0.
  int count = static_cast<int>(latencies.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<double> all;
  if (rank == 0) {
    for (int r = 1; r < size; ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
    all.resize(static_cast<std::size_t>(offsets[size - 1] + counts[size - 1]));
  }
  MPI_Gatherv(latencies.data(), count, MPI_DOUBLE, all.data(), counts.data(), offsets.data(), MPI_DOUBLE, 0,
              MPI_COMM_WORLD);
  if (rank == 0) {
    const double rollouts = double(steps) * per_step;
    const double rollouts_per_s = rollouts / elapsed, spans_per_s = rollouts * spans_per_episode / elapsed;
    const double demand = per_step / step_seconds;
    const double p50 = percentile(all, 0.50) * 1e3, p99 = percentile(all, 0.99) * 1e3;
    const double bytes_per_rollout = double(rss_after - rss_before) * 1024.0 / rollouts;
    // On a cluster rank 0 has a core of its own; here four ranks share two. What a second of
    // rank 0's CPU serves, less the CPU it spent waiting (which a saturated rank 0 does not do;
    // its polls that find nothing still count), is its capacity there.
    const double serving = rank0_cpu - rank0_waiting, per_cpu_second = rollouts / serving;
    std::printf(
        "%d logical runners on %d ranks (%d requests in flight on each), %d steps of %d rollouts: %.0f rollouts/s, "
        "%.0f spans/s, "
        "request latency p50 %.3f ms p99 %.3f ms; rank 0 grew %.0f bytes per rollout (it keeps every span); "
        "demand %.0f rollouts/s (a step of %.2f s): capacity/demand %.2f; rank 0 used %.2f s of CPU in %.2f s, "
        "%.2f s of it waiting: %.0f rollouts per CPU second serving, %.2f times the demand on a core of its own "
        "(%.2f counting the waits); checks %s%s\n",
        runners, clients, in_flight, steps, per_step, rollouts_per_s, spans_per_s, p50, p99, bytes_per_rollout, demand,
        step_seconds, rollouts_per_s / demand, rank0_cpu, elapsed, rank0_waiting, per_cpu_second,
        per_cpu_second / demand, rollouts / rank0_cpu / demand, checks_pass ? "passed" : "FAILED: ", why.c_str());
    std::printf(
        "{\"runners\": %d, \"client_ranks\": %d, \"in_flight_per_client_rank\": %d, \"rollouts_per_s\": %.0f, "
        "\"spans_per_s\": %.0f, "
        "\"latency_p50_ms\": %.3f, \"latency_p99_ms\": %.3f, \"rank0_bytes_per_rollout\": %.0f, "
        "\"demand_rollouts_per_s\": %.0f, \"capacity_over_demand\": %.3f, \"rank0_cpu_seconds\": %.3f, "
        "\"rank0_waiting_cpu_seconds\": %.3f, \"rollouts_per_serving_cpu_second\": %.0f, "
        "\"own_core_less_waits_over_demand\": %.3f, \"own_core_capacity_over_demand\": %.3f, \"checks_pass\": %s}\n",
        runners, clients, in_flight, rollouts_per_s, spans_per_s, p50, p99, bytes_per_rollout, demand,
        rollouts_per_s / demand, rank0_cpu, rank0_waiting, per_cpu_second, per_cpu_second / demand,
        rollouts / rank0_cpu / demand, checks_pass ? "true" : "false");
  }
  MPI_Finalize();
  return checks_pass ? 0 : 1;
}
