#pragma once
// The store's behaviour, written once against the Store interface. It runs
// against MemoryStore in-process (memory_store_test.cpp) and against the MPI
// client talking to rank 0 (comm/remote_store_test.cpp).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "arclight/store/store.hpp"

namespace arclight::store::suite {

// What the suite needs besides the store: a way to let time pass and the watchdog run.
class Harness {
 public:
  virtual ~Harness() = default;
  virtual Store& store() = 0;
  // Lets `seconds` pass on the store's clock.
  virtual void advance(double seconds) = 0;
  // Makes sure the watchdog has scanned since the last advance.
  virtual void scan() = 0;
};

// The suite's rollout config: retries on every failure kind, 3 attempts, short limits.
inline RolloutConfig retrying_config() {
  RolloutConfig c;
  c.timeout_seconds = 2.0;
  c.unresponsive_seconds = 0.5;
  c.max_attempts = 3;
  c.retry_condition = bit(AttemptStatus::failed) | bit(AttemptStatus::timeout) | bit(AttemptStatus::unresponsive);
  return c;
}

// Rollouts where only silence counts. Over MPI the clock is real: a gap between signs of life is 0.3 s, a scan's 0.08 s
// and two round trips, well within 1 s on a loaded machine; without them the four gaps' 1.2 s would be silence past it.
inline RolloutConfig silence_only_config() {
  RolloutConfig c = retrying_config();
  c.timeout_seconds = 0;
  c.unresponsive_seconds = 1.0;
  return c;
}

inline NewRollout task(std::string input, RolloutConfig config = retrying_config()) {
  NewRollout r;
  r.input = std::move(input);
  r.config = config;
  return r;
}

inline Span span_of(const AttemptedRollout& ar, std::string name = "llm") {
  Span s;
  s.rollout_id = ar.rollout.id;
  s.attempt_id = ar.attempt.id;
  s.name = std::move(name);
  s.trace_id = "trace";
  // Each its own span id (an attempt keeps a span id once), also when threads make spans at once (a plain counter
  // raced in span_batcher's concurrent test: two spans of one id, one dropped, 999 of 1000 stored)
  static std::atomic<std::uint64_t> spans_made{0};
  s.span_id = "span-" + std::to_string(++spans_made);
  s.status = SpanStatus::ok;
  s.attributes.push_back({"prompt", std::string(64, 'p')});
  s.attributes.push_back({"reward", 0.5});
  s.attributes.push_back({"done", true});
  s.attributes.push_back({"tokens", TokenIds{1, 2, 3}});
  s.attributes.push_back({"logprobs", Floats{-0.5f, -1.5f}});
  return s;
}

inline AttemptUpdate status_update(AttemptStatus s) {
  AttemptUpdate u;
  u.status = s;
  return u;
}

template <class F>
void expect_refused(F&& f, StoreError::Code code = StoreError::invalid_transition) {
  try {
    f();
    BOOST_ERROR("expected a StoreError");
  } catch (const StoreError& e) {
    BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(code), e.what());
  }
}

inline void dequeue_is_fifo_and_creates_attempts(Harness& h) {
  Store& s = h.store();
  auto queued = s.enqueue({task("a"), task("b"), task("c")});
  BOOST_TEST(queued.size() == 3u);
  BOOST_TEST((queued[0].status == RolloutStatus::queuing));
  auto got = s.dequeue("w1", 2);
  BOOST_REQUIRE(got.size() == 2u);
  BOOST_TEST(got[0].rollout.input == "a");
  BOOST_TEST(got[1].rollout.input == "b");
  BOOST_TEST((got[0].rollout.status == RolloutStatus::preparing));
  BOOST_TEST((got[0].attempt.status == AttemptStatus::preparing));
  BOOST_TEST(got[0].attempt.sequence_id == 1u);
  BOOST_TEST(got[0].attempt.worker_id == "w1");
  auto rest = s.dequeue("w2", 5);
  BOOST_REQUIRE(rest.size() == 1u);
  BOOST_TEST(rest[0].rollout.input == "c");
  BOOST_TEST(s.dequeue("w2", 5).empty());
}

