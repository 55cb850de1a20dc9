// A runner that freezes in the middle of sending a large request (a node that hangs, a process stopped) must not
// hold up rank 0's store for the others (mpirun -np 3): rank 1 starts a request (512 KiB, then 2 MiB: past the
// receives posted ahead) and then makes no MPI call for 3 s, so its last fragments wait for it; rank 2 asks the store
// meanwhile and must be answered at once.
// Open MPI's shared-memory transport is told to copy through its buffers (as between nodes, where the sender sends
// every fragment), not to read the sender's memory itself.
#include "../mpi_test_main.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "arclight/comm/protocol.hpp"
#include "arclight/comm/store_service.hpp"
#include "arclight/store/memory_store.hpp"

using namespace arclight;
using namespace arclight::store;
namespace wire = arclight::comm::wire;

namespace {
int rank_ = 0, size_ = 0;

// The store's answer to rank 1, or "" when none came within 20 s.
std::string receive_reply(MPI_Comm comm) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int arrived = 0; !arrived;) {
    MPI_Status status;
    MPI_Iprobe(0, comm::tag_store_reply, comm, &arrived, &status);
    if (arrived) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      std::string reply(static_cast<std::size_t>(count), '\0');
      MPI_Recv(reply.data(), count, MPI_BYTE, 0, comm::tag_store_reply, comm, MPI_STATUS_IGNORE);
      return reply;
    }
    if (std::chrono::steady_clock::now() > deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return "";
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_request_still_arriving_holds_up_no_other) {
  BOOST_REQUIRE_MESSAGE(size_ == 3, "the test needs exactly 3 ranks, not " << size_);
  // Into the receives posted ahead, and one past them (on the large requests' tag)
  const std::vector<std::size_t> sizes{std::size_t(512) << 10, comm::StoreServer::posted_request_bytes * 2};
  MPI_Comm comm, clients;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_split(MPI_COMM_WORLD, rank_ == 0 ? MPI_UNDEFINED : 1, rank_, &clients);
  if (rank_ == 0) {
    SystemClock clock;
    MemoryStore store(clock);
    comm::StoreServer server(comm, store);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    server.serve_until_all_done([&] { return std::chrono::steady_clock::now() > deadline; });
    BOOST_TEST(server.clients_done() == 2);
    BOOST_TEST(store.statistics().queue_length == sizes.size());  // rank 1's, whole
  } else if (rank_ == 1) {
    for (std::size_t size : sizes) {
      MPI_Barrier(clients);
      NewRollout big;
      big.input = std::string(size, 'x');
      const std::string request = wire::encode(wire::Type::enqueue, false, 1, std::vector<NewRollout>{big});
      MPI_Request sent;
      MPI_Isend(request.data(), static_cast<int>(request.size()), MPI_BYTE, 0,
                comm::StoreServer::request_tag(request.size()), comm, &sent);
      std::this_thread::sleep_for(std::chrono::seconds(3));  // frozen: no MPI call, no progress on its send
      MPI_Wait(&sent, MPI_STATUS_IGNORE);
      const std::string reply = receive_reply(comm);
      BOOST_TEST(!reply.empty(), "no answer to a request of " << size << " bytes within 20 s");
      if (!reply.empty()) BOOST_TEST(wire::decode_header(reply).request_id == 1u);
    }
    const std::string bye = wire::encode(wire::Type::bye, false, 0);
    MPI_Send(bye.data(), static_cast<int>(bye.size()), MPI_BYTE, 0, comm::tag_store_request, comm);
  } else {
    comm::RemoteStore client(comm, 0, 2.0);  // rank 1 sends on only after 3 s
    for (std::size_t size : sizes) {
      MPI_Barrier(clients);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1's request is on its way by now
      const auto start = std::chrono::steady_clock::now();
      BOOST_CHECK_NO_THROW(client.statistics());
      BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 2.0,
                 "behind a request of " << size << " bytes");
    }
    // A second client of this rank says bye too, while rank 1 still waits for its answer: a rank counts once (two
    // byes of one rank ended the serving, and rank 1's answer never came).
    { comm::RemoteStore second(comm, 0, 2.0); }
  }
  if (clients != MPI_COMM_NULL) MPI_Comm_free(&clients);
  MPI_Barrier(comm);
  MPI_Comm_free(&comm);
}

// The other way round: rank 0 frozen (no MPI call for 6 s) while a client sends a request above MPI's eager limit (an
// attempt's spans). The send waits for rank 0 to take part; comm.store_timeout_seconds bounds it as it bounds the
// reply (the send blocked until rank 0 woke, and rank 0's pulses went on from a thread of their own).
BOOST_AUTO_TEST_CASE(a_request_rank_0_does_not_take_gives_up_at_the_store_timeout) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const std::string big(std::size_t(3) << 20, 'x');
  if (rank_ == 0) {
    std::this_thread::sleep_for(std::chrono::seconds(6));
    MPI_Message message;
    MPI_Status status;
    MPI_Mprobe(1, MPI_ANY_TAG, comm, &message, &status);  // the request, taken at last (no answer)
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    std::string request(static_cast<std::size_t>(count), '\0');
    MPI_Mrecv(request.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
    BOOST_TEST(request.size() > big.size());
  } else if (rank_ == 1) {
    comm::RemoteStore client(comm, 0, 1.0);
    const auto start = std::chrono::steady_clock::now();
    try {
      client.add_resources("weights", big);
      BOOST_ERROR("no timeout");
    } catch (const Error& e) {
      BOOST_TEST(e.exit_code() == exit_requeue);
      BOOST_TEST(std::string(e.what()).find("did not reply within 1 s") != std::string::npos, e.what());
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    BOOST_TEST(waited < 4.5, "gave up after " << waited << " s, rank 0 frozen for 6 s, the timeout 1 s");
    BOOST_CHECK_THROW(client.statistics(), Error);  // the stalled request is still MPI's: nothing more is sent
  }
  MPI_Barrier(comm);
  MPI_Comm_free(&comm);
}

int main(int argc, char** argv) {
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);  // before MPI_Init reads it
  return mpi_test_main(argc, argv, rank_, size_);
}
