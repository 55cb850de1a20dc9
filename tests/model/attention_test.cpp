// Attention's core by blocks of queries (src/model/attention.hpp) against attention written out with autograd
// through every op, as transformers' eager attention computes it: the output and the gradients of the queries, keys
// and values, in float64 (to float32's rounding: the softmax is float32's, as transformers takes it) and in bfloat16
// (to its precision), with grouped queries, a causal mask and a
// window, soft caps on and off, one block and many.
#include "../../src/model/attention.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/autograd.h>

#include <limits>
#include <optional>

using namespace arclight::model;

namespace {

struct Case {
  torch::Tensor q, k, v, blocked, dy;
  double scale = 0.3;
};

// Two rows, two key heads of three query heads each, 11 queries after 4 earlier keys (a cache's), head_dim 6; the
// mask causal over the 15 positions and, for the second row, a window of 5 too.
Case make_case(torch::ScalarType type) {
  torch::manual_seed(20261207);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  Case c;
  c.q = torch::randn({2, 2, 3, 11, 6}, options).to(type);
  c.k = torch::randn({2, 2, 15, 6}, options).to(type);
  c.v = torch::randn({2, 2, 15, 6}, options).to(type);
  c.dy = torch::randn({2, 2, 3, 11, 6}, options).to(type);
  const auto query = torch::arange(4, 15).view({1, 11, 1}), key = torch::arange(15).view({1, 1, 15});
  const auto future = (key > query).expand({2, 11, 15}).clone();
  future[1] = future[1].logical_or((key <= query - 5)[0]);
  c.blocked = future.view({2, 1, 1, 11, 15});
  return c;
}

// The eager composition, every op in autograd's graph.
torch::Tensor eager(const Case& c, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                    std::optional<double> cap) {
  const auto rows = q.reshape({2, 2, 33, 6});
  auto scores = (torch::matmul(rows, k.transpose(-2, -1)) * c.scale).view({2, 2, 3, 11, -1});
  if (cap) scores = torch::tanh(scores / *cap) * *cap;
  scores = scores.masked_fill(c.blocked, -std::numeric_limits<float>::infinity());
  const auto p = torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type());
  return torch::matmul(p.view({2, 2, 33, -1}), v).view(q.sizes());
}

struct Result {
  torch::Tensor y, dq, dk, dv;
};

Result run(const Case& c, std::optional<double> cap, std::int64_t scores_per_block, bool blocked_core) {
  auto q = c.q.clone().requires_grad_(), k = c.k.clone().requires_grad_(), v = c.v.clone().requires_grad_();
  const auto y = blocked_core ? attention(q, k, v, c.blocked, c.scale, cap, scores_per_block) : eager(c, q, k, v, cap);
  y.backward(c.dy);
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

double max_magnitude(const torch::Tensor& a) { return a.to(torch::kDouble).abs().max().item<double>(); }

}  // namespace

BOOST_AUTO_TEST_SUITE(attention_core)

// 2 * 2 * 3 * 15 = 180 scores a query row: 180 holds one row a block, 1,000 five, 2^24 all 11 at once.
BOOST_AUTO_TEST_CASE(blocks_of_queries_give_eager_attentions_output_and_gradients) {
  const Case c = make_case(torch::kDouble);
  for (const std::optional<double> cap : {std::optional<double>(), std::optional<double>(1.5)})
    for (const std::int64_t per_block : {std::int64_t{180}, std::int64_t{1000}, default_scores_per_block}) {
      BOOST_TEST_CONTEXT("cap " << cap.value_or(0) << ", " << per_block << " scores a block") {
        const Result ours = run(c, cap, per_block, true), theirs = run(c, cap, per_block, false);
        BOOST_TEST(max_difference(ours.y, theirs.y) < 1e-6);
        BOOST_TEST(max_difference(ours.dq, theirs.dq) < 1e-6);
        BOOST_TEST(max_difference(ours.dk, theirs.dk) < 1e-6);
        BOOST_TEST(max_difference(ours.dv, theirs.dv) < 1e-6);
      }
    }
  // The cap bites: without it the output differs
  BOOST_TEST(max_difference(run(c, 1.5, 1000, true).y, run(c, std::nullopt, 1000, true).y) > 1e-3);
}

// In bfloat16 the forward of one block is eager's to the bit; by blocks, and the gradients, within bfloat16's
// precision of eager's (the keys' and values' gradients summed over blocks in float32).
BOOST_AUTO_TEST_CASE(in_bfloat16_within_its_precision) {
  const Case c = make_case(torch::kBFloat16);
  for (const std::optional<double> cap : {std::optional<double>(), std::optional<double>(1.5)}) {
    BOOST_TEST_CONTEXT("cap " << cap.value_or(0)) {
      const Result whole = run(c, cap, default_scores_per_block, true), theirs = run(c, cap, 0, false);
      BOOST_TEST(torch::equal(whole.y, theirs.y));
      const Result ours = run(c, cap, 180, true);
      BOOST_TEST(max_difference(ours.y, theirs.y) <= 1e-2 * max_magnitude(theirs.y));
      for (const auto& [mine, eager_grad] : {std::pair{ours.dq, theirs.dq}, {ours.dk, theirs.dk}, {ours.dv, theirs.dv}})
        BOOST_TEST(max_difference(mine, eager_grad) <= 2e-2 * max_magnitude(eager_grad));
    }
  }
}

// Without gradients (generation) the same blocks, no graph.
BOOST_AUTO_TEST_CASE(without_gradients_no_graph) {
  const Case c = make_case(torch::kFloat);
  torch::NoGradGuard no_grad;
  const auto y = attention(c.q, c.k, c.v, c.blocked, c.scale, std::nullopt, 180);
  BOOST_TEST(!y.requires_grad());
  BOOST_TEST(max_difference(y, eager(c, c.q, c.k, c.v, std::nullopt)) < 1e-5);
}

BOOST_AUTO_TEST_SUITE_END()
