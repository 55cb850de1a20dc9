#include "arclight/model/decode_batch.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "decoder.hpp"
#include "sampling.hpp"

namespace arclight::model {
namespace {

constexpr int most_top_logprobs = 20;

bool is_token(std::int32_t token, int vocab_size) { return token >= 0 && token < vocab_size; }

// The N most likely tokens of a distribution [1, vocab], most likely first.
std::vector<std::pair<std::int32_t, float>> most_likely(const torch::Tensor& logprobs, int n) {
  const auto [values, tokens] = logprobs.topk(std::min<std::int64_t>(n, logprobs.size(-1)), -1);  // a tiny vocabulary
  const auto on_host_values = values.cpu(), on_host_tokens = tokens.cpu();
  const auto value = on_host_values.accessor<float, 2>();
  const auto token = on_host_tokens.accessor<std::int64_t, 2>();
  std::vector<std::pair<std::int32_t, float>> out;
  for (std::int64_t i = 0; i < values.size(1); ++i)
    out.emplace_back(static_cast<std::int32_t>(token[0][i]), value[0][i]);
  return out;
}

torch::Tensor long_tensor(std::vector<std::int64_t> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return torch::from_blob(values.data(), {n}, torch::kLong).clone();
}

// Indices for index_select / index_copy_ on `like`'s device.
torch::Tensor index_on(const torch::Tensor& like, std::vector<std::int64_t> values) {
  return long_tensor(std::move(values)).to(like.device());
}

}  // namespace

void check_request(const SequenceRequest& r, const Architecture& a) {
  const auto refuse = [](const auto&... what) { throw UsageError(log::concat(what...)); };
  if (r.prompt.empty()) refuse("the prompt is empty");
  for (const std::int32_t token : r.prompt)
    if (!is_token(token, a.vocab_size)) refuse("prompt token ", token, " is outside the vocabulary of ", a.vocab_size);
  for (const std::int32_t token : r.stop_tokens)
    if (!is_token(token, a.vocab_size)) refuse("stop token ", token, " is outside the vocabulary of ", a.vocab_size);
  if (static_cast<std::int64_t>(r.prompt.size()) >= a.max_seq)
    refuse("a prompt of ", r.prompt.size(), " tokens leaves no room to answer (the model's context is ", a.max_seq,
           " tokens)");
  if (r.max_new_tokens < 1) refuse("max_new_tokens = ", r.max_new_tokens, " (at least 1)");
  if (r.top_logprobs < 0 || r.top_logprobs > most_top_logprobs)
    refuse("top_logprobs = ", r.top_logprobs, " (0..", most_top_logprobs, ")");
  const Sampling& s = r.sampling;
  if (!(std::isfinite(s.temperature) && s.temperature >= 0) || s.top_k < 0 || !(s.top_p > 0 && s.top_p <= 1))
    refuse("sampling needs temperature >= 0, top_k >= 0 and 0 < top_p <= 1");
}

struct DecodeBatch::Impl {
  struct Sequence {
    std::uint64_t id = 0;
    SequenceRequest request;
    std::optional<at::Generator> generator;  // its own when seeded, else the policy's
    std::int64_t length = 0;                 // prompt and drawn tokens; the last drawn is not in the cache yet
    int drawn = 0;
    std::int32_t last = 0;  // the token the next step feeds
  };

  Impl(Policy& policy, int max_sequences, std::int64_t prefill_scores)
      : prefill_scores(prefill_scores),
        decoder(policy.decoder()),
        shared_generator(policy.sampling_generator()),
        slots(decoder.new_cache(max_sequences, decoder.architecture().max_seq)),
        rows(static_cast<std::size_t>(max_sequences)) {}

  void advance_live(std::vector<SequenceToken>& out);
  void admit_queued(std::vector<SequenceToken>& out);
  void prefill(const std::vector<std::size_t>& group, std::vector<SequenceToken>& out);
  std::vector<std::vector<std::size_t>> draw_groups(const std::vector<std::size_t>& candidates) const;
  void draw_each(const std::vector<std::size_t>& candidates, const torch::Tensor& logits,
                 std::vector<SequenceToken>& out);
  void draw(const std::vector<std::size_t>& group, const torch::Tensor& logits, std::vector<SequenceToken>& out);
  SequenceToken record(std::size_t row, std::int32_t token, float logprob, float untruncated);
  FinishReason finish_of(const Sequence& s, std::int32_t token) const;

