#include "arclight/store/span_batcher.hpp"

#include <algorithm>

namespace arclight::store {

SpanBatcher::SpanBatcher(Store& store, std::size_t max_spans, double max_delay_seconds)
    : store_(store), max_spans_(std::max<std::size_t>(1, max_spans)), max_delay_(max_delay_seconds) {
  timer_ = std::thread([this] {
    const auto delay =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(max_delay_));
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_ && !failure_) {
      if (buffer_.empty()) {
        wake_.wait(lock, [this] { return stop_ || !buffer_.empty(); });
      } else if (buffer_.size() >= max_spans_ || std::chrono::steady_clock::now() >= oldest_ + delay) {
        try {
          send_locked(lock);
        } catch (...) {  // the store failed (it did not answer in time): the owner's next call throws it
          if (!lock.owns_lock()) lock.lock();
          failure_ = std::current_exception();
        }
      } else {
        wake_.wait_until(lock, oldest_ + delay);
      }
    }
  });
}

SpanBatcher::~SpanBatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  timer_.join();
  try {
    flush();
  } catch (...) {
    // the store is gone: nothing left to tell it
  }
}

void SpanBatcher::add(Span span) {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  if (buffer_.empty()) {
    oldest_ = std::chrono::steady_clock::now();
    wake_.notify_all();
  }
  buffer_.push_back(std::move(span));
  // A full batch goes from the batcher's thread, so that the runner's threads never wait on
  // the store; a runner that outpaces the store sends itself (and so waits).
  if (buffer_.size() >= 4 * max_spans_)
    send_locked(lock);
  else if (buffer_.size() == max_spans_)
    wake_.notify_all();
}

void SpanBatcher::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  send_locked(lock);
}

std::vector<ReportOutcome> SpanBatcher::end_attempts(const std::vector<AttemptReport>& ends) {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  std::vector<ReportOutcome> outcomes;
  send_locked(lock, !ends.empty(), [&](std::vector<Span> batch) {
    AttemptsEnded done = store_.end_attempts(std::move(batch), ends);
    outcomes = std::move(done.outcomes);
    return std::move(done.span_ids);
  });
  return outcomes;
}

void SpanBatcher::send_locked(std::unique_lock<std::mutex>& lock, bool even_empty, const Send& send) {
  // Lock order: send_mutex_, then mutex_. Batches leave one at a time, in the order they filled.
  lock.unlock();
  std::lock_guard<std::mutex> in_order(send_mutex_);
  lock.lock();
  if (buffer_.empty() && !even_empty) return;
  std::vector<Span> batch;
  batch.swap(buffer_);
  const bool has_spans = !batch.empty();
  lock.unlock();  // the runner keeps adding while the batch travels
  std::vector<std::uint64_t> ids = send ? send(std::move(batch)) : store_.add_spans(std::move(batch));
  lock.lock();
  batches_ += has_spans ? 1 : 0;
  refused_ += static_cast<std::uint64_t>(std::count(ids.begin(), ids.end(), 0u));
}

void SpanBatcher::throw_if_failed() const {
  if (failure_) std::rethrow_exception(failure_);
}

std::uint64_t SpanBatcher::batches_sent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batches_;
}

std::uint64_t SpanBatcher::spans_refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}

}  // namespace arclight::store
