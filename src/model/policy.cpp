#include "arclight/model/policy.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::model {
namespace {

// Keys and values of every layer for a batch: [batch, heads, capacity, head_dim] each.
struct KvCache {
  std::vector<torch::Tensor> keys, values;
  std::int64_t length = 0;
};

struct Block : torch::nn::Module {
  Block(int d_model, int d_ff) {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})));
    qkv = register_module("qkv", torch::nn::Linear(d_model, 3 * d_model));
    proj = register_module("proj", torch::nn::Linear(d_model, d_model));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})));
    fc1 = register_module("fc1", torch::nn::Linear(d_model, d_ff));
    fc2 = register_module("fc2", torch::nn::Linear(d_ff, d_model));
  }
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
};

}  // namespace

struct Policy::Impl : torch::nn::Module {
  Impl(const ModelConfig& c, int vocab) : config(c), vocab_size(vocab) {
    if (c.d_model % c.n_heads != 0 || (c.d_model / c.n_heads) % 2 != 0)
      throw UsageError(log::concat("model.d_model = ", c.d_model, " must split into model.n_heads = ", c.n_heads,
                                   " heads of an even size"));
    head_dim = c.d_model / c.n_heads;
    embed = register_module("embed", torch::nn::Embedding(vocab, c.d_model));
    if (c.positions == Positions::learned)
      position = register_module("position", torch::nn::Embedding(c.max_seq, c.d_model));
    for (int l = 0; l < c.n_layers; ++l)
      blocks.push_back(register_module("block" + std::to_string(l), std::make_shared<Block>(c.d_model, c.d_ff)));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
    head = register_module("head", torch::nn::Linear(c.d_model, vocab));
    // Rotary tables: angle(position, i) = position / 10000^(2i / head_dim).
    auto inv_freq = torch::pow(10000.0, -torch::arange(0, head_dim, 2, torch::kFloat) / head_dim);
    auto angles = torch::outer(torch::arange(c.max_seq, torch::kFloat), inv_freq);
    cos_table = angles.cos();
    sin_table = angles.sin();
    // Gradients exist from the start as views of one flat tensor: their buffers are stable and
    // side by side, so the reducer all-reduces them in place (autograd accumulates into them).
    std::int64_t total = 0;
    for (auto& p : parameters()) total += p.numel();
    flat_grad = torch::zeros({total});
    std::int64_t offset = 0;
    for (auto& p : parameters()) {
      p.mutable_grad() = flat_grad.narrow(0, offset, p.numel()).view_as(p);
      offset += p.numel();
    }
  }

  torch::Tensor rotate(const torch::Tensor& x, std::int64_t start) const {
    const std::int64_t t = x.size(2), half = head_dim / 2;
    auto c = cos_table.narrow(0, start, t);
    auto s = sin_table.narrow(0, start, t);
    auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
    return torch::cat({x1 * c - x2 * s, x1 * s + x2 * c}, -1);
  }

  // tokens [B, T] int64 -> logits [B, T, vocab]. With a cache, the tokens continue it.
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache) {
    const std::int64_t b = tokens.size(0), t = tokens.size(1);
    const std::int64_t start = cache ? cache->length : 0;
    if (start + t > config.max_seq)
      throw Error(log::concat("sequence of ", start + t, " tokens exceeds model.max_seq = ", config.max_seq));
    auto x = embed(tokens);
    if (!position.is_empty()) x = x + position(torch::arange(start, start + t, torch::kLong));
    const std::int64_t span = start + t;
    // Query i (absolute start + i) sees keys 0 .. start + i.
    auto mask = torch::ones({t, span}, torch::kBool).triu(start + 1);
    const double scale = 1.0 / std::sqrt(double(head_dim));
    for (std::size_t l = 0; l < blocks.size(); ++l) {
      Block& blk = *blocks[l];
      auto qkv = blk.qkv(blk.ln1(x)).view({b, t, 3, config.n_heads, head_dim}).permute({2, 0, 3, 1, 4});
      auto q = qkv[0], k = qkv[1], v = qkv[2];
      if (position.is_empty()) {
        q = rotate(q, start);
        k = rotate(k, start);
      }
      if (cache) {
        cache->keys[l].narrow(2, start, t).copy_(k);
        cache->values[l].narrow(2, start, t).copy_(v);
        k = cache->keys[l].narrow(2, 0, span);
        v = cache->values[l].narrow(2, 0, span);
      }
      auto att = torch::matmul(q, k.transpose(-2, -1)) * scale;
      att = torch::softmax(att.masked_fill(mask, -std::numeric_limits<float>::infinity()), -1);
      auto y = torch::matmul(att, v).transpose(1, 2).reshape({b, t, config.d_model});
      x = x + blk.proj(y);
      x = x + blk.fc2(torch::gelu(blk.fc1(blk.ln2(x))));
    }
    if (cache) cache->length = span;
    return head(ln_f(x));
  }

  // Draws one token per row from the last position's logits.
  std::pair<torch::Tensor, torch::Tensor> sample(torch::Tensor logits, const Sampling& s) {
    logits = logits / std::max(s.temperature, 1e-6);
    if (s.top_k > 0 && s.top_k < vocab_size) {
      auto kth = std::get<0>(logits.topk(s.top_k, -1)).narrow(-1, s.top_k - 1, 1);
      logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
    }
    auto logp = torch::log_softmax(logits, -1);
    auto next = torch::multinomial(logp.exp(), 1, false, generator);
    return {next, logp.gather(1, next)};
  }

  ModelConfig config;
  int vocab_size;
  std::int64_t head_dim = 0;
  torch::nn::Embedding embed{nullptr}, position{nullptr};
  std::vector<std::shared_ptr<Block>> blocks;
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};
  torch::Tensor cos_table, sin_table;
  torch::Tensor flat_grad;
  at::Generator generator = at::detail::createCPUGenerator(1);
};

