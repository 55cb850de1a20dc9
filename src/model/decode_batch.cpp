#include "arclight/model/decode_batch.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <deque>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "decoder.hpp"
#include "sampling.hpp"

namespace arclight::model {
namespace {

constexpr int most_top_logprobs = 20;

bool is_token(std::int32_t token, int vocab_size) { return token >= 0 && token < vocab_size; }

// Refuses a request no step could serve, naming what is wrong.
void check_request(const SequenceRequest& r, const Architecture& a) {
  const auto refuse = [](const auto&... what) { throw UsageError(log::concat("DecodeBatch::add: ", what...)); };
  if (r.prompt.empty()) refuse("empty prompt");
  for (const std::int32_t token : r.prompt)
    if (!is_token(token, a.vocab_size)) refuse("prompt token ", token, " is outside the vocabulary of ", a.vocab_size);
  for (const std::int32_t token : r.stop_tokens)
    if (!is_token(token, a.vocab_size)) refuse("stop token ", token, " is outside the vocabulary of ", a.vocab_size);
  if (static_cast<std::int64_t>(r.prompt.size()) >= a.max_seq)
    refuse("a prompt of ", r.prompt.size(), " tokens leaves no room for a new one in model.max_seq = ", a.max_seq);
  if (r.max_new_tokens < 1) refuse("max_new_tokens = ", r.max_new_tokens, " (at least 1)");
  if (r.top_logprobs < 0 || r.top_logprobs > most_top_logprobs)
    refuse("top_logprobs = ", r.top_logprobs, " (0..", most_top_logprobs, ")");
  const Sampling& s = r.sampling;
  if (s.temperature < 0 || s.top_k < 0 || !(s.top_p > 0 && s.top_p <= 1))
    refuse("sampling needs temperature >= 0, top_k >= 0 and 0 < top_p <= 1");
}

// The N most likely tokens of a distribution [1, vocab], most likely first.
std::vector<std::pair<std::int32_t, float>> most_likely(const torch::Tensor& logprobs, int n) {
  const auto [values, tokens] = logprobs.topk(n, -1);
  std::vector<std::pair<std::int32_t, float>> out;
  for (int i = 0; i < n; ++i)
    out.emplace_back(static_cast<std::int32_t>(tokens[0][i].item<std::int64_t>()), values[0][i].item<float>());
  return out;
}

torch::Tensor long_tensor(std::vector<std::int64_t> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return torch::from_blob(values.data(), {n}, torch::kLong).clone();
}

}  // namespace

struct DecodeBatch::Impl {
  struct Sequence {
    std::uint64_t id = 0;
    SequenceRequest request;
    std::optional<at::Generator> generator;  // its own when seeded, else the policy's
    std::int64_t length = 0;                 // prompt and drawn tokens; the last drawn is not in the cache yet
    int drawn = 0;
    std::int32_t last = 0;  // the token the next step feeds
  };

  Impl(Policy& policy, int max_sequences)
      : decoder(policy.decoder()),
        shared_generator(policy.sampling_generator()),
        slots(decoder.new_cache(max_sequences, decoder.architecture().max_seq)),
        rows(static_cast<std::size_t>(max_sequences)) {}

  void advance_live(std::vector<SequenceToken>& out);
  void admit_queued(std::vector<SequenceToken>& out);
  SequenceToken draw(std::size_t row, const torch::Tensor& logits);
  FinishReason finish_of(const Sequence& s, std::int32_t token) const;