inline void first_span_starts_the_attempt_and_sequence_ids_increase(Harness& h) {
  Store& s = h.store();
  s.enqueue(task("x"));
  auto ar = *s.dequeue("w1");
  std::uint64_t first = s.add_span(span_of(ar));
  BOOST_TEST((s.get_latest_attempt(ar.rollout.id).status == AttemptStatus::running));
  BOOST_TEST((s.get_rollout(ar.rollout.id).status == RolloutStatus::running));
  // What an outside client's span holds beyond the store's fields comes back as it was sent (Agent Lightning's
  // events, an integer attribute), here in the canonical form the HTTP API keeps it in.
  Span tool = span_of(ar, "tool");
  tool.attributes.push_back({"turn", 3.0});
  tool.extra_json = R"({"attributes":{"turn":3},"events":[{"attributes":{},"name":"retry","timestamp":1.5}]})";
  auto more = s.add_spans({span_of(ar), tool, span_of(ar)});
  BOOST_TEST(more.size() == 3u);
  BOOST_TEST(first >= 1u);
  BOOST_TEST(more[0] > first);
  BOOST_TEST(more[1] > more[0]);
  BOOST_TEST(more[2] > more[1]);
  // Spans come back whole, in order.
  SpanFilter f;
  f.rollout_id = ar.rollout.id;
  auto page = s.query_spans(f, {});
  BOOST_REQUIRE(page.total == 4u);
  BOOST_TEST(page.items[2].name == "tool");
  BOOST_TEST(page.items[2].extra_json == tool.extra_json);
  BOOST_TEST(page.items[1].extra_json.empty());
  BOOST_TEST(page.items[0].sequence_id == first);
  BOOST_TEST((page.items[0].attributes == span_of(ar).attributes));
  f.name = "tool";
  BOOST_TEST(s.query_spans(f, {}).total == 1u);
  f.name = "";
  f.after_sequence_id = more[1];
  BOOST_TEST(s.query_spans(f, {}).items.at(0).sequence_id == more[2]);
}

// Agent Lightning's counter: one per rollout, across its attempts; a span given an id keeps it.
inline void sequence_ids_count_per_rollout_and_given_ids_are_kept(Harness& h) {
  Store& s = h.store();
  RolloutConfig c = retrying_config();
  c.unresponsive_seconds = 0;
  c.timeout_seconds = 0;
  RolloutId id = s.enqueue(task("x", c)).id;
  auto first = *s.dequeue("w1");
  BOOST_TEST(s.add_span(span_of(first)) == 1u);
  std::uint64_t reserved = s.next_sequence_id(id);
  BOOST_TEST(reserved == 2u);
  BOOST_TEST(s.add_span(span_of(first)) == 3u);  // the reserved id is not issued again
  Span late = span_of(first, "reserved");
  late.sequence_id = reserved;  // arrives after a later span
  BOOST_TEST(s.add_span(late) == reserved);
  Span ahead = span_of(first, "ahead");
  ahead.sequence_id = 10;
  BOOST_TEST(s.add_span(ahead) == 10u);
  s.update_attempt(id, first.attempt.id, status_update(AttemptStatus::failed));
  auto second = *s.dequeue("w1");
  BOOST_TEST(s.add_span(span_of(second)) == 11u);  // the rollout's counter, not the attempt's
  SpanFilter f;
  f.rollout_id = id;
  f.attempt_id = 0;
  std::vector<std::uint64_t> order;
  for (const Span& span : s.query_spans(f, {}).items) order.push_back(span.sequence_id);
  BOOST_TEST(order == (std::vector<std::uint64_t>{1, 2, 3, 10, 11}));
  expect_refused([&] { s.next_sequence_id(999999); }, StoreError::not_found);
  // An id past what JSON holds exactly is refused: 2^64 - 1 took the counter there, and the next span's id wrapped to
  // 0, which says "refused or sent again".
  Span wrapping = span_of(second, "wrapping");
  wrapping.sequence_id = ~std::uint64_t(0);
  expect_refused([&] { s.add_span(wrapping); }, StoreError::invalid_argument);
  wrapping.sequence_id = max_sequence_id;
  BOOST_TEST(s.add_span(wrapping) == max_sequence_id);
  BOOST_TEST(s.add_span(span_of(second)) == max_sequence_id + 1);
}

// Agent Lightning's clients and OTLP exporters send a span again when its answer was lost: it is kept once.
inline void a_span_sent_again_is_kept_once(Harness& h) {
  Store& s = h.store();
  s.enqueue(task("x"));
  s.enqueue(task("y"));
  const AttemptedRollout first = *s.dequeue("w1");
  const AttemptedRollout second = *s.dequeue("w2");
  const Span span = span_of(first);
  BOOST_TEST(s.add_span(span) >= 1u);
  BOOST_TEST(s.add_span(span) == 0u);
  const std::vector<std::uint64_t> batch = s.add_spans({span, span_of(first)});
  BOOST_REQUIRE(batch.size() == 2u);
  BOOST_TEST(batch[0] == 0u);
  BOOST_TEST(batch[1] >= 1u);
  Span in_another_attempt = span;
  in_another_attempt.rollout_id = second.rollout.id;
  in_another_attempt.attempt_id = second.attempt.id;
  BOOST_TEST(s.add_span(in_another_attempt) >= 1u);
  Span without_id = span_of(first);
  without_id.span_id.clear();  // the built-in runners' spans: never compared
  BOOST_TEST(s.add_span(without_id) >= 1u);
  BOOST_TEST(s.add_span(without_id) >= 1u);
  SpanFilter f;
  f.rollout_id = first.rollout.id;
  BOOST_TEST(s.query_spans(f, {}).total == 4u);
  f.rollout_id = second.rollout.id;
  BOOST_TEST(s.query_spans(f, {}).total == 1u);
}

