#pragma once
// Test doubles for what the app gives the serve module (the engine, the tracer, the task backend) and a server with
// every route on a free port, for tests that speak real HTTP to it.
#include <algorithm>
#include <limits>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "arclight/serve/generator.hpp"
#include "arclight/serve/http_server.hpp"
#include "arclight/serve/openai_endpoint.hpp"
#include "arclight/serve/runner_api.hpp"
#include "arclight/serve/task_routes.hpp"
#include "arclight/text/chat_template.hpp"
#include "arclight/text/tokenizer.hpp"

namespace arclight::serve::testing {

using json = nlohmann::json;

inline const std::string token = "secret-token";
inline constexpr std::uint64_t policy_version = 7;

// The engine's double: answers `answer` token by token on a thread of its own, ending at max_tokens (length), at
// a stop token (stop, the token kept) or at the answer's end (stop). Token i has log-prob -(i+1)/8 and alternatives
// id+1, id+2, ... each one less likely. It keeps the requests it got, and how many tokens each one's stream was given.
class ScriptedGenerator : public Generator {
 public:
  std::vector<std::int32_t> answer;
  std::vector<std::vector<std::int32_t>> answer_of_choice;  // where given: choice i of a group answers this instead
  std::chrono::milliseconds per_token{0};

  ~ScriptedGenerator() override {
    for (std::thread& t : threads_) t.join();
  }
  void answer_text(const std::string& text) { answer.assign(text.begin(), text.end()); }

  std::vector<std::shared_ptr<GenerationStream>> submit_group(std::vector<GenerationRequest> requests) override {
    for (const GenerationRequest& request : requests)
      if (request.prompt.empty()) throw UsageError("an empty prompt");
    std::vector<std::shared_ptr<GenerationStream>> streams;
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      auto stream = streams.emplace_back(std::make_shared<GenerationStream>());
      requests_.push_back(requests[i]);
      pushed_.push_back(0);
      const std::vector<std::int32_t>& scripted = i < answer_of_choice.size() ? answer_of_choice[i] : answer;
      threads_.emplace_back([this, stream, request = requests[i], answer = scripted, k = pushed_.size() - 1] {
        run(*stream, request, answer, k);
      });
    }
    return streams;
  }
  int tokens_pushed(std::size_t request) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pushed_.at(request);
  }

  std::vector<GenerationRequest> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  int cancelled_streams() const { return cancelled_; }

 private:
  void run(GenerationStream& stream, const GenerationRequest& request, const std::vector<std::int32_t>& answer,
           std::size_t k) {
    for (std::size_t i = 0; i < answer.size(); ++i) {
      if (stream.cancelled()) {
        ++cancelled_;
        return stream.finish(Finish::cancelled);
      }
      if (static_cast<int>(i) == request.max_tokens) return stream.finish(Finish::length);
      std::this_thread::sleep_for(per_token);
      // The untruncated log-prob lower, as where top-p cut some of the distribution away
      StreamedToken t{answer[i], -float(i + 1) / 8, -float(i + 1) / 4, {}};
      // Alternatives past the second were cut by top-p: -inf
      for (int k = 1; k <= request.top_logprobs; ++k)
        t.top.emplace_back(answer[i] + k, k <= 2 ? t.logprob - k : -std::numeric_limits<float>::infinity());
      stream.push(t, policy_version);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++pushed_[k];
      }
      for (const std::int32_t stop : request.stop_tokens)
        if (stop == answer[i]) return stream.finish(Finish::stop);
    }
    stream.finish(Finish::stop);
  }

  mutable std::mutex mutex_;
  std::vector<GenerationRequest> requests_;
  std::vector<int> pushed_;
  std::vector<std::thread> threads_;
  std::atomic<int> cancelled_{0};
};

// Runs attempt 5 of rollout 3 only; keeps what it records, each after `record_delay` (a store taking its time).
class RecordingTracer : public CallTracer {
 public:
  std::chrono::milliseconds record_delay{0};
  bool running_here(store::RolloutId rollout, store::AttemptId attempt) override {
    return rollout == 3 && attempt == 5;
  }
  void record(TracedCall call) override {
    std::this_thread::sleep_for(record_delay);
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(std::move(call));
  }
  std::vector<TracedCall> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<TracedCall> calls_;
};

// One queued rollout (3, attempt 5, input {"secret": 42}); spans and attempt updates only for that attempt.
class FakeTaskBackend : public TaskBackend {
 public:
  std::vector<store::AttemptedRollout> queue;
  std::vector<store::Span> spans;
  std::vector<double> waits;
  std::vector<std::string> callers;

