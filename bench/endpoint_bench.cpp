// scripts/bench.sh endpoint: the OpenAI-compatible endpoint under load against the same work done in-process.
// A running `arclight serve CONFIG` (the server, a process of its own) gets CLIENTS concurrent streamed completions
// (PROMPT tokens in, NEW tokens out, seeded sampling); the baseline is one DecodeBatch in this process decoding the
// same CLIENTS sequences with the same model. Also: time to first token (p50, p99), and one request with a one-token
// answer against one in-process DecodeBatch step.
// Usage: bench_endpoint CONFIG URL TOKEN CLIENTS PROMPT NEW. Prints one JSON line.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "arclight/app/cli.hpp"
#include "arclight/model/decode_batch.hpp"
#include "arclight/text/chat_template.hpp"
#include "arclight/text/tokenizer.hpp"

using namespace arclight;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<std::vector<std::int32_t>> prompts_of(int count, int length) {
  std::mt19937 rng(7);
  std::vector<std::vector<std::int32_t>> prompts(count);
  for (auto& p : prompts)
    for (int i = 0; i < length; ++i) p.push_back(static_cast<std::int32_t>(rng() % 256));
  return prompts;
}

// In-process: every prompt added to one DecodeBatch at once, stepped until all have their tokens.
double in_process_tokens_per_second(model::Policy& policy, const std::vector<std::vector<std::int32_t>>& prompts,
                                    int new_tokens, const std::vector<std::int32_t>& stop_tokens, std::size_t& tokens) {
  model::DecodeBatch batch(policy, static_cast<int>(prompts.size()));
  const auto start = Clock::now();
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    model::SequenceRequest r;
    r.prompt = prompts[i];
    r.max_new_tokens = new_tokens;
    r.seed = i;
    r.stop_tokens = stop_tokens;
    batch.add(r);
  }
  tokens = 0;
  while (!batch.idle()) tokens += batch.step().size();
  return tokens / seconds_since(start);
}

// In-process: one sequence of one token, its whole life (add, prefill, draw), best of `repeats`.
double in_process_one_token_seconds(model::Policy& policy, const std::vector<std::int32_t>& prompt, int repeats) {
  model::DecodeBatch batch(policy, 1);
  double best = 1e9;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    model::SequenceRequest r;
    r.prompt = prompt;
    r.max_new_tokens = 1;
    batch.add(r);
    while (!batch.idle()) batch.step();
    best = std::min(best, seconds_since(start));
  }
  return best;
}

std::string completion_body(const std::vector<std::int32_t>& prompt, int new_tokens, bool stream, std::uint64_t seed) {
  std::string ids;
  for (std::int32_t id : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  return "{\"model\":\"bench\",\"prompt\":[" + ids + "],\"max_tokens\":" + std::to_string(new_tokens) +
         ",\"temperature\":1,\"seed\":" + std::to_string(seed) + ",\"stream\":" + (stream ? "true" : "false") + "}";
}

struct Host {
  std::string host;
  int port;
  std::string token;
};

Host host_of(const std::string& url, const std::string& token) {  // http://HOST:PORT/v1
  const auto hs = url.find("//") + 2, colon = url.find(':', hs), slash = url.find('/', colon);
  return {url.substr(hs, colon - hs), std::stoi(url.substr(colon + 1, slash - colon - 1)), token};
}

// One streamed completion: the seconds to its first token and the tokens it got (SSE chunks carrying token_ids).
std::pair<double, int> stream_one(const Host& h, const std::string& body) {
  httplib::Client client(h.host, h.port);
  client.set_tcp_nodelay(true);  // as curl, Python's http.client (one send) and Node's clients do
  client.set_read_timeout(600, 0);
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.headers = {{"Authorization", "Bearer " + h.token}};
  request.set_header("Content-Type", "application/json");
  request.body = body;
  const auto start = Clock::now();
  double first = -1;
  int tokens = 0;
  std::string pending;
  request.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
    pending.append(data, size);
    for (std::size_t end; (end = pending.find("\n\n")) != std::string::npos; pending.erase(0, end + 2)) {
      const std::string event = pending.substr(0, end);
      const auto ids = event.find("\"token_ids\":[");
      if (ids == std::string::npos) continue;
      const auto close = event.find(']', ids);
      const std::string list = event.substr(ids + 13, close - ids - 13);
      if (list.empty()) continue;
      if (first < 0) first = seconds_since(start);
      tokens += static_cast<int>(std::count(list.begin(), list.end(), ',')) + 1;
    }
    return true;
  };
  httplib::Response response;
  httplib::Error error;
  if (!client.send(request, response, error) || response.status != 200)
    throw std::runtime_error("a streamed completion failed: " + httplib::to_string(error) + " " +
                             std::to_string(response.status));
  return {first, tokens};
}