inline void success_ends_the_rollout_once(Harness& h) {
  Store& s = h.store();
  s.enqueue(task("x"));
  auto ar = *s.dequeue("w1");
  s.add_span(span_of(ar));
  Attempt a = s.update_attempt(ar.rollout.id, latest_attempt, status_update(AttemptStatus::succeeded));
  BOOST_TEST((a.status == AttemptStatus::succeeded));
  BOOST_TEST(a.end_time >= a.start_time);
  Rollout r = s.get_rollout(ar.rollout.id);
  BOOST_TEST((r.status == RolloutStatus::succeeded));
  BOOST_TEST(r.end_time > 0);
  // Final means final.
  expect_refused([&] { s.update_attempt(ar.rollout.id, ar.attempt.id, status_update(AttemptStatus::failed)); });
  expect_refused([&] { s.add_span(span_of(ar)); });
  expect_refused([&] { s.cancel(ar.rollout.id); });
  BOOST_TEST(s.add_spans({span_of(ar)}) == (std::vector<std::uint64_t>{0}));
}

inline void failure_retries_up_to_max_attempts(Harness& h) {
  Store& s = h.store();
  RolloutId id = s.enqueue(task("x")).id;
  for (std::uint32_t attempt = 1; attempt <= 3; ++attempt) {
    auto ar = s.dequeue("w1");
    BOOST_REQUIRE(ar.has_value());
    BOOST_TEST(ar->rollout.id == id);
    BOOST_TEST(ar->attempt.sequence_id == attempt);
    s.update_attempt(id, ar->attempt.id, status_update(AttemptStatus::failed));
    RolloutStatus want = attempt < 3 ? RolloutStatus::requeuing : RolloutStatus::failed;
    BOOST_TEST((s.get_rollout(id).status == want), "attempt " << attempt);
  }
  BOOST_TEST(!s.dequeue("w1").has_value());
  BOOST_TEST(s.query_attempts(id).size() == 3u);
}

inline void no_retry_without_the_condition(Harness& h) {
  Store& s = h.store();
  RolloutConfig c = retrying_config();
  c.retry_condition = bit(AttemptStatus::timeout);
  RolloutId id = s.enqueue(task("x", c)).id;
  auto ar = *s.dequeue("w1");
  s.update_attempt(id, ar.attempt.id, status_update(AttemptStatus::failed));
  BOOST_TEST((s.get_rollout(id).status == RolloutStatus::failed));
}

inline void requeued_rollouts_go_to_the_back(Harness& h) {
  Store& s = h.store();
  auto q = s.enqueue({task("a"), task("b")});
  auto a = *s.dequeue("w1");
  s.update_attempt(a.rollout.id, a.attempt.id, status_update(AttemptStatus::failed));
  BOOST_TEST(s.dequeue("w1")->rollout.input == "b");
  auto again = *s.dequeue("w1");
  BOOST_TEST(again.rollout.input == "a");
  BOOST_TEST(again.attempt.sequence_id == 2u);
  BOOST_TEST((again.rollout.status == RolloutStatus::preparing));
}

inline void silence_makes_an_attempt_unresponsive_and_a_span_revives_it(Harness& h) {
  Store& s = h.store();
  RolloutId id = s.enqueue(task("x")).id;
  auto first = *s.dequeue("hung");
  s.add_span(span_of(first));
  h.advance(0.8);  // past unresponsive_seconds (0.5), within timeout_seconds (2)
  h.scan();
  BOOST_TEST((s.query_attempts(id).at(0).status == AttemptStatus::unresponsive));
  BOOST_TEST((s.get_rollout(id).status == RolloutStatus::requeuing));
  // Another runner takes it.
  auto second = *s.dequeue("healthy");
  BOOST_TEST(second.attempt.sequence_id == 2u);
  // The hung runner wakes up: its span revives its own attempt, not the rollout.
  BOOST_TEST(s.add_span(span_of(first)) > 0u);
  BOOST_TEST((s.query_attempts(id).at(0).status == AttemptStatus::running));
  BOOST_TEST((s.get_rollout(id).status == RolloutStatus::preparing));
  // The old attempt's success does not override the newer attempt's rollout...
  s.update_attempt(id, first.attempt.id, status_update(AttemptStatus::succeeded));
  BOOST_TEST((s.get_rollout(id).status == RolloutStatus::preparing));
  // ...the latest attempt's does.
  s.add_span(span_of(second));
  s.update_attempt(id, second.attempt.id, status_update(AttemptStatus::succeeded));
  BOOST_TEST((s.get_rollout(id).status == RolloutStatus::succeeded));
}

