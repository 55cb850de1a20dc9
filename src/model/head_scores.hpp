#pragma once
// The output head and the loss's per-token figures in one (LibTorch; private to the model module): each position's
// log-prob of its target and the entropy of its distribution, from the final hidden states, a block of positions at
// a time. No [B, T, vocabulary] tensor exists at once, in the forward or, where gradients flow, in the backward, which
// recomputes each block's logits from the hidden states instead of keeping them: a training sequence of T tokens
// holds its hidden states, not T x vocabulary logits and their gradient (Qwen's 151,936 entries a token).
#include <torch/types.h>

#include <cstdint>
#include <optional>

namespace arclight::model {

// The head as the decoder computes it: logits = hidden weight^T (+ bias), soft-capped where `softcap` is given, in the
// compute type, then float32 for the softmax.
struct Head {
  torch::Tensor weight;  // [vocabulary, hidden], the compute type
  torch::Tensor bias;    // [vocabulary] or undefined
  std::optional<double> softcap;
};

// The head's logits in the compute type: hidden [..., hidden] -> [..., vocabulary], soft-capped in transformers' order
// (x / cap, tanh, * cap) where the head caps; `bent`, where given, takes tanh(logits / cap) (the cap's derivative).
torch::Tensor head_logits(const Head& head, const torch::Tensor& hidden, torch::Tensor* bent = nullptr);

// The logits a block may hold: 2^22, 16 MiB of float32; the backward's recomputation takes several times that beside
// them. A block has one position of every row at least.
inline constexpr std::int64_t default_logits_per_block = std::int64_t{1} << 22;

// hidden [B, T + k, hidden] in the head's type (position i's logits predict target i; those past T are not read, and
// their gradient is zero), targets [B, T] int64, temperature [B, T, 1] float32 (float64 for a float64 head, as tests
// take it) without gradient -> the log-prob of each target under logits / temperature [B, T] in the temperature's
// type and, where `entropy` is given, each position's entropy [B, T]. Gradients flow to the hidden states, the weight
// and the bias where they take them. Throws std::invalid_argument on other types, or fewer positions than targets.
torch::Tensor head_scores(const Head& head, const torch::Tensor& hidden, const torch::Tensor& targets,
                          const torch::Tensor& temperature, torch::Tensor* entropy,
                          std::int64_t logits_per_block = default_logits_per_block);

}  // namespace arclight::model