double percentile(std::vector<double> xs, double p) {
  std::sort(xs.begin(), xs.end());
  return xs[std::min(xs.size() - 1, static_cast<std::size_t>(p * xs.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: bench_endpoint CONFIG URL TOKEN CLIENTS PROMPT NEW\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  const Config config = app::config_from_toml(std::string(std::istreambuf_iterator<char>(in), {}));
  const Host host = host_of(argv[2], argv[3]);
  const int clients = std::stoi(argv[4]), prompt_length = std::stoi(argv[5]), new_tokens = std::stoi(argv[6]);
  const auto prompts = prompts_of(clients, prompt_length);

  model::Policy policy(config.model, static_cast<int>(text::make_scratch_chat_tokenizer()->vocab_size()),
                       config.run.seed);

  // The endpoint ends a sequence at the template's stop tokens: so does the baseline, which then decodes the very
  // sequences the server does (the same weights from run.seed, the same seeds).
  const auto tokenizer = text::make_scratch_chat_tokenizer();
  std::size_t local_tokens = 0;
  const double local_rate = in_process_tokens_per_second(
      policy, prompts, new_tokens, text::ChatTemplate::named("chatml").stop_ids(*tokenizer), local_tokens);
  const double local_one = in_process_one_token_seconds(policy, prompts[0], 20);

  std::vector<double> first_token(clients);
  std::vector<int> tokens(clients);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&, i] {
      std::tie(first_token[i], tokens[i]) = stream_one(host, completion_body(prompts[i], new_tokens, true, i));
    });
  for (auto& t : threads) t.join();
  const double served_seconds = seconds_since(start);
  int served_tokens = 0;
  for (int t : tokens) served_tokens += t;
  const double served_rate = served_tokens / served_seconds;
  if (static_cast<std::size_t>(served_tokens) != local_tokens) {  // else the ratio compares different work
    std::fprintf(stderr,
                 "bench_endpoint: the endpoint produced %d tokens, the in-process batch %zu: not the same "
                 "sequences (weights, seeds or stop tokens differ)\n",
                 served_tokens, local_tokens);
    return 1;
  }

  // One request, one token, on a kept-alive connection: best of 20.
  httplib::Client one(host.host, host.port);
  one.set_keep_alive(true);
  // Without it the library's client holds a request's body back until the headers' ACK, which the server's kernel
  // delays: 4 to 6 ms more a request on loopback (2026-12-03).
  one.set_tcp_nodelay(true);
  double served_one = 1e9;
  for (int i = 0; i < 20; ++i) {
    const auto t = Clock::now();
    auto r = one.Post("/v1/completions", {{"Authorization", "Bearer " + host.token}},
                      completion_body(prompts[0], 1, false, i), "application/json");
    if (!r || r->status != 200) throw std::runtime_error("a one-token completion failed");
    served_one = std::min(served_one, seconds_since(t));
  }
  std::printf(
      "{\"clients\": %d, \"prompt_tokens\": %d, \"new_tokens\": %d, \"served_tokens\": %d, \"in_process_tokens\": %zu, "
      "\"tokens_per_s\": %.1f, \"in_process_tokens_per_s\": %.1f, \"throughput_ratio\": %.3f, "
      "\"ttft_p50_ms\": %.1f, \"ttft_p99_ms\": %.1f, \"one_token_ms\": %.2f, \"one_token_in_process_ms\": %.2f, "
      "\"one_token_overhead_ms\": %.2f}\n",
      clients, prompt_length, new_tokens, served_tokens, local_tokens, served_rate, local_rate,
      served_rate / local_rate, 1e3 * percentile(first_token, 0.5), 1e3 * percentile(first_token, 0.99),
      1e3 * served_one, 1e3 * local_one, 1e3 * (served_one - local_one));
  return 0;
}
