#include "decoder.hpp"

#include <torch/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/utils.h>

#include <cmath>
#include <map>
#include <tuple>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "attention.hpp"
#include "rope.hpp"

namespace arclight::model {

Projection::Projection(std::int64_t in, std::int64_t out, bool with_bias) {
  weight = register_parameter("weight", torch::empty({out, in}));
  if (with_bias) bias = register_parameter("bias", torch::empty({out}));
}

Weight::Weight(std::int64_t rows, std::int64_t columns) {
  weight = register_parameter("weight", torch::empty({rows, columns}));
}

void Projection::add_adapter(int rank, double alpha) {
  lora_A = register_module("lora_A", std::make_shared<Weight>(rank, weight.size(1)));
  lora_B = register_module("lora_B", std::make_shared<Weight>(weight.size(0), rank));
  lora_scale = alpha / rank;
}

Norm::Norm(std::int64_t dim, NormKind k, double e) : kind(k), eps(e) {
  // the identity: Gemma's weight scales by 1 + weight
  weight = register_parameter("weight", kind == NormKind::rms_norm_offset ? torch::zeros({dim}) : torch::ones({dim}));
  if (kind == NormKind::layer_norm) bias = register_parameter("bias", torch::zeros({dim}));
}

Table::Table(std::int64_t rows, std::int64_t dim) { weight = register_parameter("weight", torch::empty({rows, dim})); }

Attention::Attention(const Architecture& a) {
  const std::int64_t q_width = std::int64_t{a.num_heads} * a.head_dim,
                     kv_width = std::int64_t{a.num_kv_heads} * a.head_dim;
  q_proj = register_module("q_proj", std::make_shared<Projection>(a.hidden_size, q_width, a.qkv_bias));
  k_proj = register_module("k_proj", std::make_shared<Projection>(a.hidden_size, kv_width, a.qkv_bias));
  v_proj = register_module("v_proj", std::make_shared<Projection>(a.hidden_size, kv_width, a.qkv_bias));
  o_proj = register_module("o_proj", std::make_shared<Projection>(q_width, a.hidden_size, a.o_bias));
  if (a.qk_norm) {
    const NormKind kind = a.norm == NormKind::rms_norm_offset ? a.norm : NormKind::rms_norm;
    q_norm = register_module("q_norm", std::make_shared<Norm>(a.head_dim, kind, a.norm_eps));
    k_norm = register_module("k_norm", std::make_shared<Norm>(a.head_dim, kind, a.norm_eps));
  }
}

Mlp::Mlp(const Architecture& a) {
  if (a.mlp != MlpKind::gelu)
    gate_proj =
        register_module("gate_proj", std::make_shared<Projection>(a.hidden_size, a.intermediate_size, a.mlp_bias));
  up_proj = register_module("up_proj", std::make_shared<Projection>(a.hidden_size, a.intermediate_size, a.mlp_bias));
  down_proj =
      register_module("down_proj", std::make_shared<Projection>(a.intermediate_size, a.hidden_size, a.mlp_bias));
}

Layer::Layer(const Architecture& a) {
  self_attn = register_module("self_attn", std::make_shared<Attention>(a));
  mlp = register_module("mlp", std::make_shared<Mlp>(a));
  input_layernorm = register_module("input_layernorm", std::make_shared<Norm>(a.hidden_size, a.norm, a.norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<Norm>(a.hidden_size, a.norm, a.norm_eps));
  if (a.sandwich_norms) {
    pre_feedforward_layernorm =
        register_module("pre_feedforward_layernorm", std::make_shared<Norm>(a.hidden_size, a.norm, a.norm_eps));
    post_feedforward_layernorm =
        register_module("post_feedforward_layernorm", std::make_shared<Norm>(a.hidden_size, a.norm, a.norm_eps));
  }
}

Body::Body(const Architecture& a) {
  embed_tokens = register_module("embed_tokens", std::make_shared<Table>(a.vocab_size, a.hidden_size));
  if (a.learned_positions)
    embed_positions = register_module("embed_positions", std::make_shared<Table>(a.max_seq, a.hidden_size));
  auto list = register_module("layers", torch::nn::ModuleList());
  for (int l = 0; l < a.num_layers; ++l) {
    layers.push_back(std::make_shared<Layer>(a));
    list->push_back(layers.back());  // named by its index: model.layers.<l>.
  }
  norm = register_module("norm", std::make_shared<Norm>(a.hidden_size, a.norm, a.norm_eps));
}

namespace {

// The projection a LoRA target names in one layer.
Projection& target_of(Layer& layer, const std::string& target) {
  Attention& a = *layer.self_attn;
  if (target == "q") return *a.q_proj;
  if (target == "k") return *a.k_proj;
  if (target == "v") return *a.v_proj;
  if (target == "o") return *a.o_proj;
  if (target == "up") return *layer.mlp->up_proj;
  if (target == "down") return *layer.mlp->down_proj;
  if (target == "gate" && layer.mlp->gate_proj) return *layer.mlp->gate_proj;
  throw UsageError("model.lora_targets: this model has no \"" + target + "\" projection");
}

bool is_adapter(const std::string& name) { return name.find(".lora_") != std::string::npos; }

}  // namespace

Decoder::Decoder(const Architecture& architecture, torch::ScalarType compute_type, const LoraSpec& lora)
    : a_(architecture), compute_(compute_type), lora_(lora) {
  if (a_.num_heads % a_.num_kv_heads != 0 || a_.head_dim % 2 != 0)
    throw UsageError(log::concat("a decoder of ", a_.num_heads, " heads, ", a_.num_kv_heads,
                                 " key/value heads and head_dim ", a_.head_dim, " cannot be built"));
  model_ = register_module("model", std::make_shared<Body>(a_));
  if (!a_.tied_embeddings)
    lm_head_ = register_module("lm_head", std::make_shared<Projection>(a_.hidden_size, a_.vocab_size, a_.lm_head_bias));
  if (lora_.rank > 0) {
    for (auto& layer : model_->layers)
      for (const std::string& target : lora_.targets) target_of(*layer, target).add_adapter(lora_.rank, lora_.alpha);
    for (auto& item : named_parameters())
      if (!is_adapter(item.key())) item.value().set_requires_grad(false);
  }
  std::tie(cos_table_, sin_table_) = rope_tables(a_);
  if (a_.local_rope_theta) {
    Architecture local = a_;
    local.rope_theta = *a_.local_rope_theta;
    local.rope_scaling.reset();
    std::tie(local_cos_table_, local_sin_table_) = rope_tables(local);
  }
}

void Decoder::initialize(at::Generator& generator) {
  torch::NoGradGuard no_grad;
  for (const auto& module : modules()) {
    if (auto p = std::dynamic_pointer_cast<Projection>(module)) {
      const double bound = 1.0 / std::sqrt(double(p->weight.size(1)));  // torch.nn.Linear's kaiming_uniform(a=√5)
      p->weight.uniform_(-bound, bound, generator);
      if (p->bias.defined()) p->bias.uniform_(-bound, bound, generator);
    } else if (auto t = std::dynamic_pointer_cast<Table>(module)) {
      t->weight.normal_(0, 1, generator);
    } else if (auto n = std::dynamic_pointer_cast<Norm>(module)) {
      n->weight.fill_(n->kind == NormKind::rms_norm_offset ? 0 : 1);
      if (n->bias.defined()) n->bias.zero_();
    }
  }
}

void Decoder::initialize_adapters(at::Generator& generator) {
  torch::NoGradGuard no_grad;
  for (const auto& module : modules()) {
    auto p = std::dynamic_pointer_cast<Projection>(module);
    if (!p || !p->lora_A) continue;
    const double bound = 1.0 / std::sqrt(double(p->weight.size(1)));
    p->lora_A->weight.uniform_(-bound, bound, generator);
    p->lora_B->weight.zero_();
  }
}

std::vector<std::pair<std::string, torch::Tensor>> Decoder::trainable() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& item : named_parameters())
    if (lora_.rank == 0 || is_adapter(item.key())) out.emplace_back(item.key(), item.value());
  return out;
}

