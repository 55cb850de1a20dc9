#include "arclight/store/span_batcher.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include "arclight/core/error.hpp"
#include "arclight/store/memory_store.hpp"
#include "store_suite.hpp"

using namespace arclight;
using namespace arclight::store;

namespace {
struct Fixture {
  ManualClock clock;
  MemoryStore store{clock};
  AttemptedRollout ar;
  Fixture() {
    store.enqueue(suite::task("x"));
    ar = *store.dequeue("w1");
  }
  std::size_t stored() {
    SpanFilter f;
    f.rollout_id = ar.rollout.id;
    return store.query_spans(f, {}).total;
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(span_batcher, Fixture)

BOOST_AUTO_TEST_CASE(a_full_batch_goes_at_once_from_the_batchers_thread) {
  SpanBatcher batcher(store, 3, 60.0);
  batcher.add(suite::span_of(ar));
  batcher.add(suite::span_of(ar));
  BOOST_TEST(stored() == 0u);
  batcher.add(suite::span_of(ar));  // full: sent now, not after the 60 s delay
  // The batch is counted after the store took it: waiting for the count, not for the spans, leaves no window
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (batcher.batches_sent() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  BOOST_TEST(batcher.batches_sent() == 1u);
  BOOST_TEST(stored() == 3u);
}

BOOST_AUTO_TEST_CASE(an_old_batch_goes_by_time) {
  SpanBatcher batcher(store, 1000, 0.05);
  batcher.add(suite::span_of(ar));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (stored() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  BOOST_TEST(stored() == 1u);
  // The batch was the attempt's heartbeat: it is running now.
  BOOST_TEST((store.get_latest_attempt(ar.rollout.id).status == AttemptStatus::running));
}

BOOST_AUTO_TEST_CASE(flush_and_destruction_send_the_rest_in_order) {
  {
    SpanBatcher batcher(store, 1000, 60.0);
    for (int i = 0; i < 5; ++i) batcher.add(suite::span_of(ar, "s" + std::to_string(i)));
    batcher.flush();
    BOOST_TEST(stored() == 5u);
    batcher.add(suite::span_of(ar, "last"));
  }
  SpanFilter f;
  f.rollout_id = ar.rollout.id;
  auto spans = store.query_spans(f, {}).items;
  BOOST_REQUIRE(spans.size() == 6u);
  BOOST_TEST(spans[0].name == "s0");
  BOOST_TEST(spans[4].name == "s4");
  BOOST_TEST(spans[5].name == "last");
}

BOOST_AUTO_TEST_CASE(ending_attempts_takes_the_buffered_spans_along_first) {
  SpanBatcher batcher(store, 1000, 60.0);
  batcher.add(suite::span_of(ar, "call"));
  batcher.add(suite::span_of(ar, "reward"));
  const std::vector<ReportOutcome> outcomes =
      batcher.end_attempts({{ar.rollout.id, ar.attempt.id, suite::status_update(AttemptStatus::succeeded)}});
  BOOST_REQUIRE(outcomes.size() == 1u);
  BOOST_REQUIRE(outcomes[0].attempt.has_value());
  BOOST_TEST((outcomes[0].attempt->status == AttemptStatus::succeeded));
  BOOST_TEST(stored() == 2u);  // not refused for the end that came with them
  BOOST_TEST(batcher.spans_refused() == 0u);
  BOOST_TEST(batcher.batches_sent() == 1u);
  // Nothing buffered: the ends go alone, and no batch is counted.
  const auto alone = batcher.end_attempts({{ar.rollout.id + 1, 1, suite::status_update(AttemptStatus::failed)}});
  BOOST_REQUIRE(alone.size() == 1u);
  BOOST_TEST(!alone[0].attempt.has_value());
  BOOST_TEST(batcher.batches_sent() == 1u);
}

// A store that fails (here: from its second batch on), as a store on rank 0 that did not answer in time.
struct FailingStore : MemoryStore {
  using MemoryStore::MemoryStore;
  std::atomic<int> batches{0};
  std::vector<std::uint64_t> add_spans(std::vector<Span> spans) override {
    if (++batches > 1) throw Error("the store on rank 0 did not reply within 1 s");
    return MemoryStore::add_spans(std::move(spans));
  }
};

// An error of a batch the batcher's thread sent ended the process (std::terminate: an abort and a core, not the
// error's message and exit code); now the runner's next call throws it.
BOOST_AUTO_TEST_CASE(a_store_error_on_the_batchers_thread_reaches_the_runner) {
  FailingStore failing(clock);
  failing.enqueue(suite::task("y"));
  const AttemptedRollout running = *failing.dequeue("w2");
  SpanBatcher batcher(failing, 1000, 0.01);
  batcher.add(suite::span_of(running));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (failing.batches < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  batcher.add(suite::span_of(running));  // its batch fails on the thread
  while (failing.batches < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  bool failed = false;  // from the throw to its catch on the batcher's thread
  while (!failed && std::chrono::steady_clock::now() < deadline) {
    try {
      batcher.flush();  // nothing buffered: it only says whether a batch failed
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } catch (const Error&) {
      failed = true;
    }
  }
  BOOST_REQUIRE(failed);
  BOOST_CHECK_EXCEPTION(batcher.add(suite::span_of(running)), Error, [](const Error& e) {
    return std::string(e.what()).find("did not reply") != std::string::npos;
  });
  BOOST_CHECK_THROW(batcher.flush(), Error);
  BOOST_CHECK_THROW(batcher.end_attempts({}), Error);
}

BOOST_AUTO_TEST_CASE(refused_spans_are_counted) {
  SpanBatcher batcher(store, 1000, 60.0);
  store.cancel(ar.rollout.id);
  batcher.add(suite::span_of(ar));
  batcher.flush();
  BOOST_TEST(batcher.spans_refused() == 1u);
}

BOOST_AUTO_TEST_CASE(concurrent_adders_lose_nothing) {
  SpanBatcher batcher(store, 7, 0.001);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) batcher.add(suite::span_of(ar));
    });
  for (auto& t : threads) t.join();
  batcher.flush();
  BOOST_TEST(stored() == 1000u);
}

BOOST_AUTO_TEST_SUITE_END()
