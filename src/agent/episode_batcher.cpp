#include "arclight/agent/episode_batcher.hpp"

#include <algorithm>
#include <map>
#include <thread>

namespace arclight::agent {

class EpisodeBatcher::Handle : public Llm {
 public:
  Handle(EpisodeBatcher& owner, std::size_t episode) : owner_(owner), episode_(episode) {}
  LlmResponse generate(const std::vector<std::int32_t>& prompt, int max_new_tokens) override {
    return owner_.submit(episode_, prompt, max_new_tokens);
  }

 private:
  EpisodeBatcher& owner_;
  std::size_t episode_;
};

EpisodeBatcher::EpisodeBatcher(model::Policy& policy, model::Sampling sampling, std::uint64_t policy_version)
    : policy_(policy), sampling_(sampling), version_(policy_version) {}

LlmResponse EpisodeBatcher::submit(std::size_t episode, const std::vector<std::int32_t>& prompt, int max_new_tokens) {
  Request request{episode, &prompt, max_new_tokens, {}, nullptr, false};
  std::unique_lock<std::mutex> lock(mutex_);
  pending_.push_back(&request);
  if (batch_ready()) to_batcher_.notify_one();
  answered_[episode].wait(lock, [&] { return request.done; });
  if (request.error) std::rethrow_exception(request.error);
  return std::move(request.response);
}

void EpisodeBatcher::serve(std::vector<Request*>& batch) {
  // One forward pass per group of equal prompt length and answer length.
  std::sort(batch.begin(), batch.end(), [](const Request* a, const Request* b) { return a->episode < b->episode; });
  std::map<std::pair<std::size_t, int>, std::vector<Request*>> groups;
  for (Request* r : batch) groups[{r->prompt->size(), r->max_new_tokens}].push_back(r);
  for (auto& [shape, requests] : groups) {
    std::vector<std::vector<std::int32_t>> prompts;
    for (Request* r : requests) prompts.push_back(*r->prompt);
    std::vector<model::Generation> out;
    try {
      out = policy_.generate(prompts, shape.second, sampling_);
    } catch (...) {
      for (Request* r : requests) r->error = std::current_exception();
      continue;
    }
    for (std::size_t i = 0; i < requests.size(); ++i) {
      requests[i]->response.tokens = std::move(out[i].tokens);
      requests[i]->response.logprobs = std::move(out[i].logprobs);
      requests[i]->response.policy_version = version_;
    }
    calls_ += requests.size();
    ++batches_;
  }
}

EpisodeBatcher::~EpisodeBatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  to_workers_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void EpisodeBatcher::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    to_workers_.wait(lock, [&] { return closing_ || !jobs_.empty(); });
    if (jobs_.empty()) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

std::vector<std::exception_ptr> EpisodeBatcher::run(const std::vector<std::function<void(Llm&)>>& episodes) {
  std::vector<std::exception_ptr> errors(episodes.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_ = static_cast<int>(episodes.size());
    // Every episode needs a thread of its own at once (each blocks in generate until the batch
    // is served); threads are kept for the next run: a new thread costs its stack and LibTorch's
    // thread-local storage, set up and paged in again.
    while (workers_.size() < episodes.size()) workers_.emplace_back([this] { work(); });
    if (answered_.size() < episodes.size()) answered_ = std::vector<std::condition_variable>(episodes.size());
    for (std::size_t i = 0; i < episodes.size(); ++i)
      jobs_.push_back([&, i] {
        try {
          Handle llm(*this, i);
          episodes[i](llm);
        } catch (...) {
          errors[i] = std::current_exception();
        }
        std::lock_guard<std::mutex> lock(mutex_);
        --live_;  // the last touch of this run's state: run() may return once live_ is 0
        if (batch_ready()) to_batcher_.notify_one();
      });
  }
  to_workers_.notify_all();
  std::unique_lock<std::mutex> lock(mutex_);
  while (live_ > 0) {
    // Wait until every live episode is waiting for the policy, then serve them all at once.
    to_batcher_.wait(lock, [&] { return batch_ready(); });
    if (pending_.empty()) continue;
    std::vector<Request*> batch;
    batch.swap(pending_);
    lock.unlock();
    serve(batch);
    lock.lock();
    std::vector<std::size_t> answered;
    for (Request* r : batch) {
      r->done = true;  // r may be gone as soon as the lock is released
      answered.push_back(r->episode);
    }
    // Each episode is woken by its own answer (no herd of 128 threads), once the lock is free
    // for it to take.
    lock.unlock();
    for (std::size_t episode : answered) answered_[episode].notify_one();
    lock.lock();
  }
  return errors;
}

}  // namespace arclight::agent