void Decoder::merge_adapters(MergeRounding* rounding) {
  torch::NoGradGuard no_grad;
  const auto count = [](const torch::Tensor& mask) {
    return static_cast<std::uint64_t>(mask.sum().item<std::int64_t>());
  };
  for (auto& item : named_modules()) {
    auto p = std::dynamic_pointer_cast<Projection>(item.value());
    if (!p || !p->lora_A) continue;
    const torch::Tensor product = torch::matmul(p->lora_B->weight, p->lora_A->weight);
    if (rounding) {  // one matrix at a time: a merged copy of the model at once would double its memory
      const torch::Tensor merged = torch::add(p->weight, product, p->lora_scale), changed = merged != p->weight;
      rounding->changed += count(changed);
      rounding->unchanged_in_bf16 += count(changed & (merged.to(torch::kBFloat16) == p->weight.to(torch::kBFloat16)));
      rounding->unchanged_in_f16 += count(changed & (merged.to(torch::kHalf) == p->weight.to(torch::kHalf)));
    }
    p->weight.add_(product, p->lora_scale);
    p->lora_B->weight.zero_();
  }
}

std::vector<std::pair<std::string, torch::Tensor>> Decoder::weights() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& item : named_parameters())
    if (!is_adapter(item.key())) out.emplace_back(item.key(), item.value());
  return out;
}

