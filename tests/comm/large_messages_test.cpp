// Messages in chunks (MPI counts are ints), under mpirun with the reducer tests (3 ranks):
// small chunk sizes stand in for the 1 GiB ones.
#include <boost/test/unit_test.hpp>

#include <numeric>

#include "arclight/comm/large_messages.hpp"

using namespace arclight::comm;

BOOST_AUTO_TEST_SUITE(large_messages)

BOOST_AUTO_TEST_CASE(a_message_in_chunks_arrives_whole_and_in_order) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (std::size_t bytes : {std::size_t(0), std::size_t(7), std::size_t(100), std::size_t(1001)}) {
    std::vector<char> payload(bytes);
    std::iota(payload.begin(), payload.end(), char(bytes));
    if (rank == 0) {
      std::vector<MPI_Request> sends;
      for (int r = 1; r < size; ++r)
        for (MPI_Request q : isend_large(payload.data(), bytes, r, 77, MPI_COMM_WORLD, 7)) sends.push_back(q);
      BOOST_TEST(sends.size() == std::size_t(size - 1) * std::max<std::size_t>(1, (bytes + 6) / 7));
      MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE);
    } else {
      std::vector<char> got(bytes, 0);
      recv_large(got.data(), bytes, 0, 77, MPI_COMM_WORLD, 7);
      BOOST_TEST(got == payload);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_broadcast_in_chunks_arrives_whole) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<float> weights(1000, 0.f);
  if (rank == 0) std::iota(weights.begin(), weights.end(), 0.5f);
  std::vector<MPI_Request> requests = ibcast_large(weights.data(), weights.size() * sizeof(float), 0, MPI_COMM_WORLD, 333);
  BOOST_TEST(requests.size() == 13u);  // 4000 bytes in chunks of 333
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  BOOST_TEST(weights[999] == 999.5f);
  BOOST_TEST(weights[1] == 1.5f);
}

BOOST_AUTO_TEST_SUITE_END()