  const std::int64_t prefill_scores;  // DecodeBatch's constructor says
  Decoder& decoder;
  at::Generator& shared_generator;
  // A row per sequence: [rows, kv_heads, max_seq, head_dim] (a sliding window's layer: its ring, the window at most)
  KvCache slots;
  std::vector<std::optional<Sequence>> rows;  // a live sequence per row, none where the row is free
  std::deque<Sequence> queue;                 // added, waiting for a row
  std::uint64_t next_id = 1;
};

// One forward over rows 0 .. the last live one: live rows are kept low (a joiner takes the lowest free row), so the
// cache is sliced as a view, not gathered; a free row in between computes a throwaway token at position 0 (its
// cache is rewritten when a sequence next joins it, which happens after this forward).
void DecodeBatch::Impl::advance_live(std::vector<SequenceToken>& out) {
  std::vector<std::size_t> live;
  for (std::size_t r = 0; r < rows.size(); ++r)
    if (rows[r]) live.push_back(r);
  if (live.empty()) return;
  const std::size_t span = live.back() + 1;
  std::vector<std::int64_t> tokens(span, 0), positions(span, 0);
  std::int64_t end = 1;
  for (const std::size_t r : live) {
    tokens[r] = rows[r]->last;
    positions[r] = rows[r]->length - 1;
    end = std::max(end, rows[r]->length);
  }
  KvCache view = slots.rows(0, static_cast<std::int64_t>(span));
  const auto logits = decoder.forward(long_tensor(tokens).unsqueeze(1), long_tensor(positions), end, view).select(1, 0);
  std::vector<std::int64_t> at(live.begin(), live.end());
  draw_each(live, live.size() == span ? logits : logits.index_select(0, index_on(logits, std::move(at))), out);
}

// The rows given, grouped so that one draw_next serves each group (as positions in `candidates`): greedy rows
// together (they need no generator), unseeded rows of the same sampling together (they share the policy's
// generator); a seeded row draws alone from its own, whatever else runs.
std::vector<std::vector<std::size_t>> DecodeBatch::Impl::draw_groups(const std::vector<std::size_t>& candidates) const {
  const auto together = [](const Sequence& a, const Sequence& b) {
    const Sampling &x = a.request.sampling, &y = b.request.sampling;
    if (x.temperature <= 0 || y.temperature <= 0) return x.temperature <= 0 && y.temperature <= 0;
    return !a.generator && !b.generator && x.temperature == y.temperature && x.top_k == y.top_k && x.top_p == y.top_p;
  };
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Sequence& s = *rows[candidates[i]];
    const auto joins =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return together(*rows[candidates[g[0]]], s); });
    if (joins == groups.end()) {
      groups.push_back({i});
    } else {
      joins->push_back(i);
    }
  }
  return groups;
}

// Queued prompts take free rows and are prefilled, each giving its first token. Prompts of similar length share a
// forward (right-padded; at most half of its tokens padding, and attention scores within a budget, so that long
// prompts go one or a few at a time): a forward's fixed cost, not its tokens, is most of a short prompt's prefill.
void DecodeBatch::Impl::admit_queued(std::vector<SequenceToken>& out) {
  std::vector<std::size_t> joined;
  for (std::size_t r = 0; r < rows.size() && !queue.empty(); ++r) {
    if (rows[r]) continue;
    rows[r] = std::move(queue.front());
    queue.pop_front();
    rows[r]->length = static_cast<std::int64_t>(rows[r]->request.prompt.size());
    joined.push_back(r);
  }
  std::stable_sort(joined.begin(), joined.end(),
                   [&](std::size_t a, std::size_t b) { return rows[a]->length < rows[b]->length; });
  std::vector<std::size_t> group;
  std::int64_t tokens = 0;
  const std::int64_t heads = decoder.architecture().num_heads;
  for (const std::size_t r : joined) {
    const std::int64_t length = rows[r]->length;  // the longest so far: the group's padded length with it
    const auto rows_with_it = static_cast<std::int64_t>(group.size() + 1);
    const bool too_padded = rows_with_it * length > 2 * (tokens + length);
    const bool too_large = rows_with_it * heads * length * length > prefill_scores;
    if (!group.empty() && (too_padded || too_large)) {
      prefill(group, out);
      group.clear();
      tokens = 0;
    }
    group.push_back(r);
    tokens += length;
  }
  if (!group.empty()) prefill(group, out);
}

