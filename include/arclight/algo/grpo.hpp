#pragma once
// The GRPO objective: a PPO-clipped ratio against the behaviour log-probs, an
// optional KL penalty to a frozen reference and an entropy bonus. Tensors are
// declared, not included: only LibTorch translation units call these.
#include <cstdint>

namespace at {
class Tensor;
}

namespace arclight::algo {

struct LossConfig {
  double clip_eps = 0.2;
  // Dual clip (verl's clip_ratio_c): a token with a negative advantage loses at most clip_ratio_c × |advantage|, and
  // past that bound its gradient is 0 (unbounded, one stale token's ratio of e^12 set the whole step's direction).
  double clip_ratio_c = 3.0;
  double kl_coef = 0.0;       // weight of KL(policy || reference), k3 estimator bounded to [-10, 10] as verl's
  double entropy_coef = 0.0;  // weight of the entropy bonus
};

struct LossTerms {
  double policy_loss = 0;
  double kl = 0;
  double entropy = 0;
  double clip_fraction = 0;        // share of action tokens whose loss the clip changed (verl's pg_clipfrac)
  double clip_fraction_lower = 0;  // share whose loss the dual clip bounded (verl's pg_clipfrac_lower)
  double action_tokens = 0;
};

// The loss to minimize, averaged over action tokens.
// logits [B, T, V] from the policy on tokens [B, T] (int64); the others [B, T] float,
// aligned with tokens: position i holds the values for token i, predicted at i - 1.
// temperatures: the sampling temperature of each token, at which its behaviour log-prob was taken; the policy's and
// the reference's log-probs are taken at it too (logits / temperature), so that their ratio compares like with like.
// reference_logits may be undefined when kl_coef is 0.
at::Tensor grpo_loss(const at::Tensor& logits, const at::Tensor& tokens, const at::Tensor& action_mask,
                     const at::Tensor& behaviour_logprobs, const at::Tensor& temperatures, const at::Tensor& advantages,
                     const at::Tensor& reference_logits, const LossConfig& config, LossTerms* terms);

// Each token's log-prob of its target and the entropy of its distribution under logits / temperature: targets [B, T]
// int64, logits [B, T + k, V] (position i's predicts target i; those past T are not read, and their gradient is
// zero), temperature [B, T, 1] of the logits' type -> logprobs and, where `entropy` is given, entropy [B, T]. A block
// of positions at a time (at most logits_per_block logits, by default 16 MiB of float32; one position of every row at
// least): the forward makes no [B, T, V] tensor, and where the logits take gradients the backward recomputes each
// block's log-softmax instead of keeping it (the logits' gradient is its only tensor of that size). Throws
// std::invalid_argument on mismatched types, a temperature that takes gradients, or too few logits.
void token_scores(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& temperature,
                  at::Tensor& logprobs, at::Tensor* entropy, std::int64_t logits_per_block = std::int64_t{1} << 22);

}  // namespace arclight::algo
