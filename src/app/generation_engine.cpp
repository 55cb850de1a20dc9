#include "generation_engine.hpp"

#include <algorithm>
#include <chrono>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/serve/http_server.hpp"

namespace arclight::app {

GenerationEngine::GenerationEngine(model::Policy& policy, int rows)
    : policy_(policy),
      batch_(std::make_unique<model::DecodeBatch>(policy, rows)),
      rows_(rows),
      vocab_(policy.vocab_size()),
      max_seq_(policy.architecture().max_seq) {}

// What DecodeBatch would refuse on the owning thread is refused here, where the caller can answer 400 and a response's
// other choices are not started (a bad top_logprobs or top_p was refused there, a 500, its other choices run).
void GenerationEngine::check(const serve::GenerationRequest& request) const {
  model::check_request(sequence_of(request), policy_.architecture());
}

model::SequenceRequest GenerationEngine::sequence_of(serve::GenerationRequest request) const {
  model::SequenceRequest sequence;
  // Never past the context: the last position ends the answer with finish reason "length".
  sequence.max_new_tokens = std::min(request.max_tokens, max_seq_ - static_cast<int>(request.prompt.size()));
  sequence.prompt = std::move(request.prompt);
  sequence.sampling = {request.temperature, request.top_k, request.top_p};
  // A stop token the model cannot draw (the template's, with a smaller agent.vocab_size) never ends anything.
  for (std::int32_t id : request.stop_tokens)
    if (id >= 0 && id < vocab_) sequence.stop_tokens.push_back(id);
  sequence.seed = request.seed;
  sequence.top_logprobs = request.top_logprobs;
  return sequence;
}

std::vector<std::shared_ptr<serve::GenerationStream>> GenerationEngine::submit_group(
    std::vector<serve::GenerationRequest> requests) {
  for (const serve::GenerationRequest& request : requests) check(request);
  std::vector<std::shared_ptr<serve::GenerationStream>> streams;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Nothing would serve it (its reader would wait for ever, and the HTTP server's stop for that reader).
    if (closed_) throw serve::HttpError(503, "the runner is stopping: " + *closed_, "server_error");
    const std::uint64_t group = ++groups_;
    for (serve::GenerationRequest& request : requests) {
      streams.push_back(std::make_shared<serve::GenerationStream>());
      waiting_.push_back({std::move(request), streams.back(), group});
    }
  }
  arrived_.notify_one();
  return streams;
}

void GenerationEngine::resume(std::uint64_t policy_version) {
  version_ = policy_version;
  draining_ = false;
}

void GenerationEngine::wait_for_work(double seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!waiting_.empty() && !draining_) return;
  arrived_.wait_for(lock, std::chrono::duration<double>(seconds));
}

bool GenerationEngine::step() {
  drop_cancelled();
  admit();
  if (batch_->idle()) return false;
  std::vector<model::SequenceToken> tokens;
  try {
    tokens = batch_->step();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    fail_batch(what.substr(0, what.find('\n')));  // LibTorch's messages go on with a backtrace
    return true;
  }
  for (const model::SequenceToken& token : tokens) deliver(token);
  return true;
}

// A step that failed (out of memory: more rows or longer prompts than the device holds) may leave rows half joined:
// its requests end with the error and a new batch replaces it, so one bad step is not the end of the runner.
void GenerationEngine::fail_batch(const std::string& why) {
  log::error("a decode step failed; its ", live_.size(), " requests end with an error: ", why);
  for (auto& [sequence, stream] : live_) stream->finish(serve::Finish::error, "the decode step failed: " + why);
  live_.clear();
  // The old KV cache goes before the new one's comes; a new one that fails too throws on: the runner's end.
  batch_.reset();
  batch_ = std::make_unique<model::DecodeBatch>(policy_, rows_);
}

void GenerationEngine::admit() {
  // Only as many as there are free rows: a request waits here, not inside the batch, so that drain() holds it back.
  // While draining, only the rest of a response already begun: its choices all run on the version it began on.
  std::deque<Waiting> admitted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!waiting_.empty() && batch_->live() + batch_->queued() + admitted.size() < std::size_t(rows_) &&
           (!draining_ || waiting_.front().group == admitting_)) {
      admitting_ = waiting_.front().group;
      admitted.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
    }
    if (waiting_.empty() || waiting_.front().group != admitting_) admitting_.reset();  // that response is all in
  }
  for (auto& [request, stream, group] : admitted) {
    if (stream->cancelled()) {
      stream->finish(serve::Finish::cancelled);
      continue;
    }
    try {
      live_[batch_->add(sequence_of(std::move(request)))] = stream;
    } catch (const std::exception& e) {
      stream->finish(serve::Finish::error, e.what());
    }
  }
}

void GenerationEngine::close(const std::string& why) {
  std::deque<Waiting> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting.swap(waiting_);
    admitting_.reset();
    closed_ = why;
  }
  for (Waiting& entry : waiting) entry.stream->finish(serve::Finish::error, why);
  for (auto& [sequence, stream] : live_) {
    batch_->cancel(sequence);
    stream->finish(serve::Finish::error, why);
  }
  live_.clear();
}

void GenerationEngine::drop_cancelled() {
  for (auto it = live_.begin(); it != live_.end();) {
    if (it->second->cancelled()) {
      batch_->cancel(it->first);
      it->second->finish(serve::Finish::cancelled);
      it = live_.erase(it);
    } else {
      ++it;
    }
  }
}

void GenerationEngine::deliver(const model::SequenceToken& token) {
  const auto it = live_.find(token.sequence);
  if (it == live_.end()) return;
  it->second->push({token.token, token.logprob, token.untruncated_logprob, token.top}, version_);
  ++tokens_;
  if (token.finish == model::FinishReason::none) return;
  it->second->finish(token.finish == model::FinishReason::stop ? serve::Finish::stop : serve::Finish::length);
  live_.erase(it);
}

}  // namespace arclight::app
