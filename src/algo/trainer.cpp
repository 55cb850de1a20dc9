#include "arclight/algo/trainer.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <type_traits>

#include "arclight/algo/grpo.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::algo {

namespace {
// A micro-batch's inputs to token_logprobs and grpo_loss, padded to its longest sample ([rows, longest]).
struct MicroBatch {
  torch::Tensor tokens, action_mask, behaviour_logprobs, temperatures, advantages;
};

// grpo.train_blocks = N > 0: only the last N layers, the final norm and the head train (not the embeddings). A model
// with tied embeddings has no head of its own: its output layer is the embeddings, and stays frozen.
std::vector<bool> trainable_mask(const model::Policy& p, int train_blocks) {
  std::vector<bool> mask;
  const int layers = p.architecture().num_layers;
  for (const std::string& name : p.parameter_names()) {
    const std::optional<int> layer = model::layer_of(name);
    const bool head_or_final_norm = name.rfind("lm_head.", 0) == 0 || name.rfind("model.norm.", 0) == 0;
    mask.push_back(train_blocks <= 0 || head_or_final_norm || (layer && *layer >= layers - train_blocks));
  }
  return mask;
}

template <typename T>
std::vector<T> select(const std::vector<T>& all, const std::vector<bool>& mask) {
  std::vector<T> out;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (mask[i]) out.push_back(all[i]);
  return out;
}

// The gradients' 2-norm as torch's clip_grad_norm_ computes it (the norm of the parameters' norms), bit for bit,
// without its scaling pass (by 1 where nothing is clipped).
double gradient_norm(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> norms;
  for (const torch::Tensor& p : parameters)
    if (p.grad().defined()) norms.push_back(p.grad().norm(2));
  if (norms.empty()) return 0.0;
  return (norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2)).item<double>();
}

// Runs after autograd has accumulated a parameter's gradient: tells the reducer, so that a
// full bucket starts its all-reduce while backward goes on through earlier layers.
class GradientReady : public torch::autograd::FunctionPostHook {
 public:
  GradientReady(GradientReducer*& armed, std::size_t index) : armed_(armed), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    if (armed_) armed_->ready(index_);
    return outputs;
  }

 private:
  GradientReducer*& armed_;
  std::size_t index_;
};
}  // namespace

struct Trainer::Impl {
  Impl(model::Policy& p, const GrpoConfig& c, GradientReducer* r)
      : policy(p),
        config(c),
        reducer(r),
        trainable(trainable_mask(p, c.train_blocks)),
        optimizer(select(p.parameters(), trainable), torch::optim::AdamWOptions(c.lr).weight_decay(c.weight_decay)) {
    // A frozen parameter is out of autograd: backward stops at the first block that trains (no gradient for the
    // embeddings and the blocks below), and no trainer sums gradients that nothing applies.
    const std::vector<torch::Tensor> all = p.parameters();
    for (std::size_t i = 0; i < all.size(); ++i)
      if (!trainable[i]) all[i].set_requires_grad(false);
    if (reducer) {
      const std::vector<torch::Tensor> summed = select(all, trainable);
      for (std::size_t i = 0; i < summed.size(); ++i) {
        accumulators.push_back(torch::autograd::impl::grad_accumulator(summed[i]));
        accumulators.back()->add_post_hook(std::make_unique<GradientReady>(armed, i));
      }
    }
    loss_config.clip_eps = c.clip_eps;
    loss_config.clip_ratio_c = c.clip_ratio_c;
    loss_config.kl_coef = c.kl_coef;
    loss_config.entropy_coef = c.entropy_coef;
    if (c.kl_coef != 0.0) {
      reference = std::make_unique<model::Policy>(p.config(), p.vocab_size(), 0);
      reference->place_on(p.device());
      auto w = p.flat_parameters();
      reference->load_flat_parameters(w.data(), w.size());
    }
  }

