#include "arclight/serve/generator.hpp"

namespace arclight::serve {

void GenerationStream::push(StreamedToken token, std::uint64_t policy_version) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finish_ != Finish::running) return;  // the engine's late token after the end: dropped
    pending_.push_back(std::move(token));
    version_ = policy_version;
  }
  changed_.notify_all();
}

void GenerationStream::finish(Finish reason, std::string error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finish_ != Finish::running) return;  // finished once
    finish_ = reason == Finish::running ? Finish::error : reason;
    error_ = std::move(error);
  }
  changed_.notify_all();
}

bool GenerationStream::next(std::vector<StreamedToken>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return !pending_.empty() || finish_ != Finish::running; });
  for (StreamedToken& token : pending_) out.push_back(std::move(token));
  const bool had_tokens = !pending_.empty();
  pending_.clear();
  return had_tokens || finish_ == Finish::running;
}

void GenerationStream::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
}

bool GenerationStream::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

Finish GenerationStream::finish_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finish_;
}

std::string GenerationStream::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

std::uint64_t GenerationStream::policy_version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return version_;
}

std::shared_ptr<GenerationStream> Generator::submit(GenerationRequest request) {
  std::vector<GenerationRequest> one;
  one.push_back(std::move(request));
  return submit_group(std::move(one)).front();
}

}  // namespace arclight::serve