// One forward over the prompts of `group` (rows that just joined), right-padded into a cache of their own; the rows
// that go on after their first token keep their prompt's keys and values in the slots.
void DecodeBatch::Impl::prefill(const std::vector<std::size_t>& group, std::vector<SequenceToken>& out) {
  const auto n = static_cast<std::int64_t>(group.size());
  std::int64_t longest = 0;
  for (const std::size_t r : group) longest = std::max(longest, rows[r]->length);
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(n * longest), 0), last;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const auto& prompt = rows[group[i]]->request.prompt;
    std::copy(prompt.begin(), prompt.end(), tokens.begin() + static_cast<std::ptrdiff_t>(i) * longest);
    last.push_back(rows[group[i]]->length - 1);
  }
  KvCache fresh = decoder.new_cache(n, longest);
  const auto prompts = long_tensor(std::move(tokens)).view({n, longest});
  // A lone prompt too long for one forward's attention scores goes in chunks of queries, each attending to the cache
  // so far (a 32k-token prompt's scores, heads x length², would be hundreds of GB); only the last gives logits.
  const std::int64_t heads = decoder.architecture().num_heads;
  const std::int64_t chunk = n > 1 ? longest : std::max<std::int64_t>(1, prefill_scores / (heads * longest));
  std::int64_t begin = 0;
  for (; longest - begin > chunk; begin += chunk)
    decoder.forward_at(prompts.narrow(1, begin, chunk), long_tensor({chunk - 1}), &fresh);
  for (std::int64_t& position : last) position -= begin;
  const auto logits = decoder.forward_at(prompts.narrow(1, begin, longest - begin), long_tensor(last), &fresh);
  draw_each(group, logits, out);
  std::vector<std::int64_t> from, to;  // the rows still live after their first token
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (!rows[group[i]]) continue;
    from.push_back(static_cast<std::int64_t>(i));
    to.push_back(static_cast<std::int64_t>(group[i]));
  }
  if (from.empty()) return;
  const auto source = index_on(fresh.keys[0], std::move(from)), target = index_on(fresh.keys[0], std::move(to));
  for (std::size_t l = 0; l < slots.keys.size(); ++l) {
    const std::int64_t held = fresh.keys[l].size(2);  // longest, or a sliding window's ring
    slots.keys[l].narrow(2, 0, held).index_copy_(0, target, fresh.keys[l].index_select(0, source));
    slots.values[l].narrow(2, 0, held).index_copy_(0, target, fresh.values[l].index_select(0, source));
  }
}

// Draws the next token of every row in `candidates` from logits [candidates.size(), vocab] (row i's at i), one
// draw_next per draw group.
void DecodeBatch::Impl::draw_each(const std::vector<std::size_t>& candidates, const torch::Tensor& logits,
                                  std::vector<SequenceToken>& out) {
  for (const auto& members : draw_groups(candidates)) {
    std::vector<std::int64_t> at(members.begin(), members.end());
    std::vector<std::size_t> group;
    for (const std::size_t i : members) group.push_back(candidates[i]);
    draw(group, logits.index_select(0, index_on(logits, std::move(at))), out);
  }
}

// Draws the next token of each row of a group from its logits [group size, vocab].
void DecodeBatch::Impl::draw(const std::vector<std::size_t>& group, const torch::Tensor& logits,
                             std::vector<SequenceToken>& out) {
  Sequence& first = *rows[group[0]];
  const Draw next = draw_next(logits, first.request.sampling, first.generator ? *first.generator : shared_generator);
  // Each row's two log-probs [group, 2] in one copy from the device
  const auto tokens = next.tokens.cpu().contiguous();
  const auto logprobs = torch::cat({next.chosen(), next.chosen_untruncated()}, 1).cpu().contiguous();
  const float* logprob = logprobs.data_ptr<float>();
  for (std::size_t i = 0; i < group.size(); ++i) {
    const int top = rows[group[i]]->request.top_logprobs;
    const auto token = static_cast<std::int32_t>(tokens.data_ptr<std::int64_t>()[i]);
    out.push_back(record(group[i], token, logprob[2 * i], logprob[2 * i + 1]));
    if (top > 0) out.back().top = most_likely(next.logprobs.narrow(0, static_cast<std::int64_t>(i), 1), top);
  }
}

// The event of a row's new token (without top_logprobs); a sequence that ends frees its row.
SequenceToken DecodeBatch::Impl::record(std::size_t row, std::int32_t token, float logprob, float untruncated) {
  Sequence& s = *rows[row];
  SequenceToken event;
  event.sequence = s.id;
  event.token = token;
  event.logprob = logprob;
  event.untruncated_logprob = untruncated;
  s.last = token;
  ++s.length;
  ++s.drawn;
  event.finish = finish_of(s, token);
  if (event.finish != FinishReason::none) rows[row].reset();
  return event;
}

FinishReason DecodeBatch::Impl::finish_of(const Sequence& s, std::int32_t token) const {
  const auto& stop = s.request.stop_tokens;
  if (std::find(stop.begin(), stop.end(), token) != stop.end()) return FinishReason::stop;
  if (s.drawn >= s.request.max_new_tokens || s.length >= decoder.architecture().max_seq) return FinishReason::length;
  return FinishReason::none;
}

DecodeBatch::DecodeBatch(Policy& policy, int max_sequences, std::int64_t prefill_scores) {
  if (max_sequences < 1) throw UsageError(log::concat("DecodeBatch: max_sequences = ", max_sequences, " (at least 1)"));
  impl_ = std::make_unique<Impl>(policy, max_sequences, std::max<std::int64_t>(1, prefill_scores));
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
