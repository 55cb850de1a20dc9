#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "arclight/store/store.hpp"

namespace arclight::store {

// Batches a runner's spans to the store: a batch goes when it holds max_spans,
// or when its oldest span has waited max_delay_seconds (a thread of its own sends
// both), or on flush(). Each batch is also its attempts' heartbeat,
// so an episode that stops producing spans stops heartbeating. Should the store fail a
// batch the thread sent (it did not answer in time), every later add, flush or
// end_attempts throws that error, on the runner's own thread.
class SpanBatcher {
 public:
  SpanBatcher(Store& store, std::size_t max_spans, double max_delay_seconds);
  ~SpanBatcher();  // flushes what is left
  SpanBatcher(const SpanBatcher&) = delete;
  SpanBatcher& operator=(const SpanBatcher&) = delete;

  void add(Span span);
  // Sends what is buffered now.
  void flush();
  // Ends attempts: what is buffered and the ends go in one request (Store::end_attempts), the spans first.
  std::vector<ReportOutcome> end_attempts(const std::vector<AttemptReport>& ends);

  std::uint64_t batches_sent() const;
  std::uint64_t spans_refused() const;  // the store said no: the attempt timed out, or its rollout ended

 private:
  // Sends the buffer with `send` (which returns the spans' sequence ids), or as add_spans; an empty buffer only when
  // asked.
  using Send = std::function<std::vector<std::uint64_t>(std::vector<Span>)>;
  void send_locked(std::unique_lock<std::mutex>& lock, bool even_empty = false, const Send& send = {});
  void throw_if_failed() const;  // with mutex_ held

  Store& store_;
  const std::size_t max_spans_;
  const double max_delay_;
  mutable std::mutex mutex_;
  std::mutex send_mutex_;  // one batch at a time, in order
  std::condition_variable wake_;
  std::vector<Span> buffer_;
  std::chrono::steady_clock::time_point oldest_;
  std::uint64_t batches_ = 0;
  std::uint64_t refused_ = 0;
  bool stop_ = false;
  std::exception_ptr failure_;  // of a batch the thread sent
  std::thread timer_;
};

}  // namespace arclight::store
