// Broadcasts and messages in chunks (MPI counts are ints), under mpirun with the reducer tests (3 ranks):
// small chunk sizes stand in for the 1 GiB ones.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
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

BOOST_AUTO_TEST_CASE(a_message_in_chunks_arrives_whole_at_every_rank) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<float> weights(1000, 0.f);
  const std::size_t bytes = weights.size() * sizeof(float);
  std::vector<MPI_Request> requests;
  if (rank == 0) {
    std::iota(weights.begin(), weights.end(), 0.5f);
    for (int to = 1; to < size; ++to)
      for (MPI_Request r : isend_large(weights.data(), bytes, to, 7, MPI_COMM_WORLD, 333)) requests.push_back(r);
    BOOST_TEST(requests.size() == 13u * static_cast<std::size_t>(size - 1));  // 4000 bytes in chunks of 333
  } else {
    requests = irecv_large(weights.data(), bytes, 0, 7, MPI_COMM_WORLD, 333);
    BOOST_TEST(requests.size() == 13u);
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  BOOST_TEST(weights[999] == 999.5f);
  BOOST_TEST(weights[1] == 1.5f);
  BOOST_TEST(weights[333 / sizeof(float) + 1] == 84.5f);  // across a chunk's edge
}

BOOST_AUTO_TEST_CASE(a_short_message_takes_the_first_chunks_place) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::int64_t mark = -1;
  if (rank == 0) {
    for (int to = 1; to < size; ++to) {
      std::vector<MPI_Request> sent = isend_large(&mark, sizeof mark, to, 8, MPI_COMM_WORLD, 333);
      BOOST_TEST(sent.size() == 1u);
      MPI_Waitall(1, sent.data(), MPI_STATUSES_IGNORE);
    }
    return;
  }
  std::vector<char> buffer(1000);
  std::vector<MPI_Request> requests = irecv_large(buffer.data(), buffer.size(), 0, 8, MPI_COMM_WORLD, 333);
  MPI_Status status;
  MPI_Wait(&requests[0], &status);
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  BOOST_TEST(count == 8);
  std::int64_t got = 0;
  std::memcpy(&got, buffer.data(), sizeof got);
  BOOST_TEST(got == -1);
  for (std::size_t i = 1; i < requests.size(); ++i) {  // the rest never come: cancelled
    MPI_Cancel(&requests[i]);
    MPI_Wait(&requests[i], &status);
    int cancelled = 0;
    MPI_Test_cancelled(&status, &cancelled);
    BOOST_TEST(cancelled == 1);
  }
}

BOOST_AUTO_TEST_SUITE_END()