  // Pads a micro-batch (samples of the shard) to its longest sequence; padding is never an action.
  void tensors(const std::vector<Sample>& shard, const std::vector<std::size_t>& samples, MicroBatch& in) {
    std::size_t length = 0;
    for (std::size_t i : samples) length = std::max(length, shard[i].tokens.size());
    const auto rows = static_cast<std::int64_t>(samples.size()), cols = static_cast<std::int64_t>(length);
    in.tokens = torch::zeros({rows, cols}, torch::kLong);
    in.action_mask = torch::zeros({rows, cols});
    in.behaviour_logprobs = torch::zeros({rows, cols});
    in.temperatures = torch::ones({rows, cols});
    in.advantages = torch::zeros({rows, cols});
    auto tok = in.tokens.accessor<std::int64_t, 2>();
    auto m = in.action_mask.accessor<float, 2>();
    auto lp = in.behaviour_logprobs.accessor<float, 2>();
    auto temperature = in.temperatures.accessor<float, 2>();
    auto adv = in.advantages.accessor<float, 2>();
    for (std::size_t row = 0; row < samples.size(); ++row) {
      const Sample& s = shard[samples[row]];
      const std::size_t n = s.tokens.size();
      if (!s.sizes_agree()) throw Error("trainer: a sample's per-token vectors differ in length");
      for (std::size_t t = 0; t < n; ++t) {
        tok[row][t] = s.tokens[t];
        m[row][t] = s.action_mask[t];
        lp[row][t] = s.behaviour_logprobs[t];
        temperature[row][t] = s.temperatures[t];
        adv[row][t] = s.advantages[t];
      }
    }
    if (policy.device() >= 0) {  // filled on the host, computed on the policy's device
      const torch::Device device(torch::kCUDA, policy.device());
      for (torch::Tensor* t : {&in.tokens, &in.action_mask, &in.behaviour_logprobs, &in.temperatures, &in.advantages})
        *t = t->to(device);
    }
  }

  model::Policy& policy;
  GrpoConfig config;
  GradientReducer* reducer;
  std::vector<bool> trainable;  // by parameter; a frozen one keeps its values and has no optimizer state
  torch::optim::AdamW optimizer;
  LossConfig loss_config;
  std::unique_ptr<model::Policy> reference;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // held, so that their hooks stay
  GradientReducer* armed = nullptr;                                  // set during the last micro-batch's backward
  bool scaling = policy.config().dtype == ComputeType::float16;      // the loss scale moves (float16)
  double loss_scale = scaling ? Trainer::initial_loss_scale : 1.0;
  int good_steps = 0;  // optimizer steps since the scale last changed
  // Two tokens, no action: what a trainer with no share of a batch runs backward on.
  const std::vector<Sample> placeholder{Sample{{0, 0}, {0, 0}, {0.f, 0.f}, {1.f, 1.f}, {0.f, 0.f}, 0}};
};

std::vector<std::vector<std::size_t>> micro_batches(const std::vector<Sample>& shard, const GrpoConfig& config) {
  if (config.micro_batch < 1) throw UsageError("grpo.micro_batch must be at least 1");
  if (config.micro_batch_tokens < 0) throw UsageError("grpo.micro_batch_tokens must be 0 (none) or more");
  const auto rows = static_cast<std::size_t>(config.micro_batch),
             tokens = static_cast<std::size_t>(config.micro_batch_tokens);
  const auto length = [&](std::size_t i) { return shard[i].tokens.size(); };
  std::vector<std::size_t> order(shard.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  // Shortest first: the last micro-batch, whose backward the gradients' all-reduce overlaps, holds the longest.
  if (tokens > 0) std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return length(a) < length(b); });
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t i : order) {
    // With a budget, each sample is the longest of its micro-batch so far: it sets the padded length.
    const bool fits =
        !out.empty() && out.back().size() < rows && (tokens == 0 || (out.back().size() + 1) * length(i) <= tokens);
    if (fits)
      out.back().push_back(i);
    else
      out.push_back({i});
  }
  return out;
}

Trainer::Trainer(model::Policy& policy, const GrpoConfig& config, GradientReducer* reducer)
    : impl_(std::make_unique<Impl>(policy, config, reducer)) {
  micro_batches({}, config);  // refuses a micro-batch of no sequences or a negative budget
}

Trainer::~Trainer() = default;

double Trainer::loss_scale() const { return impl_->loss_scale; }

void Trainer::use_loss_scale(double scale) {
  if (!(scale >= 1.0) || !std::isfinite(scale)) throw Error("trainer: a loss scale is a finite number from 1");
  impl_->scaling = true;
  impl_->loss_scale = scale;
  impl_->good_steps = 0;
}

TrainStats Trainer::step(const std::vector<Sample>& shard, double total_action_tokens) {
  TrainStats first;
  for (int epoch = 0; epoch < std::max(1, impl_->config.ppo_epochs); ++epoch) {
    TrainStats stats = epoch_step(shard, total_action_tokens);
    if (epoch == 0) first = stats;
  }
  return first;
}