KvCache Decoder::new_cache(std::int64_t batch, std::int64_t capacity) const {
  KvCache cache;
  cache.capacity = capacity;
  const auto options = torch::TensorOptions().dtype(compute_).device(device());
  for (int l = 0; l < a_.num_layers; ++l) {
    const std::int64_t held = slides(l) ? std::min<std::int64_t>(capacity, *a_.sliding_window) : capacity;
    cache.keys.push_back(torch::zeros({batch, a_.num_kv_heads, held, a_.head_dim}, options));
    cache.values.push_back(torch::zeros({batch, a_.num_kv_heads, held, a_.head_dim}, options));
  }
  return cache;
}

bool Decoder::slides(std::int64_t layer) const {
  return a_.sliding_window && (a_.sliding_layers.empty() || a_.sliding_layers[static_cast<std::size_t>(layer)]);
}

void Decoder::move_to(const torch::Device& device) {
  {
    std::lock_guard<std::mutex> lock(casts_mutex_);
    casts_.clear();
  }
  to(device);
  cos_table_ = cos_table_.to(device);
  sin_table_ = sin_table_.to(device);
  if (local_cos_table_.defined()) {
    local_cos_table_ = local_cos_table_.to(device);
    local_sin_table_ = local_sin_table_.to(device);
  }
}

KvCache KvCache::rows(std::int64_t first, std::int64_t count) const {
  KvCache view;
  view.capacity = capacity;
  for (const auto& k : keys) view.keys.push_back(k.narrow(0, first, count));
  for (const auto& v : values) view.values.push_back(v.narrow(0, first, count));
  return view;
}