  FakeTaskBackend() {
    store::AttemptedRollout task;
    task.rollout.id = 3;
    task.rollout.input = R"({"secret": 42})";
    task.rollout.status = store::RolloutStatus::preparing;
    task.rollout.start_time = 100;
    task.attempt = {5, 3, 1, "worker-a", store::AttemptStatus::preparing, 101, 0, 0};
    queue.push_back(task);
  }
  std::vector<store::AttemptedRollout> dequeue(const std::string& worker, const std::string& caller, std::size_t limit,
                                               double wait, const std::function<bool()>&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    waits.push_back(wait);
    callers.push_back(caller);
    std::vector<store::AttemptedRollout> out;
    while (!queue.empty() && out.size() < limit) {
      out.push_back(queue.back());
      out.back().attempt.worker_id = worker;
      queue.pop_back();
    }
    return out;
  }
  bool add_span(store::Span span) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (span.rollout_id != 3 || span.attempt_id != 5) return false;
    spans.push_back(std::move(span));
    return true;
  }
  std::optional<store::Attempt> update_attempt(store::RolloutId rollout, store::AttemptId attempt,
                                               store::AttemptStatus status) override {
    if (rollout != 3 || (attempt != 5 && attempt != store::latest_attempt)) return std::nullopt;
    return store::Attempt{5, 3, 1, "worker-a", status, 101, store::is_final(status) ? 150.0 : 0.0, 149};
  }
  store::Worker heartbeat(const std::string& worker, const std::string& caller) override {
    std::lock_guard<std::mutex> lock(mutex_);
    callers.push_back(caller);
    store::Worker w;
    w.id = caller.empty() ? worker : caller;
    w.heartbeats = 1;
    return w;
  }

 private:
  std::mutex mutex_;
};

inline HttpServerOptions test_options() {
  HttpServerOptions options;
  options.bearer_token = token;
  options.max_body_bytes = 64 << 10;
  options.worker_threads = 16;
  return options;
}

// A byte tokenizer with ChatML's special tokens: <|im_start|> 256, <|im_end|> 257, <|endoftext|> 258; with Mistral's
// template, its own after them: [TOOL_CALLS] 259, </s> 260, <s> 261.
inline std::unique_ptr<text::Tokenizer> test_tokenizer(std::string_view chat_template) {
  std::vector<std::string> specials = {"<|im_start|>", "<|im_end|>", "<|endoftext|>"};
  if (chat_template == "mistral-nemo") specials.insert(specials.end(), {"[TOOL_CALLS]", "</s>", "<s>"});
  return text::make_byte_tokenizer(specials);
}

struct Served {
  std::unique_ptr<text::Tokenizer> tokenizer;
  ScriptedGenerator generator;
  RecordingTracer tracer;
  FakeTaskBackend backend;
  HttpServer server;
  std::unique_ptr<httplib::Client> client;

  explicit Served(HttpServerOptions options = test_options(), int max_context = 1024,
                  std::string_view chat_template = "chatml", ReasoningParser reasoning_parser = ReasoningParser::none,
                  int vocab_size = 0)
      : tokenizer(test_tokenizer(chat_template)), server(std::move(options)) {
    const text::ChatTemplate chat = text::ChatTemplate::named(chat_template);
    // The template's stops, as served_model sets them, and <|endoftext|> as EOS where the template has none here
    // (llama3's names are not in this tokenizer).
    std::vector<text::TokenId> stops = chat.stop_ids(*tokenizer);
    if (std::find(stops.begin(), stops.end(), 258) == stops.end()) stops.push_back(258);
    ServedModel model{"tiny", tokenizer.get(), chat, max_context, stops, reasoning_parser, vocab_size};
    add_openai_routes(server, generator, std::move(model), &tracer);
    add_task_routes(server, backend, {0.25});
    server.start();
    client = std::make_unique<httplib::Client>("127.0.0.1", server.port());
    client->set_bearer_token_auth(token.c_str());
    client->set_read_timeout(std::chrono::seconds(10));
  }

  httplib::Result post(const std::string& path, const json& body, const httplib::Headers& headers = {}) {
    return client->Post(path.c_str(), headers, body.dump(), "application/json");
  }
  // The body of a 200 answer, parsed.
  json ok(const std::string& path, const json& body, const httplib::Headers& headers = {}) {
    auto result = post(path, body, headers);
    if (!result) throw std::runtime_error("no answer from " + path);
    if (result->status != 200)
      throw std::runtime_error(path + ": " + std::to_string(result->status) + " " + result->body);
    return json::parse(result->body);
  }
};

}  // namespace arclight::serve::testing
