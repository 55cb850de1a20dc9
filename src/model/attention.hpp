#pragma once
// Attention's core for the decoder (LibTorch; private to the model module): softmax over the scaled, soft-capped and
// masked scores of grouped queries, times the values, a block of queries at a time. No more than a block's scores
// exist at once, in the forward and, where gradients flow, in the backward, which recomputes each block's scores
// from the queries and keys instead of keeping the probabilities: a training sequence of T tokens holds T, not T^2,
// numbers a head in each layer until its backward (transformers' eager attention keeps the T^2 probabilities).
#include <torch/types.h>

#include <cstdint>
#include <optional>

namespace arclight::model {

// The score elements a block may hold: 2^24, 64 MiB of float32 probabilities; the scores and, in the backward, their
// gradients take a few times that beside them. A block has at least one query row (which may hold more).
inline constexpr std::int64_t default_scores_per_block = std::int64_t{1} << 24;

// q [B, kv_heads, groups, T, d]: query head h = kv_head * groups + group reads key head kv_head (transformers'
// repeat_kv), without copying the keys per group. k and v [B, kv_heads, keys, d]; blocked, broadcastable to
// [B, kv_heads, groups, T, keys], is true where a query may not see a key. The scores are q k^T * scale (a product,
// as transformers scales them), soft-capped at `softcap` where given, masked, softmax in float32, rounded to q's type
// before the product with v. -> [B, kv_heads, groups, T, d] in q's type.
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& blocked, double scale, std::optional<double> softcap,
                        std::int64_t scores_per_block = default_scores_per_block);

}  // namespace arclight::model
