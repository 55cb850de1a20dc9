// The store over MPI against raw MPI ping-pong, in one run (mpirun -np N+1).
// Each client runs the mix (enqueue, dequeue, 10 add_span of 8 x 64-character attributes,
// succeeded) as one request per operation; rank 0 serves. The baseline is the same
// clients doing blocking 64-byte ping-pongs with rank 0.
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

double store_ops(MPI_Comm comm, int rank, int size, int rollouts) {
  const int ops_per_rollout = 13;
  double start = 0, elapsed = 0;
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
    for (int r = 0; r < rollouts; ++r) {
      client.enqueue(task);
      AttemptedRollout ar = *client.dequeue(me);
      for (Span& s : spans) {
        s.rollout_id = ar.rollout.id;
        s.attempt_id = ar.attempt.id;
        client.add_span(s);
      }
      client.update_attempt(ar.rollout.id, ar.attempt.id, done);
    }
  }  // the client's bye ends the server's loop
  MPI_Bcast(&elapsed, 1, MPI_DOUBLE, 0, comm);
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
  double ours = store_ops(MPI_COMM_WORLD, rank, size, rollouts);
  if (rank == 0) {
    std::printf("over MPI, %d client(s): store %.0f ops/s, raw ping-pong %.0f round trips/s, ratio %.3f\n", size - 1,
                ours, raw, ours / raw);
    std::printf("{\"clients\": %d, \"mpi_ops_per_s\": %.0f, \"raw_pingpong_per_s\": %.0f, \"ratio\": %.3f}\n", size - 1,
                ours, raw, ours / raw);
  }
  MPI_Finalize();
  return 0;
}