// The latest attempt alive again before anyone took its requeued rollout: the rollout runs again and its success
// ends it (left requeuing, it ran a second time and this success did not count), by a span or a report of running;
// and its worker takes it back, whose heartbeats keep it alive from then on.
inline void a_revived_latest_attempt_takes_its_rollout_back(Harness& h) {
  Store& s = h.store();
  for (int way = 0; way < 2; ++way) {  // gaps of 0.6 s keep clear of unresponsive_seconds (1 s)
    RolloutId id = s.enqueue(task("x", silence_only_config())).id;
    auto first = *s.dequeue("slow");
    s.add_span(span_of(first));
    h.advance(1.3);
    h.scan();
    BOOST_TEST((s.get_rollout(id).status == RolloutStatus::requeuing));
    if (way == 0)
      s.add_span(span_of(first));
    else
      s.update_attempt(id, first.attempt.id, status_update(AttemptStatus::running));
    BOOST_TEST((s.get_rollout(id).status == RolloutStatus::running), "way " << way);
    BOOST_TEST(!s.dequeue("other").has_value(), "way " << way);  // not handed out again
    h.advance(0.6);
    s.heartbeat("slow");
    h.advance(0.6);  // 1.2 s since the revival, 0.6 since the heartbeat
    h.scan();
    BOOST_TEST((s.get_latest_attempt(id).status == AttemptStatus::running), "way " << way);
    s.update_attempt(id, first.attempt.id, status_update(AttemptStatus::succeeded));
    BOOST_TEST((s.get_rollout(id).status == RolloutStatus::succeeded), "way " << way);
  }
}

inline void a_timed_out_attempt_is_never_revived(Harness& h) {
  Store& s = h.store();
  RolloutConfig c = retrying_config();
  c.unresponsive_seconds = 0;  // only the timeout applies
  c.timeout_seconds = 0.5;
  RolloutId id = s.enqueue(task("x", c)).id;
  auto ar = *s.dequeue("w1");
  s.add_span(span_of(ar));
  h.advance(0.8);
  h.scan();
  BOOST_TEST((s.get_latest_attempt(id).status == AttemptStatus::timeout));
  BOOST_TEST((s.get_rollout(id).status == RolloutStatus::requeuing));
  expect_refused([&] { s.add_span(span_of(ar)); });
  expect_refused([&] { s.update_attempt(id, ar.attempt.id, status_update(AttemptStatus::running)); });
}

// A running attempt that gives `sign_of_life` every 0.3 s stays running; silent past unresponsive_seconds, it is not.
template <class SignOfLife>
void signs_of_life_keep_an_attempt_alive(Harness& h, const SignOfLife& sign_of_life) {
  Store& s = h.store();
  RolloutId id = s.enqueue(task("x", silence_only_config())).id;
  auto ar = *s.dequeue("w1");
  s.add_span(span_of(ar));
  for (int i = 0; i < 4; ++i) {
    h.advance(0.3);
    sign_of_life(s, ar);
    h.scan();
  }
  BOOST_TEST((s.get_latest_attempt(id).status == AttemptStatus::running));
  h.advance(1.3);
  h.scan();
  BOOST_TEST((s.get_latest_attempt(id).status == AttemptStatus::unresponsive));
}

inline void heartbeats_keep_an_attempt_alive(Harness& h) {
  signs_of_life_keep_an_attempt_alive(h, [](Store& s, const AttemptedRollout&) { s.heartbeat("w1"); });
}

// An attempt reported running is alive, as after a span (the runners' task interface sends that as its heartbeat).
inline void a_report_of_running_keeps_an_attempt_alive(Harness& h) {
  signs_of_life_keep_an_attempt_alive(h, [](Store& s, const AttemptedRollout& ar) {
    s.update_attempt(ar.rollout.id, ar.attempt.id, status_update(AttemptStatus::running));
  });
}

inline void cancelled_is_final(Harness& h) {
  Store& s = h.store();
  auto q = s.enqueue({task("a"), task("b")});
  Rollout c = s.cancel(q[0].id);
  BOOST_TEST((c.status == RolloutStatus::cancelled));
  auto got = s.dequeue("w1");  // the cancelled one is skipped
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST(got->rollout.id == q[1].id);
  s.cancel(q[1].id);  // cancel a running one
  expect_refused([&] { s.add_span(span_of(*got)); });
  expect_refused([&] { s.update_attempt(q[1].id, got->attempt.id, status_update(AttemptStatus::succeeded)); });
  expect_refused([&] { s.start_attempt(q[1].id, "w1"); });
  RolloutUpdate back;
  back.status = RolloutStatus::queuing;
  expect_refused([&] { s.update_rollout(q[0].id, back); });
  BOOST_TEST((s.get_rollout(q[1].id).status == RolloutStatus::cancelled));
}

inline void invalid_transitions_are_refused(Harness& h) {
  Store& s = h.store();
  RolloutId id = s.enqueue(task("x")).id;
  RolloutUpdate to_running;
  to_running.status = RolloutStatus::running;
  expect_refused([&] { s.update_rollout(id, to_running); });
  RolloutUpdate to_succeeded;
  to_succeeded.status = RolloutStatus::succeeded;
  expect_refused([&] { s.update_rollout(id, to_succeeded); });
  auto ar = *s.dequeue("w1");
  s.add_span(span_of(ar));
  expect_refused([&] { s.update_attempt(id, ar.attempt.id, status_update(AttemptStatus::preparing)); });
  expect_refused([&] { s.get_rollout(999999); }, StoreError::not_found);
  expect_refused([&] { s.update_attempt(id, 999999, status_update(AttemptStatus::failed)); }, StoreError::not_found);
  Span orphan = span_of(ar);
  orphan.rollout_id = 999999;
  expect_refused([&] { s.add_span(orphan); }, StoreError::not_found);
  // A refused update changed nothing.
  BOOST_TEST((s.get_rollout(id).status == RolloutStatus::running));
  BOOST_TEST((s.get_latest_attempt(id).status == AttemptStatus::running));
}