// Where one forward's tokens sit and what each may see, made once per forward for every layer.
struct Decoder::Placement {
  torch::Tensor positions;             // [1 or B, T] int64: shared by every row (lockstep), or each row's own
  torch::Tensor cos, sin;              // [1 or B, 1, T, head_dim / 2] in the compute type (RoPE only)
  torch::Tensor local_cos, local_sin;  // the same for the sliding layers' own RoPE, where they have one
  torch::Tensor blocked;  // [1 or B, 1, 1, T, end]: true where a query may not see a key (future, out of window)
  torch::Tensor blocked_in_window;  // the same for the layers the window applies to, where not every layer's
  std::int64_t start = -1;          // lockstep: the first position (the cache is written as one slice); per row: -1
  std::int64_t end = 0;             // the keys attended: 0 .. end - 1
  // With a cache, the layers that slide attend to the first ring_used slots of their ring, then to this forward's
  // keys, and the ring keeps the latest: this forward's last keys at ring_slots where every token is real, else (right
  // padding) each slot that ring_keeps_new marks takes this forward's key at ring_index. One token a row (decoding)
  // goes into the ring first, and its query attends to the ring alone, read in place (ring_written_first).
  std::int64_t ring_used = 0;
  bool ring_written_first = false;
  torch::Tensor ring_blocked;    // [1 or B, 1, 1, T, ring_used (+ T)]: true where a query may not see a key
  torch::Tensor ring_slots;      // [1 or B, n] int64: the slots of this forward's last n keys
  torch::Tensor ring_keeps_new;  // [B, 1, ring, 1]
  torch::Tensor ring_index;      // [B, 1, ring, 1] int64: which of this forward's T keys
};

Decoder::Placement Decoder::place(torch::Tensor positions, std::int64_t start, std::int64_t end) const {
  if (end > a_.max_seq) throw Error(log::concat("a sequence of ", end, " tokens exceeds model.max_seq = ", a_.max_seq));
  Placement where;
  where.start = start;
  where.end = end;
  const auto rows = [&](const torch::Tensor& table) {
    return torch::embedding(table, positions).unsqueeze(1).to(compute_);
  };
  if (!a_.learned_positions) {
    where.cos = rows(cos_table_);
    where.sin = rows(sin_table_);
  }
  if (local_cos_table_.defined()) {
    where.local_cos = rows(local_cos_table_);
    where.local_sin = rows(local_sin_table_);
  }
  const auto query = positions.unsqueeze(-1);
  const auto key = torch::arange(0, end, torch::TensorOptions(torch::kLong).device(positions.device()));
  const auto future = key > query;
  const auto in_window = [&] { return future.logical_or(key <= query - *a_.sliding_window).unsqueeze(1).unsqueeze(1); };
  where.blocked = a_.sliding_window && a_.sliding_layers.empty() ? in_window() : future.unsqueeze(1).unsqueeze(1);
  if (a_.sliding_window && !a_.sliding_layers.empty()) where.blocked_in_window = in_window();
  where.positions = std::move(positions);
  return where;
}

// A slot's position is the latest one up to then that falls on it (slot = position % window); one below 0: none yet.
void Decoder::place_ring(Placement& where, const KvCache& cache, std::int64_t before,
                         const torch::Tensor* last_real) const {
  std::int64_t ring = 0;
  for (int l = 0; l < a_.num_layers && ring == 0; ++l)
    if (slides(l)) ring = cache.keys.at(static_cast<std::size_t>(l)).size(2);
  if (ring == 0) return;
  const std::int64_t window = *a_.sliding_window, t = where.positions.size(1);
  const auto slot = torch::arange(ring, torch::TensorOptions(torch::kLong).device(device()));
  const auto held_up_to = [&](const torch::Tensor& position, const torch::Tensor& slots) {  // [rows, 1] -> [rows, n]
    return position - torch::remainder(position - slots, window);
  };
  // Before a row's first lap is done its positions are its slots: those past every row's first position hold none.
  // A single token's key overwrites the one a window before it, which its query no longer sees: written first.
  where.ring_written_first = t == 1 && !last_real;
  where.ring_used = std::min(ring, where.ring_written_first ? before + 1 : before);
  const auto first = where.positions.narrow(1, 0, 1);
  const auto used = slot.narrow(0, 0, where.ring_used);
  const auto keys = where.ring_written_first ? held_up_to(first, used)
                                             : torch::cat({held_up_to(first - 1, used), where.positions}, 1);
  const auto key = keys.unsqueeze(1), query = where.positions.unsqueeze(-1);  // [rows, 1, keys], [rows, T, 1]
  where.ring_blocked = (key > query).logical_or(key <= query - window).logical_or(key < 0).unsqueeze(1).unsqueeze(1);
  if (!last_real) {  // the last min(T, ring) keys, each to its own slot (a ring is a window's, or all of a row)
    const std::int64_t n = std::min(t, ring);
    where.ring_slots = torch::remainder(where.positions.narrow(1, t - n, n), window);
    return;
  }
  const auto kept = held_up_to(last_real->view({-1, 1}), slot);  // what each slot holds after this forward
  where.ring_keeps_new = (kept >= first).unsqueeze(1).unsqueeze(-1);
  where.ring_index = (kept - first).clamp(0, t - 1).unsqueeze(1).unsqueeze(-1);
}

