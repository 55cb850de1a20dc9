#include "arclight/agent/episode_batcher.hpp"

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <map>
#include <memory>

namespace arclight::agent {
namespace ctx = boost::context;

namespace {
// Agents are shallow: their code, the tracer and the store client's encoding.
constexpr std::size_t episode_stack_bytes = 256 * 1024;
}  // namespace

// Stacks with a guard page (an overflow faults, not corrupts), kept for the next run's episodes: mapping, guarding and
// unmapping one per episode was a tenth of a runner's CPU time, in the kernel (the workstation demo: 256 episodes a
// step on each runner). One thread uses it: the batcher's.
struct EpisodeBatcher::StackPool {
  ctx::protected_fixedsize_stack make{episode_stack_bytes};
  std::vector<ctx::stack_context> free;
  std::size_t mapped = 0;  // stacks made, free or in use
  ~StackPool() {
    for (ctx::stack_context& stack : free) make.deallocate(stack);
  }
};

namespace {
// What a fiber takes its stack from and gives it back to (a handle: each fiber keeps a copy).
struct PooledStacks {
  EpisodeBatcher::StackPool* pool;
  ctx::stack_context allocate() {
    if (pool->free.empty()) {
      pool->free.reserve(++pool->mapped);  // room for its return: deallocate() may not throw
      return pool->make.allocate();
    }
    const ctx::stack_context stack = pool->free.back();
    pool->free.pop_back();
    return stack;
  }
  void deallocate(ctx::stack_context& stack) noexcept { pool->free.push_back(stack); }
};
}  // namespace

struct EpisodeBatcher::Episode {
  std::size_t index = 0;
  ctx::fiber fiber;   // the episode, suspended; empty once it has ended
  ctx::fiber caller;  // inside the episode: the batcher, to return to
  // Its pending call: set by generate(), answered by serve().
  const std::vector<std::int32_t>* prompt = nullptr;
  int max_new_tokens = 0;
  LlmResponse response;
  std::exception_ptr call_error;  // the forward pass failed: the episode sees the exception
  bool waiting = false;
};

namespace {
// The Llm an episode sees: generate() suspends the episode until the batcher has served it.
class Handle : public Llm {
 public:
  explicit Handle(EpisodeBatcher::Episode& episode) : episode_(episode) {}
  LlmResponse generate(const std::vector<std::int32_t>& prompt, int max_new_tokens) override {
    episode_.prompt = &prompt;
    episode_.max_new_tokens = max_new_tokens;
    episode_.waiting = true;
    episode_.caller = std::move(episode_.caller).resume();
    episode_.waiting = false;
    if (episode_.call_error) std::rethrow_exception(std::exchange(episode_.call_error, nullptr));
    return std::move(episode_.response);
  }

 private:
  EpisodeBatcher::Episode& episode_;
};
}  // namespace

EpisodeBatcher::EpisodeBatcher(model::Policy& policy, model::Sampling sampling, std::uint64_t policy_version)
    : policy_(policy), sampling_(sampling), version_(policy_version), stacks_(std::make_unique<StackPool>()) {}

EpisodeBatcher::~EpisodeBatcher() = default;

void EpisodeBatcher::serve(std::vector<Episode*>& waiting) {
  // One forward pass per group of equal prompt length and answer length, rows in episode order.
  std::map<std::pair<std::size_t, int>, std::vector<Episode*>> groups;
  for (Episode* e : waiting) groups[{e->prompt->size(), e->max_new_tokens}].push_back(e);
  for (auto& [shape, members] : groups) {
    std::vector<std::vector<std::int32_t>> prompts;
    for (Episode* e : members) prompts.push_back(*e->prompt);
    std::vector<model::Generation> out;
    try {
      out = policy_.generate(prompts, shape.second, sampling_);
    } catch (...) {
      for (Episode* e : members) e->call_error = std::current_exception();
      continue;
    }
    for (std::size_t i = 0; i < members.size(); ++i) {
      members[i]->response.tokens = std::move(out[i].tokens);
      members[i]->response.logprobs = std::move(out[i].logprobs);
      members[i]->response.policy_version = version_;
    }
    calls_ += members.size();
    ++batches_;
  }
}

std::vector<std::exception_ptr> EpisodeBatcher::run(const std::vector<std::function<void(Llm&)>>& episodes) {
  std::vector<std::exception_ptr> errors(episodes.size());
  std::vector<Episode> live(episodes.size());  // sized once: fibers hold pointers into it
  for (std::size_t i = 0; i < episodes.size(); ++i) {
    Episode& e = live[i];
    e.index = i;
    e.fiber =
        ctx::fiber(std::allocator_arg, PooledStacks{stacks_.get()}, [&e, &episodes, &errors](ctx::fiber&& caller) {
          e.caller = std::move(caller);
          try {
            Handle llm(e);
            episodes[e.index](llm);
          } catch (const ctx::detail::forced_unwind&) {
            throw;  // the batcher is unwinding this fiber's stack
          } catch (...) {
            errors[e.index] = std::current_exception();
          }
          return std::move(e.caller);
        });
  }
  // Run every episode to its first call, then serve the calls of all that wait and resume
  // them, until none is left.
  std::vector<Episode*> runnable;
  for (Episode& e : live) runnable.push_back(&e);
  while (!runnable.empty()) {
    std::vector<Episode*> waiting;
    for (Episode* e : runnable) {
      e->fiber = std::move(e->fiber).resume();
      if (e->fiber) waiting.push_back(e);  // suspended in generate(); else it has ended
    }
    if (!waiting.empty()) serve(waiting);
    if (between_calls_) between_calls_();
    runnable.swap(waiting);
  }
  return errors;
}

}  // namespace arclight::agent