  Decoder& decoder;
  at::Generator& shared_generator;
  KvCache slots;                              // a row per sequence: [rows, kv_heads, max_seq, head_dim]
  std::vector<std::optional<Sequence>> rows;  // a live sequence per row, none where the row is free
  std::deque<Sequence> queue;                 // added, waiting for a row
  std::uint64_t next_id = 1;
};

// One forward over rows 0 .. the last live one: live rows are kept low (a joiner takes the lowest free row), so the
// cache is sliced as a view, not gathered; a free row in between computes a throwaway token at position 0 (its
// cache is rewritten when a sequence next joins it, which happens after this forward).
void DecodeBatch::Impl::advance_live(std::vector<SequenceToken>& out) {
  const auto last_live = std::find_if(rows.rbegin(), rows.rend(), [](const auto& r) { return r.has_value(); });
  if (last_live == rows.rend()) return;
  const auto span = static_cast<std::size_t>(rows.rend() - last_live);
  std::vector<std::int64_t> tokens(span, 0), positions(span, 0);
  std::int64_t end = 1;
  for (std::size_t r = 0; r < span; ++r) {
    if (!rows[r]) continue;
    tokens[r] = rows[r]->last;
    positions[r] = rows[r]->length - 1;
    end = std::max(end, rows[r]->length);
  }
  KvCache view = slots.rows(0, static_cast<std::int64_t>(span));
  const auto logits = decoder.forward(long_tensor(tokens).unsqueeze(1), long_tensor(positions), end, view).select(1, 0);
  for (std::size_t r = 0; r < span; ++r)
    if (rows[r]) out.push_back(draw(r, logits.narrow(0, static_cast<std::int64_t>(r), 1)));
}

// Prefills queued prompts into free rows, each giving its first token.
void DecodeBatch::Impl::admit_queued(std::vector<SequenceToken>& out) {
  while (!queue.empty()) {
    const auto free = std::find_if(rows.begin(), rows.end(), [](const auto& r) { return !r.has_value(); });
    if (free == rows.end()) return;
    const auto r = static_cast<std::size_t>(free - rows.begin());
    rows[r] = std::move(queue.front());
    queue.pop_front();
    std::vector<std::int64_t> prompt(rows[r]->request.prompt.begin(), rows[r]->request.prompt.end());
    const auto length = static_cast<std::int64_t>(prompt.size());
    rows[r]->length = length;
    KvCache row = slots.rows(static_cast<std::int64_t>(r), 1);
    const auto logits = decoder.forward(long_tensor(std::move(prompt)).unsqueeze(0), &row);
    out.push_back(draw(r, logits.select(1, length - 1)));
  }
}

// Draws the row's next token from its logits [1, vocab]; a sequence that ends frees its row.
SequenceToken DecodeBatch::Impl::draw(std::size_t row, const torch::Tensor& logits) {
  Sequence& s = *rows[row];
  const Draw next = draw_next(logits, s.request.sampling, s.generator ? *s.generator : shared_generator);
  SequenceToken event;
  event.sequence = s.id;
  event.token = static_cast<std::int32_t>(next.tokens.item<std::int64_t>());
  event.logprob = next.chosen().item<float>();
  if (s.request.top_logprobs > 0) event.top = most_likely(next.logprobs, s.request.top_logprobs);
  s.last = event.token;
  ++s.length;
  ++s.drawn;
  event.finish = finish_of(s, event.token);
  if (event.finish != FinishReason::none) rows[row].reset();
  return event;
}

FinishReason DecodeBatch::Impl::finish_of(const Sequence& s, std::int32_t token) const {
  const auto& stop = s.request.stop_tokens;
  if (std::find(stop.begin(), stop.end(), token) != stop.end()) return FinishReason::stop;
  if (s.drawn >= s.request.max_new_tokens || s.length >= decoder.architecture().max_seq) return FinishReason::length;
  return FinishReason::none;
}

DecodeBatch::DecodeBatch(Policy& policy, int max_sequences) {
  if (max_sequences < 1) throw UsageError(log::concat("DecodeBatch: max_sequences = ", max_sequences, " (at least 1)"));
  impl_ = std::make_unique<Impl>(policy, max_sequences);
}

DecodeBatch::~DecodeBatch() = default;

std::uint64_t DecodeBatch::add(SequenceRequest request) {
  check_request(request, impl_->decoder.architecture());
  Impl::Sequence s;
  s.id = impl_->next_id++;
  if (request.seed) s.generator = at::detail::createCPUGenerator(*request.seed);
  s.request = std::move(request);
  impl_->queue.push_back(std::move(s));
  return impl_->queue.back().id;
}

void DecodeBatch::cancel(std::uint64_t sequence) {
  auto& queue = impl_->queue;
  queue.erase(std::remove_if(queue.begin(), queue.end(), [&](const auto& s) { return s.id == sequence; }), queue.end());
  for (auto& row : impl_->rows)
    if (row && row->id == sequence) row.reset();
}

std::vector<SequenceToken> DecodeBatch::step() {
  torch::NoGradGuard no_grad;
  std::vector<SequenceToken> out;
  impl_->advance_live(out);  // before admitting: a joiner's prefill must not be overwritten by a free row's step
  impl_->admit_queued(out);
  return out;
}

std::size_t DecodeBatch::live() const {
  return static_cast<std::size_t>(
      std::count_if(impl_->rows.begin(), impl_->rows.end(), [](const auto& r) { return r.has_value(); }));
}

std::size_t DecodeBatch::queued() const { return impl_->queue.size(); }

}  // namespace arclight::model
