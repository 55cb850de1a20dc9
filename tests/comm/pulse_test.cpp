// Signs of life (comm/pulse.hpp), under mpirun with the reducer tests (3 ranks): rank 1 pulses
// while its main thread is busy (asleep), rank 2 sends none, as a stopped process would.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <thread>

#include "arclight/comm/pulse.hpp"

using namespace arclight::comm;

namespace {
int rank_of(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(pulses)

BOOST_AUTO_TEST_CASE(rank_0_tells_a_silent_rank_from_a_busy_one) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int rank = rank_of(comm);
  {
    std::unique_ptr<PulseSender> pulse;
    if (rank == 1) pulse = std::make_unique<PulseSender>(comm, 0);
    if (rank == 0) {
      PulseWatch watch(comm);
      for (int i = 0; i < 35; ++i) {  // 3.5 s, looking every 0.1 s
        watch.take();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      watch.take();
      BOOST_TEST(watch.silent_seconds(1) < 2.0);
      BOOST_TEST(watch.silent_seconds(2) > 3.0);
      BOOST_TEST((watch.silent_for(2.0) == std::vector<int>{2}));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // busy: the pulse goes on regardless
    }
    MPI_Barrier(comm);
  }
  MPI_Barrier(comm);
  MPI_Comm_free(&comm);
}

BOOST_AUTO_TEST_CASE(time_rank_0_does_not_look_counts_against_nobody) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rank_of(comm) == 0) {
    PulseWatch watch(comm);  // nobody pulses at all
    watch.take();
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // rank 0 busy elsewhere (a long restore)
    watch.take();
    BOOST_TEST(watch.silent_for(2.0).empty());
    BOOST_TEST(watch.silent_seconds(2) < 1.5);
    for (int i = 0; i < 15; ++i) {  // watching again, 1.5 s: now the silence grows
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      watch.take();
    }
    BOOST_TEST(watch.silent_seconds(2) > 2.0);
  }
  MPI_Barrier(comm);
  MPI_Comm_free(&comm);
}

// A watcher stopped between a look and its check (the hardening test's SIGSTOP at start-up, continued once the job
// ends) blames nobody for the time it was stopped.
BOOST_AUTO_TEST_CASE(silence_counts_until_the_last_look) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rank_of(comm) == 0) {
    PulseWatch watch(comm);  // nobody pulses at all
    watch.take();
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    BOOST_TEST(watch.silent_seconds(2) < 1.0);
    BOOST_TEST(watch.silent_for(2.0).empty());
  }
  MPI_Barrier(comm);
  MPI_Comm_free(&comm);
}

BOOST_AUTO_TEST_SUITE_END()
