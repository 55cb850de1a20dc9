// The store suite over MPI: rank 0 serves a MemoryStore (real clock, watchdog
// thread), rank 1 runs every case through a RemoteStore. Run with mpirun -np 2.
#include "../mpi_test_main.hpp"

#include <boost/test/data/test_case.hpp>

#include <cmath>
#include <memory>
#include <thread>

#include "../store/store_suite.hpp"
#include "arclight/comm/store_service.hpp"
#include "arclight/store/memory_store.hpp"

using namespace arclight;
using namespace arclight::store;
namespace wire = arclight::comm::wire;

namespace {
constexpr double watchdog_period = 0.02;
comm::RemoteStore* client = nullptr;

void sleep_for(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

class RemoteHarness : public suite::Harness {
 public:
  RemoteHarness() { client->reset(); }
  Store& store() override { return *client; }
  void advance(double seconds) override { sleep_for(seconds); }
  void scan() override { sleep_for(4 * watchdog_period); }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(remote_store)

BOOST_DATA_TEST_CASE(store_suite, boost::unit_test::data::xrange(suite::cases().size()), index) {
  auto [name, run] = suite::cases()[index];
  BOOST_TEST_CONTEXT(name) {
    RemoteHarness h;
    run(h);
  }
}

BOOST_AUTO_TEST_CASE(malformed_requests_get_error_replies_and_the_server_carries_on) {
  RemoteHarness h;
  std::string good = wire::encode(wire::Type::statistics, false, 77);
  std::string truncated = good.substr(0, 5);
  std::string bad_version = good;
  bad_version[2] = 9;
  std::string unknown_type = good;
  unknown_type[3] = 0x70;
  for (const std::string& bad : {truncated, bad_version, unknown_type, std::string("garbage!garbage!")}) {
    std::string reply = client->exchange_raw(bad, 10);
    wire::Header header = wire::decode_header(reply);
    BOOST_TEST((header.type == wire::Type::error));
  }
  // Still serving.
  client->enqueue(suite::task("after the garbage"));
  BOOST_TEST(client->statistics().queue_length == 1u);
}

BOOST_AUTO_TEST_CASE(a_parked_wait_does_not_block_other_requests) {
  RemoteHarness h;
  RolloutId id = client->enqueue(suite::task("x")).id;
  auto start = std::chrono::steady_clock::now();
  auto ended = client->wait_for_rollouts({id}, 0.3);  // nothing ends it: the server answers at the deadline
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST(ended.empty());
  BOOST_TEST(waited >= 0.25);
  BOOST_TEST(waited < 10.0);
}

// A timeout that is not a number is 0, as the local store reads it (a NaN deadline lay in the past: "did not reply").
BOOST_AUTO_TEST_CASE(a_wait_with_a_timeout_that_is_not_a_number_answers_at_once) {
  RemoteHarness h;
  const RolloutId id = client->enqueue(suite::task("x")).id;
  BOOST_TEST(client->wait_for_rollouts({id}, std::nan("")).empty());
  ManualClock clock;
  MemoryStore local(clock);
  BOOST_TEST(local.wait_for_rollouts({local.enqueue(suite::task("x")).id}, std::nan("")).empty());
}

// A caller that gave up waiting (a timeout, answered 500 by an HTTP thread) leaves the reply to come late: the next
// requests pass over it instead of failing, each of them, on the reply before their own. The timeout itself ends a
// rank's part with exit 3 (requeue), as a hung rank 0 does that its pulses name.
BOOST_AUTO_TEST_CASE(a_reply_that_came_after_its_request_gave_up_is_passed_over) {
  RemoteHarness h;
  const RolloutId id = client->enqueue(suite::task("x")).id;
  // The server parks this wait for 0.3 s; its caller gives up after 0.05 s.
  const std::string wait = wire::encode(wire::Type::wait_for_rollouts, false, 0, std::vector<RolloutId>{id}, 0.3);
  try {
    client->exchange_raw(wait, 0.05);
    BOOST_ERROR("no timeout");
  } catch (const Error& e) {
    BOOST_TEST(e.exit_code() == exit_requeue);
    BOOST_TEST(std::string(e.what()).find("rank 0 hangs") != std::string::npos, e.what());
  }
  sleep_for(0.5);  // its reply has come
  BOOST_TEST(client->statistics().queue_length == 1u);
  BOOST_TEST(client->statistics().queue_length == 1u);
}

BOOST_AUTO_TEST_CASE(requests_larger_than_the_posted_receives_come_on_their_own_tag) {
  RemoteHarness h;
  // Either side of the posted receives' size, and small ones between: each answered in turn.
  for (std::size_t size : {comm::StoreServer::posted_request_bytes - 64, comm::StoreServer::posted_request_bytes + 1,
                           std::size_t(3) << 20}) {
    std::string content(size, 'w');
    content[size / 2] = 'x';
    const ResourcesVersion added = client->add_resources("weights " + std::to_string(size), content);
    BOOST_TEST(client->statistics().queue_length == 0u);
    const ResourcesVersion back = client->get_resources(added.id);
    BOOST_TEST((back.content == content));
  }
  std::vector<Span> spans;
  const AttemptedRollout ar = client->start_rollout(suite::task("big batch"), "w");
  for (int i = 0; i < 4000; ++i) {
    Span s;
    s.rollout_id = ar.rollout.id;
    s.attempt_id = ar.attempt.id;
    s.name = "llm";
    s.attributes = {{"prompt_ids", TokenIds(std::vector<std::int32_t>(64, i))}};
    spans.push_back(std::move(s));
  }
  BOOST_TEST(client->add_spans(spans).size() == 4000u);
  SpanFilter f;
  f.rollout_id = ar.rollout.id;
  BOOST_TEST(client->query_spans(f, {}).items.size() == 4000u);
}

BOOST_AUTO_TEST_SUITE_END()

// The other ranks' client, for the whole program: it says bye to the server at the end.
struct Client {
  Client() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);  // collective with rank 0's in serve()
    client = new comm::RemoteStore(comm, 0, 30.0);
  }
  ~Client() {
    delete client;
    MPI_Comm_free(&comm);
  }
  MPI_Comm comm = MPI_COMM_NULL;
};
BOOST_TEST_GLOBAL_FIXTURE(Client);

int serve() {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  SystemClock clock;
  std::unique_ptr<MemoryStore> store;
  std::unique_ptr<Watchdog> watchdog;
  auto fresh = [&]() -> MemoryStore& {
    watchdog.reset();
    store = std::make_unique<MemoryStore>(clock, suite::retrying_config());
    watchdog = std::make_unique<Watchdog>(*store, watchdog_period);
    return *store;
  };
  {
    comm::StoreServer server(comm, fresh());
    server.allow_reset(fresh);
    server.serve_until_all_done();
  }
  watchdog.reset();
  MPI_Comm_free(&comm);
  return 0;
}

int main(int argc, char** argv) {
  int rank = 0, size = 0;
  return mpi_test_main(argc, argv, rank, size, serve);
}
