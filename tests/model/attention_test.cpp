// Attention's core by blocks of queries (src/model/attention.hpp) against attention written out with autograd
// through every op, as transformers' eager attention computes it: the output and the gradients of the queries, keys
// and values, in float64 (to float32's rounding: the softmax is float32's, as transformers takes it) and in bfloat16
// (one block to the bit, blocks as near float64's as eager's), with grouped queries, a causal mask and a window, soft
// caps on and off, one block and many, a frozen input.
#include "../../src/model/attention.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/autograd.h>

#include <limits>
#include <optional>
#include <tuple>

using namespace arclight::model;

namespace {

struct Case {
  torch::Tensor q, k, v, blocked, dy;
  double scale = 0.3;
};

// Two rows, two key heads of three query heads each, `queries` queries after 4 earlier keys (a cache's), head_dim
// `dim`; the mask causal over the positions and, for the second row, a window of 5 too.
Case make_case(torch::ScalarType type, std::int64_t queries = 11, std::int64_t dim = 6) {
  torch::manual_seed(20261207);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  const std::int64_t keys = queries + 4;
  Case c;
  c.q = torch::randn({2, 2, 3, queries, dim}, options).to(type);
  c.k = torch::randn({2, 2, keys, dim}, options).to(type);
  c.v = torch::randn({2, 2, keys, dim}, options).to(type);
  c.dy = torch::randn({2, 2, 3, queries, dim}, options).to(type);
  const auto query = torch::arange(4, keys).view({1, queries, 1}), key = torch::arange(keys).view({1, 1, keys});
  const auto future = (key > query).expand({2, queries, keys}).clone();
  future[1] = future[1].logical_or((key <= query - 5)[0]);
  c.blocked = future.view({2, 1, 1, queries, keys});
  return c;
}

// The eager composition, every op in autograd's graph.
torch::Tensor eager(const Case& c, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                    std::optional<double> cap) {
  const std::int64_t t = q.size(3), d = q.size(4);
  const auto rows = q.reshape({2, 2, 3 * t, d});
  auto scores = (torch::matmul(rows, k.transpose(-2, -1)) * c.scale).view({2, 2, 3, t, -1});
  if (cap) scores = torch::tanh(scores / *cap) * *cap;
  scores = scores.masked_fill(c.blocked, -std::numeric_limits<float>::infinity());
  const auto p = torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type());
  return torch::matmul(p.view({2, 2, 3 * t, -1}), v).view(q.sizes());
}

struct Result {
  torch::Tensor y, dq, dk, dv;
};

constexpr std::int64_t eager_attention = -1;  // run's scores_per_block for the eager composition