// A batch is added whole or not at all: a bad rollout in it leaves the store as it was, so a caller that sends the
// batch again (mended) makes no duplicates. (The rollouts before the bad one were queued, and ran unseen.)
inline void a_batch_with_a_bad_rollout_enqueues_none(Harness& h) {
  Store& s = h.store();
  RolloutConfig no_attempts = retrying_config();
  no_attempts.max_attempts = 0;
  expect_refused([&] { s.enqueue({task("a"), task("b"), task("c", no_attempts)}); }, StoreError::invalid_argument);
  NewRollout unknown_resources = task("d");
  unknown_resources.resources_id = 1000;
  expect_refused([&] { s.enqueue({task("a"), unknown_resources}); }, StoreError::not_found);
  BOOST_TEST(s.query_rollouts({}, {}).total == 0u);
  BOOST_TEST(s.dequeue("w1", 5).empty());
  const auto queued = s.enqueue({task("a"), task("b")});
  BOOST_REQUIRE(queued.size() == 2u);
  BOOST_TEST(queued[0].id == 1u);  // no id was spent on the refused batches
}

inline void start_rollout_skips_the_queue_and_start_attempt_retries(Harness& h) {
  Store& s = h.store();
  s.enqueue(task("queued"));
  AttemptedRollout direct = s.start_rollout(task("direct"), "w1");
  BOOST_TEST((direct.rollout.status == RolloutStatus::preparing));
  BOOST_TEST(direct.attempt.sequence_id == 1u);
  BOOST_TEST(s.dequeue("w2")->rollout.input == "queued");
  AttemptedRollout retry = s.start_attempt(direct.rollout.id, "w3");
  BOOST_TEST(retry.attempt.sequence_id == 2u);
  BOOST_TEST(s.get_latest_attempt(direct.rollout.id).id == retry.attempt.id);
  // The superseded attempt no longer moves the rollout.
  s.update_attempt(direct.rollout.id, direct.attempt.id, status_update(AttemptStatus::failed));
  BOOST_TEST((s.get_rollout(direct.rollout.id).status == RolloutStatus::preparing));
}

inline void queries_filter_and_page(Harness& h) {
  Store& s = h.store();
  std::vector<NewRollout> batch;
  for (int i = 0; i < 10; ++i) {
    NewRollout r = task("t" + std::to_string(i));
    r.mode = i % 2 ? Mode::val : Mode::train;
    batch.push_back(r);
  }
  auto q = s.enqueue(batch);
  s.cancel(q[0].id);
  RolloutFilter f;
  f.ids = {q[0].id, q[1].id, q[2].id, q[3].id};
  f.statuses = bit(RolloutStatus::queuing);
  auto page = s.query_rollouts(f, {});
  BOOST_TEST(page.total == 3u);
  f.mode = Mode::val;
  BOOST_TEST(s.query_rollouts(f, {}).total == 2u);
  RolloutFilter all_ids;
  for (auto& r : q) all_ids.ids.push_back(r.id);
  Paging p;
  p.offset = 4;
  p.limit = 3;
  auto paged = s.query_rollouts(all_ids, p);
  BOOST_TEST(paged.total == 10u);
  BOOST_REQUIRE(paged.items.size() == 3u);
  BOOST_TEST(paged.items[0].input == "t4");
  p.offset = 9;
  BOOST_TEST(s.query_rollouts(all_ids, p).items.size() == 1u);
  p.offset = 50;
  BOOST_TEST(s.query_rollouts(all_ids, p).items.empty());
}

// A rollout without a mode (Agent Lightning's None) keeps none through every store and wire; an update sets a mode and
// sets none again.
inline void a_rollout_without_a_mode_keeps_none(Harness& h) {
  Store& s = h.store();
  NewRollout r = task("no mode");
  r.mode = Mode::none;
  const Rollout none = s.enqueue(r);
  BOOST_TEST((s.get_rollout(none.id).mode == Mode::none));
  BOOST_TEST((s.dequeue("w1")->rollout.mode == Mode::none));
  RolloutUpdate to_val;
  to_val.mode = Mode::val;
  BOOST_TEST((s.update_rollout(none.id, to_val).mode == Mode::val));
  RolloutUpdate to_none;
  to_none.mode = Mode::none;
  BOOST_TEST((s.update_rollout(none.id, to_none).mode == Mode::none));
  BOOST_TEST((s.get_rollout(none.id).mode == Mode::none));
}