TrainStats Trainer::epoch_step(const std::vector<Sample>& shard, double total_action_tokens) {
  Impl& m = *impl_;
  TrainStats stats;
  // Nothing to train on in the whole batch (every rollout failed or was stale): no step, which AdamW's momentum would
  // make all the same. Every trainer is given the same total, so all of them skip it.
  if (total_action_tokens <= 0) return stats;
  // A trainer with no share trains on a placeholder at weight zero: its backward fires the gradient hooks the others'
  // do, so its all-reduces (non-blocking during backward, blocking after) match theirs.
  const std::vector<Sample>& batch = shard.empty() ? m.placeholder : shard;
  m.policy.zero_gradients();
  const double total = total_action_tokens;
  const std::vector<std::vector<std::size_t>> micro = micro_batches(batch, m.config);
  for (std::size_t k = 0; k < micro.size(); ++k) {
    MicroBatch in;
    m.tensors(batch, micro[k], in);
    torch::Tensor reference_logprobs, entropy;
    if (m.reference) {
      torch::NoGradGuard no_grad;
      reference_logprobs = m.reference->token_logprobs(in.tokens, in.temperatures);
    }
    const auto logprobs = m.policy.token_logprobs(in.tokens, in.temperatures, &entropy);
    LossTerms terms;
    auto loss = grpo_loss(logprobs, entropy, reference_logprobs, in.action_mask, in.behaviour_logprobs, in.advantages,
                          m.loss_config, &terms);
    // The loss is a mean over this micro-batch's action tokens; weigh it by its share of all of them.
    const double weight = terms.action_tokens / total;
    const bool last = k + 1 == micro.size();
    if (last && m.reducer) {
      m.reducer->begin(select(m.policy.gradient_buffers(), m.trainable));
      m.armed = m.reducer;
    }
    (loss * (weight * m.loss_scale)).backward();
    m.armed = nullptr;
    stats.loss += loss.item<double>() * weight;
    stats.policy_loss += terms.policy_loss * weight;
    stats.kl += terms.kl * weight;
    stats.entropy += terms.entropy * weight;
    stats.clip_fraction += terms.clip_fraction * weight;
    stats.clip_fraction_lower += terms.clip_fraction_lower * weight;
    stats.action_tokens += terms.action_tokens;
    ++stats.micro_batches;
  }
  if (m.reducer) m.reducer->finish();
  const std::vector<torch::Tensor> trainable = select(m.policy.parameters(), m.trainable);
  if (m.loss_scale != 1.0) {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : trainable)
      if (p.grad().defined()) p.grad().div_(m.loss_scale);
  }
  stats.grad_norm = gradient_norm(trainable);
  // Every trainer scales by the first one's norm (and all skip alike): their own may differ in the last bits.
  if (m.reducer) stats.grad_norm = m.reducer->leaders_value(stats.grad_norm);
  if (!std::isfinite(stats.grad_norm)) {  // a step that would spoil every weight
    if (m.loss_scale > 1.0) {             // float16's scale too large for this gradient: as GradScaler, skip and halve
      log::debug("the gradient overflowed at loss scale ", m.loss_scale, ": this step is skipped, the scale halved");
      m.loss_scale = std::max(1.0, m.loss_scale / 2);
      m.good_steps = 0;
      return stats;
    }
    log::warn("the gradient's norm is ", stats.grad_norm, ": this step is skipped");
    return stats;
  }
  if (m.scaling && ++m.good_steps >= Trainer::loss_scale_growth_steps) {  // at 1 too: a burst of overflows passes
    m.loss_scale *= 2;
    m.good_steps = 0;
  }
  // As torch's clip_grad_norm_ scales, in float: max_norm / (norm + 1e-6), at most 1.
  const float clip = static_cast<float>(m.config.grad_clip) / (static_cast<float>(stats.grad_norm) + 1e-6f);
  if (m.config.grad_clip > 0 && clip < 1) {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : trainable)
      if (p.grad().defined()) p.grad().mul_(clip);
  }
  m.optimizer.step();
  return stats;
}

}  // namespace arclight::algo

