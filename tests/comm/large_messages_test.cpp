// Broadcasts in chunks (MPI counts are ints), under mpirun with the reducer tests (3 ranks):
// small chunk sizes stand in for the 1 GiB ones.
#include <boost/test/unit_test.hpp>

#include <numeric>

#include "arclight/comm/large_messages.hpp"

using namespace arclight::comm;

BOOST_AUTO_TEST_SUITE(large_messages)

BOOST_AUTO_TEST_CASE(a_broadcast_in_chunks_arrives_whole) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<float> weights(1000, 0.f);
  if (rank == 0) std::iota(weights.begin(), weights.end(), 0.5f);
  std::vector<MPI_Request> requests =
      ibcast_large(weights.data(), weights.size() * sizeof(float), 0, MPI_COMM_WORLD, 333);
  BOOST_TEST(requests.size() == 13u);  // 4000 bytes in chunks of 333
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  BOOST_TEST(weights[999] == 999.5f);
  BOOST_TEST(weights[1] == 1.5f);
  // An empty one completes too.
  requests = ibcast_large(nullptr, 0, 0, MPI_COMM_WORLD, 333);
  BOOST_TEST(requests.size() == 1u);
  MPI_Waitall(1, requests.data(), MPI_STATUSES_IGNORE);
}

BOOST_AUTO_TEST_SUITE_END()