inline void attempts_filter_and_page(Harness& h) {
  Store& s = h.store();
  RolloutId id = s.enqueue(task("x")).id;
  std::string worker = "filter-" + std::to_string(id);
  for (int i = 0; i < 3; ++i) {
    auto ar = *s.dequeue(i == 1 ? worker : "someone-else");
    s.update_attempt(id, ar.attempt.id, status_update(AttemptStatus::failed));
  }
  BOOST_TEST(s.query_attempts(id).size() == 3u);
  AttemptFilter f;
  f.rollout_id = id;
  f.worker_id = worker;
  auto mine = s.query_attempts(f, {});
  BOOST_REQUIRE(mine.total == 1u);
  BOOST_TEST(mine.items[0].sequence_id == 2u);
  AttemptFilter failed;
  failed.statuses = bit(AttemptStatus::failed);
  Paging p;
  p.offset = 1;
  p.limit = 1;
  auto page = s.query_attempts(failed, p);
  BOOST_TEST(page.total >= 3u);
  BOOST_TEST(page.items.size() == 1u);
  AttemptFilter missing;
  missing.rollout_id = 999999;
  expect_refused([&] { s.query_attempts(missing, {}); }, StoreError::not_found);
}

inline void resources_are_versioned_and_immutable(Harness& h) {
  Store& s = h.store();
  std::string name = "policy-" + std::to_string(reinterpret_cast<std::uintptr_t>(&h));
  ResourcesVersion v1 = s.add_resources(name, "v1 checksum=abc");
  BOOST_TEST(v1.version == 1u);
  expect_refused([&] { s.add_resources(name, "again"); });
  expect_refused([&] { s.update_resources(name + "-nope", "x"); }, StoreError::not_found);
  ResourcesVersion v2 = s.update_resources(name, "v2 checksum=def");
  BOOST_TEST(v2.version == 2u);
  BOOST_TEST(v2.id != v1.id);
  BOOST_TEST(s.get_resources(v1.id).content == "v1 checksum=abc");  // the old version is unchanged
  BOOST_TEST(s.get_latest_resources(name).id == v2.id);
  BOOST_TEST(s.get_latest_resources("").id == v2.id);
  NewRollout r = task("uses v2");
  r.resources_id = v2.id;
  BOOST_TEST(s.enqueue(r).resources_id == v2.id);
}

// A listing is every version's id, name, version and time without the content; contents are read by ids, in the order
// asked.
inline void resources_are_listed_without_content_and_read_by_ids(Harness& h) {
  Store& s = h.store();
  const std::string name = "listed-" + std::to_string(reinterpret_cast<std::uintptr_t>(&h));
  const ResourcesVersion a1 = s.add_resources(name + "-a", "a one");
  const ResourcesVersion b1 = s.add_resources(name + "-b", "b one");
  const ResourcesVersion a2 = s.update_resources(name + "-a", "a two");
  std::vector<ResourcesVersion> ours;  // the store may hold other cases' versions too
  for (const ResourcesVersion& v : s.list_resources())
    if (v.name.rfind(name, 0) == 0) ours.push_back(v);
  BOOST_REQUIRE(ours.size() == 3u);
  const std::vector<ResourcesVersion> written{a1, b1, a2};
  for (std::size_t i = 0; i < 3; ++i) {
    const ResourcesVersion& want = written[i];
    BOOST_TEST(ours[i].id == want.id);
    BOOST_TEST(ours[i].name == want.name);
    BOOST_TEST(ours[i].version == want.version);
    BOOST_TEST(ours[i].create_time == want.create_time);
    BOOST_TEST(ours[i].content.empty());
  }
  std::vector<std::string> contents;
  for (const ResourcesVersion& v : s.get_resources(std::vector{a2.id, a1.id, a2.id, b1.id}))
    contents.push_back(v.content);
  BOOST_TEST((contents == std::vector<std::string>{"a two", "a one", "a two", "b one"}));
  BOOST_TEST(s.get_resources(std::vector<ResourcesId>{}).empty());
  expect_refused([&] { s.get_resources(std::vector<ResourcesId>{a1.id, 1000000}); }, StoreError::not_found);
}

inline void wait_for_rollouts_returns_the_ended(Harness& h) {
  Store& s = h.store();
  auto q = s.enqueue({task("a"), task("b")});
  auto a = *s.dequeue("w1");
  s.update_attempt(a.rollout.id, a.attempt.id, status_update(AttemptStatus::succeeded));
  auto ended = s.wait_for_rollouts({q[0].id, q[1].id}, 0.05);
  BOOST_REQUIRE(ended.size() == 1u);
  BOOST_TEST(ended[0].id == q[0].id);
  s.cancel(q[1].id);
  BOOST_TEST(s.wait_for_rollouts({q[0].id, q[1].id}, 5.0).size() == 2u);
}

inline void workers_and_statistics(Harness& h) {
  Store& s = h.store();
  Statistics before = s.statistics();
  s.enqueue({task("a"), task("b")});
  auto ar = *s.dequeue("stats-worker");
  s.add_spans({span_of(ar), span_of(ar)});
  std::vector<Worker> workers = s.query_workers();
  auto w = std::find_if(workers.begin(), workers.end(), [](const Worker& w) { return w.id == "stats-worker"; });
  BOOST_REQUIRE(w != workers.end());
  BOOST_TEST((w->status == WorkerStatus::busy));
  BOOST_TEST(w->current_rollout == ar.rollout.id);
  s.update_attempt(ar.rollout.id, ar.attempt.id, status_update(AttemptStatus::succeeded));
  workers = s.query_workers();
  w = std::find_if(workers.begin(), workers.end(), [](const Worker& w) { return w.id == "stats-worker"; });
  BOOST_TEST((w->status == WorkerStatus::idle));
  Statistics after = s.statistics();
  BOOST_TEST(after.spans - before.spans == 2u);
  BOOST_TEST(after.rollouts[int(RolloutStatus::succeeded)] - before.rollouts[int(RolloutStatus::succeeded)] == 1u);
  BOOST_TEST(after.queue_length - before.queue_length == 1u);
  BOOST_TEST(after.span_bytes > before.span_bytes);
}