torch::Tensor Decoder::forward(const torch::Tensor& tokens, KvCache* cache) { return lockstep(tokens, cache, nullptr); }

torch::Tensor Decoder::forward_at(const torch::Tensor& tokens, const torch::Tensor& at, KvCache* cache) {
  const std::int64_t t = tokens.size(1);
  if (at.dim() != 1 || at.size(0) != tokens.size(0) ||
      (at.numel() > 0 && (at.min().item<std::int64_t>() < 0 || at.max().item<std::int64_t>() >= t)))
    throw Error(log::concat("logits at ", at.numel(), " indices in 0..", t - 1, " for ", tokens.size(0), " rows"));
  const auto on_device = at.to(device());
  return lockstep(tokens, cache, &on_device);
}

Decoder::Placement Decoder::place_rows_alike(std::int64_t start, std::int64_t t) const {
  const auto positions = torch::arange(start, start + t, torch::TensorOptions(torch::kLong).device(device()));
  return place(positions.unsqueeze(0), start, start + t);
}

torch::Tensor Decoder::lockstep(const torch::Tensor& tokens, KvCache* cache, const torch::Tensor* at) {
  const std::int64_t t = tokens.size(1), start = cache ? cache->length : 0;
  Placement where = place_rows_alike(start, t);
  if (cache && at) {  // right padding after a row's `at`
    const torch::Tensor last_real = *at + start;
    place_ring(where, *cache, start, &last_real);
  } else if (cache) {
    place_ring(where, *cache, start);
  }
  auto logits = run(tokens.to(device()), where, cache, at);
  if (cache) cache->length = start + t;
  return logits;
}

torch::Tensor Decoder::forward(const torch::Tensor& tokens, const torch::Tensor& positions, std::int64_t end,
                               KvCache& cache) {
  const std::int64_t b = tokens.size(0), t = tokens.size(1);
  if (positions.dim() != 1 || positions.size(0) != b || cache.keys.at(0).size(0) != b)
    throw Error(log::concat("a per-row forward of ", b, " rows needs ", b, " positions and cache rows"));
  const auto on_device = positions.to(device()).unsqueeze(1);
  const auto offsets = torch::arange(t, torch::TensorOptions(torch::kLong).device(device()));
  Placement where = place(on_device + offsets, -1, end);
  place_ring(where, cache, end - t);
  return run(tokens.to(device()), where, &cache);
}

torch::Tensor Decoder::token_logprobs(const torch::Tensor& tokens, const torch::Tensor& targets,
                                      const torch::Tensor& temperature, torch::Tensor* entropy) {
  const auto hidden = normalize(*model_->norm, body(tokens.to(device()), place_rows_alike(0, tokens.size(1)), nullptr));
  return head_scores(head(), hidden, targets.to(device()), temperature.to(device()), entropy);
}

torch::Tensor Decoder::run(const torch::Tensor& tokens, const Placement& where, KvCache* cache,
                           const torch::Tensor* at) {
  auto x = body(tokens, where, cache);
  if (at) x = x.index({torch::arange(x.size(0), at->options()), *at});  // [B, hidden]: the rest needs no logits
  return head_logits(head(), normalize(*model_->norm, x)).to(torch::kFloat);
}

