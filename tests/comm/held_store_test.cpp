// A held store (rank 0 restoring a version): requests wait longer than their client's timeout and are answered,
// in the order they came, once the server releases them. Run with mpirun -np 2: rank 0 serves, rank 1 asks.
#include "../mpi_test_main.hpp"

#include <chrono>
#include <thread>

#include "../store/store_suite.hpp"
#include "arclight/comm/store_service.hpp"
#include "arclight/store/memory_store.hpp"

using namespace arclight;
using namespace arclight::store;

namespace {
constexpr double client_timeout = 2.0, held_for = 4.5;
using Steady = std::chrono::steady_clock;
double seconds_since(Steady::time_point t) { return std::chrono::duration<double>(Steady::now() - t).count(); }
MPI_Comm test_comm = MPI_COMM_NULL;
}  // namespace

BOOST_AUTO_TEST_SUITE(held_store)

BOOST_AUTO_TEST_CASE(held_requests_outlive_the_timeout_and_are_answered_in_order) {
  comm::RemoteStore client(test_comm, 0, client_timeout);
  const auto start = Steady::now();
  Rollout first = client.enqueue(suite::task("first"));  // held: answered after the release
  const double waited = seconds_since(start);
  BOOST_TEST(waited > client_timeout, "answered after " << waited << " s: the server never held it");
  BOOST_TEST(waited < held_for + 10.0);
  Rollout second = client.enqueue(suite::task("second"));
  BOOST_TEST(second.id > first.id);
  BOOST_TEST(client.statistics().queue_length == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

struct TestComm {
  TestComm() { MPI_Comm_dup(MPI_COMM_WORLD, &test_comm); }  // collective with rank 0's in serve()
  ~TestComm() { MPI_Comm_free(&test_comm); }
};
BOOST_TEST_GLOBAL_FIXTURE(TestComm);

int serve() {
  MPI_Comm_dup(MPI_COMM_WORLD, &test_comm);
  SystemClock clock;
  MemoryStore store(clock, suite::retrying_config());
  {
    comm::StoreServer server(test_comm, store);
    server.hold();
    const auto start = Steady::now();
    while (seconds_since(start) < held_for) {
      server.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    server.release();
    server.serve_until_all_done();
  }
  MPI_Comm_free(&test_comm);
  return 0;
}

int main(int argc, char** argv) {
  int rank = 0, size = 0;
  return mpi_test_main(argc, argv, rank, size, serve);
}