// Agent Lightning's rules for workers: a dequeue is noted; taking work makes a worker busy, a dequeue that finds
// none idle, losing track of its attempt (unresponsive, timeout) unknown until it is heard from again.
inline void workers_follow_agent_lightnings_rules(Harness& h) {
  Store& s = h.store();
  auto worker = [&s](const std::string& id) {
    for (const Worker& w : s.query_workers())
      if (w.id == id) return w;
    BOOST_FAIL("no worker " << id);
    return Worker{};
  };
  s.enqueue({task("a")});
  const AttemptedRollout taken = *s.dequeue("agl-worker");
  Worker w = worker("agl-worker");
  BOOST_TEST((w.status == WorkerStatus::busy));
  BOOST_TEST(w.current_attempt == taken.attempt.id);
  BOOST_TEST(w.last_dequeue_time > 0);
  BOOST_TEST(w.last_busy_time > 0);
  BOOST_TEST(w.last_idle_time == 0);
  BOOST_TEST(!s.dequeue("agl-worker").has_value());
  w = worker("agl-worker");
  BOOST_TEST((w.status == WorkerStatus::idle));
  BOOST_TEST(w.last_idle_time > 0);
  s.update_attempt(taken.rollout.id, taken.attempt.id, status_update(AttemptStatus::unresponsive));
  w = worker("agl-worker");
  BOOST_TEST((w.status == WorkerStatus::unknown));
  BOOST_TEST(w.current_attempt == 0u);
  s.heartbeat("agl-worker");
  BOOST_TEST((worker("agl-worker").status == WorkerStatus::idle));
}

inline void a_batch_of_reports_applies_each_and_refuses_one_by_one(Harness& h) {
  Store& s = h.store();
  s.enqueue({task("a"), task("b"), task("c")});
  auto got = s.dequeue("batch-worker", 3);
  BOOST_REQUIRE(got.size() == 3u);
  s.update_attempt(got[2].rollout.id, got[2].attempt.id, status_update(AttemptStatus::succeeded));
  std::vector<AttemptReport> reports(4);
  for (int i = 0; i < 3; ++i) {
    reports[i].rollout_id = got[i].rollout.id;
    reports[i].attempt_id = got[i].attempt.id;
  }
  reports[0].update = status_update(AttemptStatus::succeeded);
  reports[1].update = status_update(AttemptStatus::failed);
  reports[2].update = status_update(AttemptStatus::failed);  // already succeeded: refused
  reports[3].rollout_id = 999999;                            // no such rollout: refused
  reports[3].attempt_id = 1;
  reports[3].update = status_update(AttemptStatus::failed);
  std::vector<ReportOutcome> outcomes = s.update_attempts(reports);
  BOOST_REQUIRE(outcomes.size() == 4u);
  BOOST_REQUIRE(outcomes[0].attempt.has_value());
  BOOST_TEST((outcomes[0].attempt->status == AttemptStatus::succeeded));
  BOOST_REQUIRE(outcomes[1].attempt.has_value());
  BOOST_TEST((outcomes[1].attempt->status == AttemptStatus::failed));
  BOOST_TEST(!outcomes[2].attempt.has_value());
  BOOST_TEST(!outcomes[2].refusal.empty());
  BOOST_TEST(!outcomes[3].attempt.has_value());
  BOOST_TEST(outcomes[3].refusal.find("999999") != std::string::npos, outcomes[3].refusal);
  BOOST_TEST((s.get_rollout(got[0].rollout.id).status == RolloutStatus::succeeded));
  BOOST_TEST((s.get_rollout(got[2].rollout.id).status == RolloutStatus::succeeded));
  BOOST_TEST(s.update_attempts({}).empty());
}