Head Decoder::head() const {
  if (!lm_head_) return {cast(model_->embed_tokens->weight), torch::Tensor(), a_.logit_softcap};
  return {cast(lm_head_->weight), lm_head_->bias.defined() ? cast(lm_head_->bias) : torch::Tensor(), a_.logit_softcap};
}

// The layer runs in a graph of its own, freed once its output is taken, and this node stands for it in the model's
// graph, holding only the layer's input: in the backward it runs the layer again, in a graph again, and back through
// it (a nested backward, which accumulates into the layer's parameters' gradients as the model's backward would),
// handing the input's gradient on. The recomputation is the forward's operations on the same tensors: the gradients
// are the ones a kept graph gives, to the bit.
class LayerRecompute : public torch::autograd::Node {
 public:
  static torch::Tensor forward(std::shared_ptr<Decoder> decoder, std::int64_t layer,
                               std::shared_ptr<const Decoder::Placement> where, const torch::Tensor& x) {
    torch::Tensor y = decoder->layer(layer, x.detach(), *where, nullptr).detach();
    auto node = std::shared_ptr<LayerRecompute>(new LayerRecompute(std::move(decoder), layer, std::move(where), x),
                                                torch::autograd::deleteNode);
    node->set_next_edges(torch::autograd::collect_next_edges(x));
    torch::autograd::set_history(y, node);
    return y;
  }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (!decoder_) throw Error("a recomputed layer's backward ran twice (retain_graph is not supported)");
    // The engine runs a node in grad mode only for create_graph, whose graph of the gradients this node cannot make.
    if (torch::GradMode::is_enabled()) throw Error("a recomputed layer's backward cannot make a graph (create_graph)");
    torch::AutoGradMode in_graph(true);
    const auto x = input_.detach().requires_grad_(input_.requires_grad());
    const auto y = decoder_->layer(layer_, x, *where_, nullptr);
    // No gradient reached the layer: zeros, so that its parameters' accumulators run (and the reducer's hooks fire)
    // as they would in a kept graph.
    torch::autograd::backward({y}, {grads[0].defined() ? grads[0] : torch::zeros_like(y)});
    const auto dx = x.requires_grad() ? x.grad() : torch::Tensor();
    release_variables();
    return {dx};
  }

  void release_variables() override {
    decoder_.reset();
    where_.reset();
    input_ = torch::Tensor();
  }

 private:
  LayerRecompute(std::shared_ptr<Decoder> decoder, std::int64_t layer, std::shared_ptr<const Decoder::Placement> where,
                 torch::Tensor input)
      : decoder_(std::move(decoder)), layer_(layer), where_(std::move(where)), input_(std::move(input)) {}

  std::shared_ptr<Decoder> decoder_;
  std::int64_t layer_;
  std::shared_ptr<const Decoder::Placement> where_;
  torch::Tensor input_;
};

torch::Tensor Decoder::body(const torch::Tensor& tokens, const Placement& where, KvCache* cache) {
  if (cache && where.end > cache->capacity)
    throw Error(log::concat("a sequence of ", where.end, " tokens overflows its KV cache"));
  auto x = torch::embedding(cast(model_->embed_tokens->weight), tokens);
  if (model_->embed_positions) x = x + torch::embedding(cast(model_->embed_positions->weight), where.positions);
  if (a_.scaled_embeddings)  // sqrt(hidden) in float32 then the compute type, as transformers' Gemmas round it
    x = x * torch::scalar_tensor(static_cast<float>(std::sqrt(double(a_.hidden_size)))).to(x.options());
  std::shared_ptr<const Placement> kept;  // the recomputing nodes' own copy: they outlive `where` until the backward
  for (std::int64_t l = 0; l < static_cast<std::int64_t>(model_->layers.size()); ++l) {
    if (!recompute_layers_ || cache || !torch::GradMode::is_enabled() || !(x.requires_grad() || trains(l))) {
      x = layer(l, x, where, cache);
      continue;
    }
    if (!kept) kept = std::make_shared<const Placement>(where);
    x = LayerRecompute::forward(std::static_pointer_cast<Decoder>(shared_from_this()), l, kept, x);
  }
  return x;
}

