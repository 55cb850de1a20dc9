// In-process store throughput and memory per span.
// Mix per rollout: enqueue, dequeue, 10 add_span (8 attributes of 64 characters each), succeeded.
#include <dlfcn.h>
#include <malloc.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "arclight/store/memory_store.hpp"

using namespace arclight;
using namespace arclight::store;

namespace {
Span make_span(int i) {
  Span s;
  s.name = "llm.generate";
  s.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  s.span_id = "00f067aa0ba902b7";
  for (int k = 0; k < 8; ++k)
    s.attributes.push_back({"attr" + std::to_string(k), std::string(64, char('a' + (i + k) % 26))});
  return s;
}
std::size_t payload_bytes(const Span& s) {
  std::size_t n = s.name.size() + s.trace_id.size() + s.span_id.size();
  for (const Attribute& a : s.attributes) n += a.key.size() + std::get<std::string>(a.value).size();
  return n;
}
// Bytes allocated and not freed: jemalloc's count where it is the malloc (the binary's), else glibc's.
std::size_t heap_in_use() {
  using Mallctl = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
  if (auto mallctl = reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"))) {
    std::uint64_t epoch = 1;  // its statistics are refreshed at a new epoch
    std::size_t size = sizeof epoch, allocated = 0;
    mallctl("epoch", &epoch, &size, &epoch, size);
    size = sizeof allocated;
    if (mallctl("stats.allocated", &allocated, &size, nullptr, 0) == 0) return allocated;
  }
  return mallinfo2().uordblks;
}
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int main(int argc, char** argv) {
  const int rollouts = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int spans_per_rollout = 10;
  SystemClock clock;
  MemoryStore store(clock);

  const std::size_t heap_before = heap_in_use();
  // Spans are built before the clock starts: this measures the store, not std::string.
  std::vector<std::vector<Span>> spans(rollouts);
  for (int r = 0; r < rollouts; ++r)
    for (int i = 0; i < spans_per_rollout; ++i) spans[r].push_back(make_span(i));
  const std::size_t payload = payload_bytes(spans[0][0]);

  auto start = std::chrono::steady_clock::now();
  std::uint64_t ops = 0;
  AttemptUpdate done;
  done.status = AttemptStatus::succeeded;
  for (int r = 0; r < rollouts; ++r) {
    NewRollout task;
    task.input = "task";
    store.enqueue(std::move(task));
    AttemptedRollout ar = *store.dequeue("bench");
    for (Span& s : spans[r]) {
      s.rollout_id = ar.rollout.id;
      s.attempt_id = ar.attempt.id;
      store.add_span(std::move(s));
    }
    store.update_attempt(ar.rollout.id, ar.attempt.id, done);
    ops += 3 + spans_per_rollout;
  }
  const double elapsed = seconds_since(start);
  spans.clear();
  spans.shrink_to_fit();
  const std::size_t heap_after = heap_in_use();
  const Statistics stats = store.statistics();
  const double per_span = double(heap_after - heap_before) / double(stats.spans);
  const double ops_per_s = ops / elapsed;
  std::printf("in-process: %llu ops in %.3f s = %.0f ops/s (target 250000: %.2fx)\n", (unsigned long long)ops, elapsed,
              ops_per_s, ops_per_s / 250000);
  std::printf("memory: %.0f bytes per stored span (rollouts and attempts included) for %zu payload bytes: %.2fx\n",
              per_span, payload, per_span / payload);
  std::printf(
      "{\"local_ops_per_s\": %.0f, \"local_ratio_to_target\": %.3f, \"bytes_per_span\": %.0f, "
      "\"payload_bytes_per_span\": %zu, \"memory_overhead\": %.3f}\n",
      ops_per_s, ops_per_s / 250000, per_span, payload, per_span / payload);
  return 0;
}