namespace arclight::algo {

namespace {
// LibTorch keys an optimizer's state by the parameter's TensorImpl: its address as a string up to 2.x
// (c10::guts::to_string, an ostream's rendering of the pointer), the pointer itself in later versions.
template <typename States>
typename States::key_type optimizer_state_key(const States&, const torch::Tensor& parameter) {
  if constexpr (std::is_pointer_v<typename States::key_type>) {
    return parameter.unsafeGetTensorImpl();
  } else {
    std::ostringstream key;
    key << parameter.unsafeGetTensorImpl();
    return key.str();
  }
}
}  // namespace

OptimizerState Trainer::optimizer_state() const {
  std::vector<std::size_t> all(impl_->trainable.size());
  std::iota(all.begin(), all.end(), std::size_t(0));
  return optimizer_state_of(all);
}

OptimizerState Trainer::optimizer_state_of(const std::vector<std::size_t>& only) const {
  OptimizerState out;
  auto& states = impl_->optimizer.state();
  const auto params = impl_->policy.parameters();
  std::size_t next = 0;  // in `only`
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    const bool wanted = next < only.size() && only[next] == i;
    if (wanted) ++next;
    if (!impl_->trainable[i]) {  // frozen: zero moments, no steps
      if (!wanted) {
        out.steps.push_back(0);
        continue;
      }
      out.exp_avg.insert(out.exp_avg.end(), static_cast<std::size_t>(p.numel()), 0.f);
      out.exp_avg_sq.insert(out.exp_avg_sq.end(), static_cast<std::size_t>(p.numel()), 0.f);
      out.steps.push_back(0);
      continue;
    }
    auto it = states.find(optimizer_state_key(states, p));
    if (it == states.end()) return {};  // no step taken yet
    auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
    if (!wanted) {
      out.steps.push_back(s.step());
      continue;
    }
    auto m = s.exp_avg().cpu().contiguous(), v = s.exp_avg_sq().cpu().contiguous();
    out.exp_avg.insert(out.exp_avg.end(), m.data_ptr<float>(), m.data_ptr<float>() + m.numel());
    out.exp_avg_sq.insert(out.exp_avg_sq.end(), v.data_ptr<float>(), v.data_ptr<float>() + v.numel());
    out.steps.push_back(s.step());
  }
  return out;
}

void Trainer::load_optimizer_state(const OptimizerState& state) {
  auto params = impl_->policy.parameters();
  if (state.exp_avg.empty()) {  // saved before the first step: none, whatever a version tried before left
    impl_->optimizer.state().clear();
    return;
  }
  if (state.steps.size() != params.size() || state.exp_avg.size() != impl_->policy.parameter_count() ||
      state.exp_avg_sq.size() != state.exp_avg.size())
    throw UsageError("checkpoint: the optimizer state does not fit this model");
  auto& states = impl_->optimizer.state();
  std::size_t offset = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto n = params[i].numel();
    if (!impl_->trainable[i]) {
      offset += static_cast<std::size_t>(n);
      continue;
    }
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(state.steps[i]);
    // Copies (copy = true): the state outlives `state`'s buffers, on the parameter's device.
    const auto device = params[i].device();
    const auto copy = [&](const UninitFloats& moments) {
      return torch::from_blob(const_cast<float*>(moments.data()) + offset, params[i].sizes())
          .to(device, torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
    };
    s->exp_avg(copy(state.exp_avg));
    s->exp_avg_sq(copy(state.exp_avg_sq));
    states[optimizer_state_key(states, params[i])] = std::move(s);
    offset += static_cast<std::size_t>(n);
  }
}

Trainer::MomentBuffers Trainer::fresh_optimizer_state(const std::vector<std::int64_t>& steps) {
  auto params = impl_->policy.parameters();
  if (steps.size() != params.size()) throw UsageError("checkpoint: the optimizer state does not fit this model");
  auto& states = impl_->optimizer.state();
  MomentBuffers out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!impl_->trainable[i]) {
      out.exp_avg.push_back({}), out.exp_avg_sq.push_back({});
      continue;
    }
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(steps[i]);
    s->exp_avg(torch::zeros_like(params[i], torch::MemoryFormat::Contiguous));
    s->exp_avg_sq(torch::zeros_like(params[i], torch::MemoryFormat::Contiguous));
    const int device = params[i].is_cuda() ? params[i].get_device() : -1;
    const auto n = static_cast<std::size_t>(params[i].numel());
    out.exp_avg.push_back({s->exp_avg().data_ptr<float>(), n, device});
    out.exp_avg_sq.push_back({s->exp_avg_sq().data_ptr<float>(), n, device});
    states[optimizer_state_key(states, params[i])] = std::move(s);
  }
  return out;
}

}  // namespace arclight::algo
