#pragma once
// The main of a Boost.Test program run under mpirun: every rank runs every case (they are
// collective); rank 0 reports, naming the cases and why any was skipped; the exit code is
// the worst rank's.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <mpi.h>

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

inline bool init_unit_test() { return true; }

inline int mpi_test_main(int argc, char** argv, int& rank, int& size) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char*> args(argv, argv + argc);
  std::string quiet_log = "--log_level=nothing", quiet_report = "--report_level=no", suites = "--log_level=test_suite";
  if (rank != 0) {
    args.push_back(quiet_log.data());
    args.push_back(quiet_report.data());
  } else {
    args.push_back(suites.data());
  }
  int rc = boost::unit_test::unit_test_main(init_unit_test, static_cast<int>(args.size()), args.data());
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
