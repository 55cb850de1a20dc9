// A runner's side of its agents' task interface (src/app/runner_backend.hpp) over a real MemoryStore: a dequeue holds
// what it takes for the asking process, and takes nothing, or gives back what it took, for a client that left.
#include "../../src/app/runner_backend.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "arclight/core/clock.hpp"
#include "arclight/store/memory_store.hpp"

using namespace arclight;

namespace {

struct Runner {
  SystemClock clock;
  store::MemoryStore store{clock, config()};
  store::SpanBatcher spans{store, 64, 0.01};
  app::AttemptBook book;
  std::atomic<std::uint64_t> version{0};
  app::RunnerBackend backend{store, spans, book, version, "runner-1-w"};

  static store::RolloutConfig config() {
    store::RolloutConfig c;
    c.max_attempts = 2;
    c.retry_condition = store::bit(store::AttemptStatus::failed);
    return c;
  }
  store::RolloutId enqueue() {
    store::NewRollout rollout;
    rollout.input = "{}";
    return store.enqueue(std::vector<store::NewRollout>{rollout}).at(0).id;
  }
  store::Attempt latest(store::RolloutId id) { return store.get_latest_attempt(id); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(runner_backend)

BOOST_AUTO_TEST_CASE(a_dequeue_holds_its_rollout_for_the_process_that_asked) {
  Runner r;
  const store::RolloutId id = r.enqueue();
  const auto got = r.backend.dequeue("Worker-0", "runner-1-w0", 1, 0, [] { return false; });
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(r.book.holds(id, got[0].attempt.id));
  // Its process ended after it took it: the attempt is that process's and fails.
  const auto released = r.book.release_worker("runner-1-w0", app::Stopwatch::now());
  BOOST_REQUIRE_EQUAL(released.size(), 1u);
  BOOST_TEST(released[0].second == got[0].attempt.id);
}

// An agent that takes three rollouts at once may play them in turn: each has three episodes' time (one clock for all
// started at hand-over timed the third out after one episode's time, and the worker was killed as hung).
BOOST_AUTO_TEST_CASE(rollouts_handed_over_together_have_as_many_episodes_time) {
  Runner r;
  for (int i = 0; i < 4; ++i) r.enqueue();
  const auto three = r.backend.dequeue("Worker-0", "runner-1-w0", 3, 0, [] { return false; });
  BOOST_REQUIRE_EQUAL(three.size(), 3u);
  const auto one = r.backend.dequeue("Worker-1", "runner-1-w1", 1, 0, [] { return false; });
  BOOST_REQUIRE_EQUAL(one.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const auto past_one_second = r.book.release_older_than(1.0);  // 1.2 s: past one episode's, not three's
  BOOST_REQUIRE_EQUAL(past_one_second.size(), 1u);
  BOOST_TEST(past_one_second[0].first.second == one[0].attempt.id);
  BOOST_TEST(r.book.release_older_than(0.3).size() == 3u);  // 1.2 s: past three of 0.3 s
}

BOOST_AUTO_TEST_CASE(a_client_gone_before_a_rollout_came_takes_nothing) {
  Runner r;
  const store::RolloutId id = r.enqueue();
  const auto got = r.backend.dequeue("Worker-0", "runner-1-w0", 1, 5, [] { return true; });
  BOOST_TEST(got.empty());
  // Still queued, no attempt made: the next agent gets it.
  const auto next = r.backend.dequeue("Worker-0", "runner-1-w1", 1, 0, [] { return false; });
  BOOST_REQUIRE_EQUAL(next.size(), 1u);
  BOOST_TEST(next[0].rollout.id == id);
  BOOST_TEST(next[0].attempt.sequence_id == 1u);
}

// The client left while its rollout was taken and waited for its policy version (its process died, or it gave up
// the long poll): the attempt fails at once, and the rollout's retry makes a new one, instead of waiting for the
// episode's timeout held for a process that is no more (whose restart, with the same worker id, was killed for it).
BOOST_AUTO_TEST_CASE(a_client_gone_while_its_rollout_came_fails_that_attempt_at_once) {
  Runner r;
  const store::RolloutId id = r.enqueue();
  int asked = 0;
  const auto got = r.backend.dequeue("Worker-0", "runner-1-w0", 1, 5, [&] { return ++asked > 1; });
  BOOST_TEST(got.empty());
  BOOST_TEST(asked == 2);
  const store::Attempt first = r.latest(id);
  BOOST_TEST(first.sequence_id == 1u);
  BOOST_TEST(static_cast<int>(first.status) == static_cast<int>(store::AttemptStatus::failed));
  BOOST_TEST(!r.book.holds(id, first.id));
  BOOST_TEST(r.book.release_older_than(-1).empty());
  // The retry is queued for whoever asks next.
  const auto retry = r.backend.dequeue("Worker-0", "runner-1-w0", 1, 0, [] { return false; });
  BOOST_REQUIRE_EQUAL(retry.size(), 1u);
  BOOST_TEST(retry[0].attempt.sequence_id == 2u);
}

// No policy version has reached the runner yet: the dequeue waits for one, but not past its client's leaving.
BOOST_AUTO_TEST_CASE(the_wait_for_a_policy_version_ends_when_the_client_leaves) {
  Runner r;
  r.version = app::no_version;
  const store::RolloutId id = r.enqueue();
  const auto start = app::Stopwatch::now();
  const auto got = r.backend.dequeue("Worker-0", "runner-1-w0", 1, 5, [&] { return app::seconds_since(start) > 0.3; });
  BOOST_TEST(got.empty());
  BOOST_TEST(app::seconds_since(start) < 10);  // the wait for a version lasts 20 s
  BOOST_TEST(static_cast<int>(r.latest(id).status) == static_cast<int>(store::AttemptStatus::failed));
}

// Agent Lightning's runners all name themselves Worker-0: the store knows each process by its credentials' user, and
// each one's heartbeats keep its own attempt alive (one record for all kept only the attempt taken last alive,
// job-wide). The task interface's own heartbeat, the attempt reported running, keeps it alive too (it was ignored).
BOOST_AUTO_TEST_CASE(each_process_keeps_its_own_attempt_alive) {
  ManualClock clock;
  store::RolloutConfig config = Runner::config();
  config.unresponsive_seconds = 30;
  store::MemoryStore store{clock, config};
  store::SpanBatcher spans{store, 64, 0.01};
  app::AttemptBook book;
  std::atomic<std::uint64_t> version{0};
  app::RunnerBackend backend{store, spans, book, version, "runner-1-w"};
  store::NewRollout rollout;
  rollout.input = "{}";
  store.enqueue(std::vector<store::NewRollout>{rollout, rollout});
  const auto first = backend.dequeue("Worker-0", "runner-1-w0", 1, 0, [] { return false; });
  const auto second = backend.dequeue("Worker-0", "runner-1-w1", 1, 0, [] { return false; });
  BOOST_REQUIRE(first.size() == 1u);
  BOOST_REQUIRE(second.size() == 1u);
  BOOST_TEST(first[0].attempt.worker_id == "runner-1-w0");
  const auto status = [&](const store::AttemptedRollout& taken) {
    return static_cast<int>(store.get_latest_attempt(taken.rollout.id).status);
  };
  const int unresponsive = static_cast<int>(store::AttemptStatus::unresponsive);
  for (int i = 0; i < 6; ++i) {  // a minute, a heartbeat every 10 s
    clock.advance(10);
    BOOST_TEST(backend.heartbeat("Worker-0", "runner-1-w0").id == "runner-1-w0");
    backend.heartbeat("Worker-0", "runner-1-w1");
    store.check_health();
  }
  BOOST_TEST(status(first[0]) != unresponsive);
  BOOST_TEST(status(second[0]) != unresponsive);
  for (int i = 0; i < 6; ++i) {  // now only the first, through the task interface
    clock.advance(10);
    BOOST_REQUIRE(backend.update_attempt(first[0].rollout.id, first[0].attempt.id, store::AttemptStatus::running));
    store.check_health();
  }
  BOOST_TEST(status(first[0]) == static_cast<int>(store::AttemptStatus::running));
  BOOST_TEST(status(second[0]) == unresponsive);
}

BOOST_AUTO_TEST_SUITE_END()