// Spans and ends in one call: the spans go first, so an episode's last spans are never refused for its end.
inline void ending_attempts_stores_their_spans_first(Harness& h) {
  Store& s = h.store();
  s.enqueue({task("a"), task("b")});
  auto got = s.dequeue("ending-worker", 2);
  BOOST_REQUIRE(got.size() == 2u);
  Span stray = span_of(got[1]);
  stray.rollout_id = 999999;  // no such rollout: refused, the rest stands
  std::vector<Span> spans{span_of(got[0]), span_of(got[0], "reward"), span_of(got[1]), stray};
  std::vector<AttemptReport> ends(3);
  for (int i = 0; i < 2; ++i) {
    ends[i].rollout_id = got[i].rollout.id;
    ends[i].attempt_id = got[i].attempt.id;
  }
  ends[0].update = status_update(AttemptStatus::succeeded);
  ends[1].update = status_update(AttemptStatus::failed);
  ends[2].rollout_id = 999999;
  ends[2].attempt_id = 1;
  ends[2].update = status_update(AttemptStatus::succeeded);
  const AttemptsEnded done = s.end_attempts(spans, ends);
  BOOST_TEST(done.span_ids == (std::vector<std::uint64_t>{1, 2, 1, 0}));
  BOOST_REQUIRE(done.outcomes.size() == 3u);
  BOOST_REQUIRE(done.outcomes[0].attempt.has_value());
  BOOST_TEST((done.outcomes[0].attempt->status == AttemptStatus::succeeded));
  BOOST_REQUIRE(done.outcomes[1].attempt.has_value());
  BOOST_TEST((done.outcomes[1].attempt->status == AttemptStatus::failed));
  BOOST_TEST(!done.outcomes[2].attempt.has_value());
  BOOST_TEST(done.outcomes[2].refusal.find("999999") != std::string::npos, done.outcomes[2].refusal);
  SpanFilter of_a;
  of_a.rollout_id = got[0].rollout.id;
  BOOST_TEST(s.query_spans(of_a, {}).items.size() == 2u);
  BOOST_TEST((s.get_rollout(got[0].rollout.id).status == RolloutStatus::succeeded));
  // Spans of an attempt that has ended are refused; ends alone (no spans) go too.
  const AttemptsEnded late = s.end_attempts({span_of(got[0])}, {});
  BOOST_TEST(late.span_ids == (std::vector<std::uint64_t>{0}));
  BOOST_TEST(late.outcomes.empty());
  AttemptReport again{got[1].rollout.id, got[1].attempt.id, status_update(AttemptStatus::succeeded)};
  const AttemptsEnded alone = s.end_attempts({}, {again});
  BOOST_TEST(alone.span_ids.empty());
  BOOST_REQUIRE(alone.outcomes.size() == 1u);
  BOOST_TEST(!alone.outcomes[0].attempt.has_value());  // it has failed already
}

// Every case, by name, for the harnesses to register.
inline std::vector<std::pair<const char*, void (*)(Harness&)>> cases() {
  return {
      {"dequeue_is_fifo_and_creates_attempts", dequeue_is_fifo_and_creates_attempts},
      {"first_span_starts_the_attempt_and_sequence_ids_increase",
       first_span_starts_the_attempt_and_sequence_ids_increase},
      {"sequence_ids_count_per_rollout_and_given_ids_are_kept", sequence_ids_count_per_rollout_and_given_ids_are_kept},
      {"a_span_sent_again_is_kept_once", a_span_sent_again_is_kept_once},
      {"success_ends_the_rollout_once", success_ends_the_rollout_once},
      {"failure_retries_up_to_max_attempts", failure_retries_up_to_max_attempts},
      {"no_retry_without_the_condition", no_retry_without_the_condition},
      {"requeued_rollouts_go_to_the_back", requeued_rollouts_go_to_the_back},
      {"silence_makes_an_attempt_unresponsive_and_a_span_revives_it",
       silence_makes_an_attempt_unresponsive_and_a_span_revives_it},
      {"a_revived_latest_attempt_takes_its_rollout_back", a_revived_latest_attempt_takes_its_rollout_back},
      {"a_timed_out_attempt_is_never_revived", a_timed_out_attempt_is_never_revived},
      {"heartbeats_keep_an_attempt_alive", heartbeats_keep_an_attempt_alive},
      {"a_report_of_running_keeps_an_attempt_alive", a_report_of_running_keeps_an_attempt_alive},
      {"cancelled_is_final", cancelled_is_final},
      {"invalid_transitions_are_refused", invalid_transitions_are_refused},
      {"a_batch_with_a_bad_rollout_enqueues_none", a_batch_with_a_bad_rollout_enqueues_none},
      {"start_rollout_skips_the_queue_and_start_attempt_retries",
       start_rollout_skips_the_queue_and_start_attempt_retries},
      {"queries_filter_and_page", queries_filter_and_page},
      {"a_rollout_without_a_mode_keeps_none", a_rollout_without_a_mode_keeps_none},
      {"attempts_filter_and_page", attempts_filter_and_page},
      {"resources_are_versioned_and_immutable", resources_are_versioned_and_immutable},
      {"resources_are_listed_without_content_and_read_by_ids", resources_are_listed_without_content_and_read_by_ids},
      {"wait_for_rollouts_returns_the_ended", wait_for_rollouts_returns_the_ended},
      {"workers_and_statistics", workers_and_statistics},
      {"workers_follow_agent_lightnings_rules", workers_follow_agent_lightnings_rules},
      {"a_batch_of_reports_applies_each_and_refuses_one_by_one",
       a_batch_of_reports_applies_each_and_refuses_one_by_one},
      {"ending_attempts_stores_their_spans_first", ending_attempts_stores_their_spans_first},
  };
}

}  // namespace arclight::store::suite
