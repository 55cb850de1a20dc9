#pragma once
// A trainer's optimizer step: GRPO loss on its shard, gradients summed across the
// trainers by a GradientReducer, clipping, AdamW. No LibTorch in this header.
#include <memory>
#include <vector>

#include "arclight/algo/adapter.hpp"
#include "arclight/core/config.hpp"
#include "arclight/core/uninit_floats.hpp"
#include "arclight/core/gradient_reducer.hpp"
#include "arclight/model/policy.hpp"

namespace arclight::algo {

struct TrainStats {
  double loss = 0;
  double policy_loss = 0;
  double kl = 0;
  double entropy = 0;
  double clip_fraction = 0;
  double clip_fraction_lower = 0;
  double grad_norm = 0;      // before clipping, of the summed gradient
  double action_tokens = 0;  // this trainer's
  int micro_batches = 0;     // forward and backward passes this trainer ran (in the first epoch, as the rest)
};

// AdamW's moments, flat in the policy's parameter order, and its step count per tensor.
struct OptimizerState {
  UninitFloats exp_avg, exp_avg_sq;  // empty before the first step
  std::vector<std::int64_t> steps;
};

// The micro-batches a trainer runs a shard in, as indices into it: at most grpo.micro_batch sequences each and, with
// grpo.micro_batch_tokens, at most that many padded tokens (rows x the longest; one sequence at least), the samples
// shortest first. Without a token budget, the shard's own order in runs of micro_batch. Throws UsageError where
// micro_batch < 1 or micro_batch_tokens < 0.
std::vector<std::vector<std::size_t>> micro_batches(const std::vector<Sample>& shard, const GrpoConfig& config);

class Trainer {
 public:
  // reducer may be null for a single trainer.
  Trainer(model::Policy& policy, const GrpoConfig& config, GradientReducer* reducer);
  ~Trainer();
  // grpo.ppo_epochs optimizer steps on one batch (figures from the first). total_action_tokens counts the action tokens
  // of every trainer's shard, so that K trainers on a split batch take the step one trainer would on all of it; with
  // none anywhere, or a gradient that is not finite, no step is taken. A trainer's shard may be empty.
  TrainStats step(const std::vector<Sample>& shard, double total_action_tokens);

  // For checkpoints: the optimizer's state out, and back in (after the policy's weights).
  OptimizerState optimizer_state() const;
  // The same with the moments of the given parameter tensors only (indices in the policy's
  // order, ascending), one after another; the step counts of all of them.
  OptimizerState optimizer_state_of(const std::vector<std::size_t>& tensors) const;
  void load_optimizer_state(const OptimizerState& state);
  // For a restore that fills the moments where they live (trainers on GPUs, over NCCL): AdamW's state made afresh
  // with the given step counts and zero moments; each parameter tensor's exp_avg and exp_avg_sq as buffers (size 0
  // for a frozen tensor, which has none).
  struct MomentBuffers {
    std::vector<FloatBuffer> exp_avg, exp_avg_sq;
  };
  MomentBuffers fresh_optimizer_state(const std::vector<std::int64_t>& steps);

  // The loss scale (float16's, as PyTorch's GradScaler keeps it): the backward runs on the loss times it, so that
  // float16's gradients do not underflow, and the summed gradient is divided by it before the norm. A step whose
  // gradient is not finite is skipped and the scale halved; every loss_scale_growth_steps good steps it doubles. 1,
  // and left so, where the forward is not float16. Every trainer takes the same decisions (the leader's norm).
  static constexpr double initial_loss_scale = 65536.0;
  static constexpr int loss_scale_growth_steps = 2000;
  double loss_scale() const;
  void use_loss_scale(double scale);  // from the next step on (tests; float16 starts at initial_loss_scale)

 private:
  TrainStats epoch_step(const std::vector<Sample>& shard, double total_action_tokens);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arclight::algo