// The output and gradients, in `type` (the case's own where none), by blocks of scores_per_block or eagerly; k
// without a gradient where frozen_k.
Result run(const Case& c, std::optional<double> cap, std::int64_t scores_per_block, bool frozen_k = false,
           std::optional<torch::ScalarType> type = std::nullopt) {
  const auto as = [&](const torch::Tensor& x) { return type ? x.to(*type) : x.clone(); };
  auto q = as(c.q).requires_grad_(), k = as(c.k).requires_grad_(!frozen_k), v = as(c.v).requires_grad_();
  const auto y = scores_per_block == eager_attention ? eager(c, q, k, v, cap)
                                                     : attention(q, k, v, c.blocked, c.scale, cap, scores_per_block);
  y.backward(as(c.dy));
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(attention_core)

// 2 * 2 * 3 * 15 = 180 scores a query row: 180 holds one row a block, 1,000 five, 2^24 all 11 at once.
BOOST_AUTO_TEST_CASE(blocks_of_queries_give_eager_attentions_output_and_gradients) {
  const Case c = make_case(torch::kDouble);
  for (const std::optional<double> cap : {std::optional<double>(), std::optional<double>(1.5)})
    for (const std::int64_t per_block : {std::int64_t{180}, std::int64_t{1000}, default_scores_per_block}) {
      BOOST_TEST_CONTEXT("cap " << cap.value_or(0) << ", " << per_block << " scores a block") {
        const Result ours = run(c, cap, per_block), theirs = run(c, cap, eager_attention);
        BOOST_TEST(max_difference(ours.y, theirs.y) < 1e-6);
        BOOST_TEST(max_difference(ours.dq, theirs.dq) < 1e-6);
        BOOST_TEST(max_difference(ours.dk, theirs.dk) < 1e-6);
        BOOST_TEST(max_difference(ours.dv, theirs.dv) < 1e-6);
      }
    }
  // The cap bites: without it the output differs
  BOOST_TEST(max_difference(run(c, 1.5, 1000).y, run(c, std::nullopt, 1000).y) > 1e-3);
}

// In bfloat16 one block is eager attention, output and gradients, to the bit. By blocks (one query row each), each
// figure is as near float64's eager attention as bfloat16's eager one is (within twice its error): head_dim 64, as
// real models' (bfloat16's products of a few elements round otherwise on the CPU).
BOOST_AUTO_TEST_CASE(in_bfloat16_one_block_is_eager_attention) {
  const Case c = make_case(torch::kDouble, 20, 64);
  for (const std::optional<double> cap : {std::optional<double>(), std::optional<double>(1.5)}) {
    BOOST_TEST_CONTEXT("cap " << cap.value_or(0)) {
      const Result whole = run(c, cap, default_scores_per_block, false, torch::kBFloat16),
                   eager_bf16 = run(c, cap, eager_attention, false, torch::kBFloat16);
      BOOST_TEST(torch::equal(whole.y, eager_bf16.y));
      BOOST_TEST(torch::equal(whole.dq, eager_bf16.dq));
      BOOST_TEST(torch::equal(whole.dk, eager_bf16.dk));
      BOOST_TEST(torch::equal(whole.dv, eager_bf16.dv));
      const Result rows = run(c, cap, 2 * 2 * 3 * 24, false, torch::kBFloat16), exact = run(c, cap, eager_attention);
      for (const auto& [ours, eager, truth] : {std::tuple{rows.y, eager_bf16.y, exact.y},
                                               {rows.dq, eager_bf16.dq, exact.dq},
                                               {rows.dk, eager_bf16.dk, exact.dk},
                                               {rows.dv, eager_bf16.dv, exact.dv}})
        BOOST_TEST(max_difference(ours, truth) <= 2 * max_difference(eager, truth));
    }
  }
}

// A frozen input (a projection without LoRA) gets no gradient, and the others' are as they were.
BOOST_AUTO_TEST_CASE(an_input_without_a_gradient_gets_none) {
  const Case c = make_case(torch::kDouble);
  const Result all = run(c, 1.5, 180), frozen = run(c, 1.5, 180, true);
  BOOST_TEST(!frozen.dk.defined());
  BOOST_TEST(torch::equal(all.dq, frozen.dq));
  BOOST_TEST(torch::equal(all.dv, frozen.dv));
}

// Without gradients (generation) the same blocks, no graph, even of inputs that could have one; no queries, no rows.
BOOST_AUTO_TEST_CASE(without_gradients_no_graph) {
  const Case c = make_case(torch::kFloat);
  torch::NoGradGuard no_grad;
  const auto q = c.q.clone().requires_grad_(), k = c.k.clone().requires_grad_(), v = c.v.clone().requires_grad_();
  const auto y = attention(q, k, v, c.blocked, c.scale, std::nullopt, 180);
  BOOST_TEST(!y.requires_grad());
  BOOST_TEST(max_difference(y, eager(c, c.q, c.k, c.v, std::nullopt)) < 1e-5);
  const auto none = attention(q.narrow(3, 0, 0), k, v, c.blocked.narrow(3, 0, 0), c.scale, std::nullopt, 180);
  BOOST_TEST((none.sizes() == torch::IntArrayRef{2, 2, 3, 0, 6}));
}

BOOST_AUTO_TEST_SUITE_END()