torch::Tensor Decoder::layer(std::int64_t l, torch::Tensor x, const Placement& where, KvCache* cache) {
  Layer& layer = *model_->layers[l];
  const auto attended = attend(*layer.self_attn, normalize(*layer.input_layernorm, x), where, l, cache);
  if (!a_.sandwich_norms) {
    x = x + attended;
    return x + feed_forward(*layer.mlp, normalize(*layer.post_attention_layernorm, x));
  }
  x = x + normalize(*layer.post_attention_layernorm, attended);
  return x + normalize(*layer.post_feedforward_layernorm,
                       feed_forward(*layer.mlp, normalize(*layer.pre_feedforward_layernorm, x)));
}

bool Decoder::trains(std::int64_t l) const {
  for (const auto& p : model_->layers[l]->parameters())
    if (p.requires_grad()) return true;
  return false;
}

torch::Tensor Decoder::cast(const torch::Tensor& parameter) const {
  if (parameter.scalar_type() == compute_) return parameter;
  if (torch::GradMode::is_enabled() && parameter.requires_grad()) return parameter.to(compute_);  // in the graph
  std::lock_guard<std::mutex> lock(casts_mutex_);
  Cast& kept = casts_[parameter.unsafeGetTensorImpl()];
  if (!kept.tensor.defined() || kept.version != parameter._version() || kept.data != parameter.data_ptr()) {
    torch::NoGradGuard no_grad;
    kept = {parameter._version(), parameter.data_ptr(), parameter.to(compute_)};
  }
  return kept.tensor;
}

torch::Tensor Decoder::project(const Projection& p, const torch::Tensor& x) const {
  auto y = p.bias.defined() ? torch::linear(x, cast(p.weight), cast(p.bias)) : torch::linear(x, cast(p.weight));
  if (p.lora_A) y = y + torch::linear(torch::linear(x, cast(p.lora_A->weight)), cast(p.lora_B->weight)) * p.lora_scale;
  return y;
}

torch::Tensor Decoder::normalize(const Norm& n, const torch::Tensor& x) const {
  if (n.kind == NormKind::layer_norm) return torch::layer_norm(x, {x.size(-1)}, cast(n.weight), cast(n.bias), n.eps);
  const auto h = x.to(torch::kFloat);
  const auto normed = h * torch::rsqrt(h.pow(2).mean(-1, true) + n.eps);
  // Gemma scales in float32 and rounds after (Llama rounds first); its weight as the model's type holds it
  if (n.kind == NormKind::rms_norm_offset) return (normed * (1 + cast(n.weight).to(torch::kFloat))).to(x.scalar_type());
  return cast(n.weight) * normed.to(x.scalar_type());
}

