// How ranks wait (comm/waiting.hpp), under mpirun with the reducer tests (3 ranks).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <set>
#include <ctime>
#include <thread>
#include <vector>

#include <sched.h>

#include "arclight/comm/mpi_runtime.hpp"
#include "arclight/comm/waiting.hpp"

using namespace arclight::comm;

namespace {
constexpr int tag_test = 31;
int rank_of(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(waiting)

BOOST_AUTO_TEST_CASE(try_receive_takes_what_has_come_and_nothing_else) {
  const int rank = rank_of(MPI_COMM_WORLD);
  std::string bytes = "left over";
  if (rank == 0) BOOST_TEST(!try_receive(MPI_COMM_WORLD, MPI_ANY_SOURCE, tag_test, bytes));
  BOOST_TEST(bytes == "left over");  // untouched when nothing came
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) {
    const std::string mine = "from rank " + std::to_string(rank) + std::string(rank * 1000, 'x');
    MPI_Send(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, 0, tag_test, MPI_COMM_WORLD);
  } else {
    std::set<int> heard;
    IdleBackoff backoff(IdleBackoff::Awaiting::next_message);
    while (heard.size() < 2) {
      int from = -1;
      if (!try_receive(MPI_COMM_WORLD, MPI_ANY_SOURCE, tag_test, bytes, &from)) {
        backoff.idle();
        continue;
      }
      BOOST_TEST(bytes == "from rank " + std::to_string(from) + std::string(from * 1000, 'x'));
      heard.insert(from);
    }
    BOOST_TEST(!try_receive(MPI_COMM_WORLD, MPI_ANY_SOURCE, tag_test, bytes));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

BOOST_AUTO_TEST_CASE(a_long_wait_sleeps_and_still_completes) {
  // Rank 0 waits 0.6 s for rank 1's message: it must get it, having spent most of that time asleep.
  const int rank = rank_of(MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    int value = 42;
    MPI_Send(&value, sizeof value, MPI_BYTE, 0, tag_test, MPI_COMM_WORLD);
  } else if (rank == 0) {
    int value = 0;
    std::vector<MPI_Request> requests(1);
    MPI_Irecv(&value, sizeof value, MPI_BYTE, 1, tag_test, MPI_COMM_WORLD, &requests[0]);
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    wait_all(requests);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_seconds() - cpu0;
    BOOST_TEST(value == 42);
    BOOST_TEST(requests[0] == MPI_REQUEST_NULL);
    BOOST_TEST(wall > 0.3);
    BOOST_TEST(cpu < 0.5 * wall, "the waiting rank used " << cpu << " s of CPU in " << wall << " s");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A rank's compute threads share the CPUs the job's ranks on the node may run on, the union of their affinity masks
// (a launcher's binding, a Slurm share of the node), not the node's count.
BOOST_AUTO_TEST_CASE(the_nodes_cpus_are_the_union_of_the_ranks_affinities) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  cpu_set_t given;
  BOOST_REQUIRE(sched_getaffinity(0, sizeof given, &given) == 0);
  // The expected counts, from each rank's CPUs as flags (the launcher may have bound the ranks apart).
  const auto flags_of = [](const cpu_set_t& set) {
    std::vector<unsigned char> flags(CPU_SETSIZE);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) flags[static_cast<std::size_t>(cpu)] = CPU_ISSET(cpu, &set) ? 1 : 0;
    return flags;
  };
  const auto combined = [](std::vector<unsigned char> flags, MPI_Op op) {
    MPI_Allreduce(MPI_IN_PLACE, flags.data(), CPU_SETSIZE, MPI_UNSIGNED_CHAR, op, MPI_COMM_WORLD);
    return flags;
  };
  const auto count = [](const std::vector<unsigned char>& flags) {
    return static_cast<int>(std::count(flags.begin(), flags.end(), 1));
  };
  BOOST_TEST(cpus_of_ranks(MPI_COMM_WORLD) == count(combined(flags_of(given), MPI_BOR)));

  const auto bind = [](int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    BOOST_REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
    return one;
  };
  std::vector<int> mine;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &given)) mine.push_back(cpu);
  const std::vector<unsigned char> shared = combined(flags_of(given), MPI_BAND);
  const auto first_shared = std::find(shared.begin(), shared.end(), 1);
  if (first_shared != shared.end()) {  // every rank on one CPU they all may use
    bind(static_cast<int>(first_shared - shared.begin()));
    BOOST_TEST(cpus_of_ranks(MPI_COMM_WORLD) == 1);
  }
  // Each rank on one of its own CPUs: as many as the distinct CPUs chosen.
  const cpu_set_t chosen = bind(mine[static_cast<std::size_t>(rank) % mine.size()]);
  BOOST_TEST(cpus_of_ranks(MPI_COMM_WORLD) == count(combined(flags_of(chosen), MPI_BOR)));
  BOOST_REQUIRE(sched_setaffinity(0, sizeof given, &given) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
