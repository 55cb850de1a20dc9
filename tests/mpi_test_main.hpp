#pragma once
// The main of every Boost.Test program run under mpirun. Every rank runs every case (they are
// collective), unless the program has rank 0 serve instead: then rank 0 runs `rank0_serves`
// (a server that the other ranks' cases talk to, returning once they are done) and rank 1
// reports. The reporting rank names the cases and why any was skipped; the exit code is the
// worst rank's. MPI starts with MPI_THREAD_MULTIPLE: cases may use MPI from several threads.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <mpi.h>

#include <boost/test/unit_test.hpp>

#include <functional>
#include <string>
#include <vector>

inline bool init_unit_test() { return true; }

inline int mpi_test_main(int argc, char** argv, int& rank, int& size, const std::function<int()>& rank0_serves = {}) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  if (rank == 0 && rank0_serves) {
    rc = rank0_serves();
  } else {
    std::vector<char*> args(argv, argv + argc);
    // One rank reports, with the counts of cases passed and skipped (scripts/gpu_check.sh reads them).
    // The others print their errors only: a failure on one of them (NCCL's set-up on a runner) said nothing, and the
    // ranks waiting for it hung until the test's time limit.
    std::string quiet_log = "--log_level=error", quiet_report = "--report_level=no", suites = "--log_level=test_suite",
                counts = "--report_level=short";
    if (rank != (rank0_serves ? 1 : 0)) {
      args.push_back(quiet_log.data());
      args.push_back(quiet_report.data());
    } else {
      args.push_back(suites.data());
      args.push_back(counts.data());
    }
    rc = boost::unit_test::unit_test_main(init_unit_test, static_cast<int>(args.size()), args.data());
  }
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
