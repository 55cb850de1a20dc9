#include "attention.hpp"

#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/tanh_backward.h>
#include <torch/autograd.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

namespace arclight::model {

namespace {

// The query rows [first, first + rows) of q and of the mask (a mask of one row serves every row).
struct Block {
  std::int64_t first, rows;
  torch::Tensor queries(const torch::Tensor& q) const { return q.narrow(3, first, rows); }
  torch::Tensor mask(const torch::Tensor& blocked) const {
    return blocked.size(3) == 1 ? blocked : blocked.narrow(3, first, rows);
  }
};

std::vector<Block> blocks_of(const torch::Tensor& q, const torch::Tensor& k, std::int64_t scores_per_block) {
  const std::int64_t t = q.size(3), per_row = q.size(0) * q.size(1) * q.size(2) * k.size(2);
  std::vector<Block> out;
  if (t == 0) return out;  // no queries: no block (a block's scores take their shape from its rows)
  const std::int64_t rows = std::clamp<std::int64_t>(scores_per_block / std::max<std::int64_t>(per_row, 1), 1, t);
  for (std::int64_t first = 0; first < t; first += rows) out.push_back({first, std::min(rows, t - first)});
  return out;
}

// One block's queries as rows of a matrix per key head: [B, kv_heads, groups * rows, d] (a copy where the block is a
// part of several groups' rows). One product per key head: a broadcast product over the groups loses precision in
// bfloat16 on the CPU.
torch::Tensor as_rows(const torch::Tensor& q_block) {
  return q_block.reshape({q_block.size(0), q_block.size(1), q_block.size(2) * q_block.size(3), q_block.size(4)});
}

// A block's probabilities [B, kv_heads, groups, rows, keys] in float32; where capped, tanh(scores / cap) into `tanh`
// (the backward's derivative of the cap).
torch::Tensor probabilities(const torch::Tensor& q_rows, const torch::Tensor& k, const torch::Tensor& mask,
                            const torch::Tensor& q_block, double scale, std::optional<double> softcap,
                            torch::Tensor* tanh = nullptr) {
  auto scores = (torch::matmul(q_rows, k.transpose(-2, -1)) * scale)
                    .view({q_block.size(0), q_block.size(1), q_block.size(2), q_block.size(3), -1});
  if (softcap) {
    auto bent = torch::tanh(scores / *softcap);
    scores = bent * *softcap;
    if (tanh) *tanh = std::move(bent);
  }
  return torch::softmax(scores.masked_fill(mask, -std::numeric_limits<float>::infinity()), -1, torch::kFloat);
}

torch::Tensor attend_block(const torch::Tensor& q_block, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& mask, double scale, std::optional<double> softcap) {
  const auto rows = as_rows(q_block);
  const auto p = probabilities(rows, k, mask, q_block, scale, softcap).to(q_block.scalar_type());
  return torch::matmul(p.view({rows.size(0), rows.size(1), rows.size(2), -1}), v).view(q_block.sizes());
}

torch::Tensor attend_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& blocked, double scale, std::optional<double> softcap,
                            std::int64_t scores_per_block) {
  const std::vector<Block> blocks = blocks_of(q, k, scores_per_block);
  if (blocks.size() == 1) return attend_block(q, k, v, blocked, scale, softcap);
  auto y = torch::empty(q.sizes(), q.options());  // no block: no queries, no rows
  for (const Block& b : blocks) b.queries(y).copy_(attend_block(b.queries(q), k, v, b.mask(blocked), scale, softcap));
  return y;
}

// The blocks in the backward too: each block's probabilities are recomputed from q and k (the forward keeps none),
// and the gradients follow softmax's, the cap's and the products' derivatives with autograd's own operations, in its
// order (float32 for the softmax, q's type elsewhere): one block's are eager attention's to the bit. The keys' and
// values' are summed over blocks in float32; those of an input that needs none (a frozen projection's under LoRA)
// are not computed.
class BlockedAttention : public torch::autograd::Function<BlockedAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& blocked, double scale, double softcap,
                               std::int64_t scores_per_block) {
    ctx->save_for_backward({q, k, v, blocked});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["scores_per_block"] = scores_per_block;
    return attend_blocks(q, k, v, blocked, scale, cap_of(softcap), scores_per_block);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &blocked = saved[3];
    const double scale = ctx->saved_data["scale"].toDouble();
    const std::optional<double> softcap = cap_of(ctx->saved_data["softcap"].toDouble());
    const torch::Tensor dy = grads[0];
    const auto type = q.scalar_type();
    const bool want_q = ctx->needs_input_grad(0), want_k = ctx->needs_input_grad(1), want_v = ctx->needs_input_grad(2);
    torch::Tensor dq, dk, dv;
    if (want_q) dq = torch::empty(q.sizes(), q.options());
    if (want_k) dk = torch::zeros(k.sizes(), k.options().dtype(torch::kFloat));
    if (want_v) dv = torch::zeros(v.sizes(), v.options().dtype(torch::kFloat));
    for (const Block& b : blocks_of(q, k, ctx->saved_data["scores_per_block"].toInt())) {
      const auto q_block = b.queries(q), rows = as_rows(q_block), mask = b.mask(blocked);
      torch::Tensor bent;
      const auto p = probabilities(rows, k, mask, q_block, scale, softcap, &bent);
      const auto flat = [&](const torch::Tensor& x) {
        return x.reshape({rows.size(0), rows.size(1), rows.size(2), -1});
      };
      const auto dy_rows = as_rows(b.queries(dy));
      if (want_v) dv += torch::matmul(flat(p.to(type)).transpose(-2, -1), dy_rows);
      if (!want_q && !want_k) continue;
      // softmax's backward in float32, then the masked scores' gradient in q's type
      const auto dp = torch::matmul(dy_rows, v.transpose(-2, -1)).view(p.sizes()).to(torch::kFloat);
      auto ds = at::_softmax_backward_data(dp, p, -1, torch::kFloat).to(type).masked_fill(mask, 0);
      if (softcap) ds = at::tanh_backward(ds * *softcap, bent) / *softcap;  // bent = tanh(scores / cap)
      const auto d_scores = flat(ds) * scale;
      if (want_q) b.queries(dq).copy_(torch::matmul(d_scores, k).view(q_block.sizes()));
      if (want_k) dk += torch::matmul(d_scores.transpose(-2, -1), rows);
    }
    return {dq,
            want_k ? dk.to(type) : dk,
            want_v ? dv.to(type) : dv,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }

 private:
  static std::optional<double> cap_of(double softcap) {
    return softcap > 0 ? std::optional<double>(softcap) : std::nullopt;
  }
};

}  // namespace

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& blocked, double scale, std::optional<double> softcap,
                        std::int64_t scores_per_block) {
  const bool learns = torch::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  if (!learns) return attend_blocks(q, k, v, blocked, scale, softcap, scores_per_block);
  return BlockedAttention::apply(q, k, v, blocked, scale, softcap.value_or(0.0), scores_per_block);
}

}  // namespace arclight::model
