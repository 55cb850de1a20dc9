// The store over MPI against raw MPI ping-pong, in one run (mpirun -np N+1).
// Each client runs the mix (enqueue, dequeue, 10 add_span of 8 x 64-character attributes,
// succeeded) as one request per operation; rank 0 serves. The baseline is the same
// clients doing blocking 64-byte ping-pongs with rank 0. Each operation's own rate comes
// from the time the clients spent in it (for bench/agl.sh's comparison with HTTP).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "arclight/comm/store_service.hpp"
#include "arclight/store/memory_store.hpp"

using namespace arclight;
using namespace arclight::store;

namespace {
constexpr int tag_ping = 7;

enum Op { op_enqueue, op_dequeue, op_add_span, op_update_attempt, op_count };
constexpr const char* op_names[op_count] = {"enqueue", "dequeue", "add_span", "update_attempt"};
constexpr int op_per_rollout[op_count] = {1, 1, 10, 1};

Span make_span(const AttemptedRollout& ar, int i) {
  Span s;
  s.rollout_id = ar.rollout.id;
  s.attempt_id = ar.attempt.id;
  s.name = "llm.generate";
  for (int k = 0; k < 8; ++k)
    s.attributes.push_back({"attr" + std::to_string(k), std::string(64, char('a' + (i + k) % 26))});
  return s;
}

// Round trips per second that rank 0 sees, all clients together.
double raw_ping_pong(MPI_Comm comm, int rank, int size, int iterations) {
  char buf[64] = {0};
  MPI_Barrier(comm);
  double start = MPI_Wtime();
  if (rank == 0) {
    for (long i = 0; i < long(iterations) * (size - 1); ++i) {
      MPI_Status st;
      MPI_Recv(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE, tag_ping, comm, &st);
      MPI_Send(buf, sizeof buf, MPI_BYTE, st.MPI_SOURCE, tag_ping, comm);
    }
  } else {
    for (int i = 0; i < iterations; ++i) {
      MPI_Send(buf, sizeof buf, MPI_BYTE, 0, tag_ping, comm);
      MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, tag_ping, comm, MPI_STATUS_IGNORE);
    }
  }
  MPI_Barrier(comm);
  return double(iterations) * (size - 1) / (MPI_Wtime() - start);
}

// The mix's ops/s, all clients together; `op_per_s` gets each operation's.
double store_ops(MPI_Comm comm, int rank, int size, int rollouts, double (&op_per_s)[op_count]) {
  const int ops_per_rollout = 13;
  double start = 0, elapsed = 0;
  double op_seconds[op_count] = {};  // a client's time in each operation
  if (rank == 0) {
    SystemClock clock;
    MemoryStore store(clock);
    comm::StoreServer server(comm, store);
    MPI_Barrier(comm);
    start = MPI_Wtime();
    server.serve_until_all_done();
    elapsed = MPI_Wtime() - start;
  } else {
    comm::RemoteStore client(comm, 0);
    const std::string me = "bench-" + std::to_string(rank);
    AttemptUpdate done;
    done.status = AttemptStatus::succeeded;
    NewRollout task;
    task.input = "task";
    // Spans are built before the clock starts, as in the in-process benchmark.
    std::vector<Span> spans;
    for (int i = 0; i < 10; ++i) spans.push_back(make_span(AttemptedRollout{}, i));
    MPI_Barrier(comm);
    double last = MPI_Wtime();
    auto lap = [&](Op op) {
      const double now = MPI_Wtime();
      op_seconds[op] += now - last;
      last = now;
    };
    for (int r = 0; r < rollouts; ++r) {
      client.enqueue(task);
      lap(op_enqueue);
      AttemptedRollout ar = *client.dequeue(me);
      lap(op_dequeue);
      for (Span& s : spans) {
        s.rollout_id = ar.rollout.id;
        s.attempt_id = ar.attempt.id;
        client.add_span(s);
      }
      lap(op_add_span);
      client.update_attempt(ar.rollout.id, ar.attempt.id, done);
      lap(op_update_attempt);
    }
  }  // the client's bye ends the server's loop
  MPI_Bcast(&elapsed, 1, MPI_DOUBLE, 0, comm);
  // The clients run at once: all together they do clients x count of an operation in a client's mean time in it.
  double total_seconds[op_count] = {};
  MPI_Reduce(op_seconds, total_seconds, op_count, MPI_DOUBLE, MPI_SUM, 0, comm);
  const double clients = size - 1;
  for (int op = 0; op < op_count; ++op)
    op_per_s[op] = clients * rollouts * op_per_rollout[op] / (total_seconds[op] / clients);
  return double(rollouts) * ops_per_rollout * (size - 1) / elapsed;
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rollouts = argc > 1 ? std::atoi(argv[1]) : 2000;
  raw_ping_pong(MPI_COMM_WORLD, rank, size, 2000);  // warm-up
  double raw = raw_ping_pong(MPI_COMM_WORLD, rank, size, rollouts * 13);
  double op_per_s[op_count] = {};
  double ours = store_ops(MPI_COMM_WORLD, rank, size, rollouts, op_per_s);
  if (rank == 0) {
    std::printf("over MPI, %d client(s): store %.0f ops/s, raw ping-pong %.0f round trips/s, ratio %.3f\n", size - 1,
                ours, raw, ours / raw);
    std::string per_op, per_op_json;
    for (int op = 0; op < op_count; ++op) {
      per_op += std::string(op ? ", " : "") + op_names[op] + " " + std::to_string(long(op_per_s[op]));
      per_op_json += std::string(", \"") + op_names[op] + "_per_s\": " + std::to_string(long(op_per_s[op]));
    }
    std::printf("over MPI, %d client(s), each operation's ops/s: %s\n", size - 1, per_op.c_str());
    std::printf("{\"clients\": %d, \"mpi_ops_per_s\": %.0f, \"raw_pingpong_per_s\": %.0f, \"ratio\": %.3f%s}\n",
                size - 1, ours, raw, ours / raw, per_op_json.c_str());
  }
  MPI_Finalize();
  return 0;
}