Policy::Policy(const ModelConfig& config, int vocab_size, std::uint64_t seed) {
  torch::manual_seed(seed);  // the same seed gives the same initial weights on every rank
  impl_ = std::make_unique<Impl>(config, vocab_size);
  seed_sampling(seed);
}

Policy::~Policy() = default;
Policy::Policy(Policy&&) noexcept = default;
Policy& Policy::operator=(Policy&&) noexcept = default;

const ModelConfig& Policy::config() const { return impl_->config; }
int Policy::vocab_size() const { return impl_->vocab_size; }

std::size_t Policy::parameter_count() const {
  std::size_t n = 0;
  for (const auto& p : impl_->parameters()) n += static_cast<std::size_t>(p.numel());
  return n;
}

void Policy::seed_sampling(std::uint64_t seed) { impl_->generator = at::detail::createCPUGenerator(seed); }

std::vector<Generation> Policy::generate(const std::vector<std::vector<std::int32_t>>& prompts, int max_new_tokens,
                                         const Sampling& sampling, bool use_cache) {
  torch::NoGradGuard no_grad;
  const std::int64_t b = static_cast<std::int64_t>(prompts.size());
  std::vector<Generation> out(prompts.size());
  if (b == 0 || max_new_tokens <= 0) return out;
  const std::int64_t length = static_cast<std::int64_t>(prompts[0].size());
  if (length == 0) throw Error("generate: empty prompt");
  std::vector<std::int64_t> flat;
  flat.reserve(b * length);
  for (const auto& p : prompts) {
    if (static_cast<std::int64_t>(p.size()) != length) throw Error("generate: prompts in one batch need equal lengths");
    flat.insert(flat.end(), p.begin(), p.end());
  }
  auto tokens = torch::from_blob(flat.data(), {b, length}, torch::kLong).clone();
  const std::int64_t total = length + max_new_tokens;
  if (total > impl_->config.max_seq)
    throw Error(log::concat("generate: ", total, " tokens exceed model.max_seq = ", impl_->config.max_seq));

  KvCache cache;
  if (use_cache) {
    for (int l = 0; l < impl_->config.n_layers; ++l) {
      cache.keys.push_back(torch::zeros({b, impl_->config.n_heads, total, impl_->head_dim}));
      cache.values.push_back(torch::zeros({b, impl_->config.n_heads, total, impl_->head_dim}));
    }
  }
  auto logits = impl_->forward(tokens, use_cache ? &cache : nullptr);
  std::vector<torch::Tensor> new_tokens, new_logprobs;
  for (int step = 0; step < max_new_tokens; ++step) {
    auto [next, logprob] = impl_->sample(logits.select(1, logits.size(1) - 1), sampling);
    new_tokens.push_back(next);
    new_logprobs.push_back(logprob);
    if (step + 1 == max_new_tokens) break;
    if (use_cache) {
      logits = impl_->forward(next, &cache);
    } else {
      tokens = torch::cat({tokens, next}, 1);
      logits = impl_->forward(tokens, nullptr);
    }
  }
  auto all_tokens = torch::cat(new_tokens, 1).to(torch::kInt).contiguous();
  auto all_logprobs = torch::cat(new_logprobs, 1).contiguous();
  const std::int32_t* tp = all_tokens.data_ptr<std::int32_t>();
  const float* lp = all_logprobs.data_ptr<float>();
  for (std::int64_t r = 0; r < b; ++r) {
    out[r].tokens.assign(tp + r * max_new_tokens, tp + (r + 1) * max_new_tokens);
    out[r].logprobs.assign(lp + r * max_new_tokens, lp + (r + 1) * max_new_tokens);
  }
  return out;
}

at::Tensor Policy::logits(const at::Tensor& tokens) const { return impl_->forward(tokens, nullptr); }

std::vector<at::Tensor> Policy::parameters() const { return impl_->parameters(); }

std::vector<std::string> Policy::parameter_names() const {
  std::vector<std::string> names;
  for (const auto& item : impl_->named_parameters()) names.push_back(item.key());
  return names;
}

std::vector<FloatBuffer> Policy::parameter_buffers() {
  std::vector<FloatBuffer> out;
  for (auto& p : impl_->parameters()) out.push_back({p.data_ptr<float>(), static_cast<std::size_t>(p.numel())});
  return out;
}

std::vector<FloatBuffer> Policy::gradient_buffers() {
  std::vector<FloatBuffer> out;
  for (auto& p : impl_->parameters()) {
    if (!p.grad().defined() || !p.grad().is_contiguous())
      throw Error("a gradient lost its place in the flat gradient buffer");
    out.push_back({p.grad().data_ptr<float>(), static_cast<std::size_t>(p.numel())});
  }
  return out;
}

std::vector<float> Policy::flat_parameters() const {
  std::vector<float> out;
  out.reserve(parameter_count());
  for (const auto& p : impl_->parameters()) {
    auto c = p.detach().contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

void Policy::load_flat_parameters(const float* data, std::size_t size) {
  if (size != parameter_count())
    throw Error(log::concat("weights of ", size, " floats for a model of ", parameter_count(), " parameters"));
  torch::NoGradGuard no_grad;
  std::size_t offset = 0;
  for (auto& p : impl_->parameters()) {
    auto n = static_cast<std::size_t>(p.numel());
    std::memcpy(p.data_ptr<float>(), data + offset, n * sizeof(float));
    offset += n;
  }
}

}  // namespace arclight::model