// x [B, heads, T, head_dim] at the placement's positions, whose angles' cos and sin are given.
torch::Tensor Decoder::rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) const {
  const std::int64_t half = a_.head_dim / 2;
  const auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

namespace {

// Writes new keys or values x [B, kv_heads, T, head_dim] into a layer's cache at their positions: one slice when
// every row starts at `start`, else each row at its own.
void remember(torch::Tensor& cached, const torch::Tensor& x, const torch::Tensor& positions, std::int64_t start) {
  if (start >= 0) {
    cached.narrow(2, start, x.size(2)).copy_(x);
  } else {
    cached.scatter_(2, positions.view({x.size(0), 1, x.size(2), 1}).expand_as(x), x);
  }
}

}  // namespace

torch::Tensor Decoder::attend(Attention& attn, const torch::Tensor& x, const Placement& where, std::int64_t layer,
                              KvCache* cache) {
  const std::int64_t b = x.size(0), t = x.size(1), d = a_.head_dim, kv = a_.num_kv_heads;
  const std::int64_t groups = a_.num_heads / kv;
  auto q = project(*attn.q_proj, x).view({b, t, a_.num_heads, d});
  auto k = project(*attn.k_proj, x).view({b, t, kv, d});
  auto v = project(*attn.v_proj, x).view({b, t, kv, d}).transpose(1, 2);
  if (attn.q_norm) {
    q = normalize(*attn.q_norm, q);
    k = normalize(*attn.k_norm, k);
  }
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  const bool sliding = !a_.sliding_layers.empty() && a_.sliding_layers[static_cast<std::size_t>(layer)];
  const bool local_rope = sliding && where.local_cos.defined();
  if (!a_.learned_positions) {
    q = rotate(q, local_rope ? where.local_cos : where.cos, local_rope ? where.local_sin : where.sin);
    k = rotate(k, local_rope ? where.local_cos : where.cos, local_rope ? where.local_sin : where.sin);
  }
  torch::Tensor blocked = sliding ? where.blocked_in_window : where.blocked;
  if (cache && slides(layer)) {  // the ring's keys, then this forward's; then the ring keeps the latest of them
    torch::Tensor &ring_k = cache->keys[layer], &ring_v = cache->values[layer];
    torch::Tensor all_k, all_v;
    if (!where.ring_written_first) {
      all_k = torch::cat({ring_k.narrow(2, 0, where.ring_used), k}, 2);
      all_v = torch::cat({ring_v.narrow(2, 0, where.ring_used), v}, 2);
    }
    if (where.ring_slots.defined()) {
      const std::int64_t n = where.ring_slots.size(1);
      const auto slots = where.ring_slots.view({-1, 1, n, 1}).expand({b, kv, n, d});
      ring_k.scatter_(2, slots, k.narrow(2, t - n, n));
      ring_v.scatter_(2, slots, v.narrow(2, t - n, n));
    } else {
      const auto index = where.ring_index.expand({b, kv, ring_k.size(2), d});
      ring_k.copy_(torch::where(where.ring_keeps_new, k.gather(2, index), ring_k));
      ring_v.copy_(torch::where(where.ring_keeps_new, v.gather(2, index), ring_v));
    }
    k = where.ring_written_first ? ring_k.narrow(2, 0, where.ring_used) : std::move(all_k);
    v = where.ring_written_first ? ring_v.narrow(2, 0, where.ring_used) : std::move(all_v);
    blocked = where.ring_blocked;
  } else if (cache) {
    remember(cache->keys[layer], k, where.positions, where.start);
    remember(cache->values[layer], v, where.positions, where.start);
    k = cache->keys[layer].narrow(2, 0, where.end);
    v = cache->values[layer].narrow(2, 0, where.end);
  }
  // The query heads grouped by the key head they read (attention.hpp); scaled by d^-1/2 or Gemma's own scale.
  const double scale = a_.attention_scale.value_or(std::pow(double(d), -0.5));
  const auto y = attention(q.reshape({b, kv, groups, t, d}), k, v, blocked, scale, a_.attention_softcap)
                     .reshape({b, a_.num_heads, t, d});
  return project(*attn.o_proj, y.transpose(1, 2).reshape({b, t, a_.num_heads * d}));
}

torch::Tensor Decoder::feed_forward(Mlp& mlp, const torch::Tensor& x) const {
  if (a_.mlp == MlpKind::gated_gelu_tanh)
    return project(*mlp.down_proj, torch::gelu(project(*mlp.gate_proj, x), "tanh") * project(*mlp.up_proj, x));
  if (mlp.gate_proj) return project(*mlp.down_proj, torch::silu(project(*mlp.gate_proj, x)) * project(*mlp.up_proj, x));
  return project(*mlp.down_proj, torch::gelu(project(*mlp.up_proj, x)));
}

}  // namespace arclight::model
