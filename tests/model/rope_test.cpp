// RoPE's frequencies under YaRN scaling (src/model/rope.hpp's rope_inverse_frequencies) against the figures of
// transformers 5's _compute_yarn_parameters for the same settings (from tests/model/hf_reference.py's port of it):
// the truncated ramp, the ramp that is not, and one whose bounds meet. The attention factor on the cos and sin tables
// is checked end to end by hf_reference (the logits of its YaRN Qwen3).
#include "../../src/model/rope.hpp"

#include <boost/test/unit_test.hpp>

#include <vector>

using namespace arclight::model;

namespace {

// head_dim 10 over Qwen's RoPE base of 10^6.
Architecture yarn(double factor, bool truncate, double beta_fast = 32, double beta_slow = 1) {
  Architecture a;
  a.head_dim = 10;
  a.rope_theta = 1e6;
  HfConfig::RopeScaling s;
  s.type = "yarn";
  s.factor = factor;
  s.original_max_position_embeddings = 4096;
  s.truncate = truncate;
  s.beta_fast = beta_fast;
  s.beta_slow = beta_slow;
  a.rope_scaling = s;
  return a;
}

void expect_frequencies(const Architecture& a, const std::vector<double>& want) {
  const torch::Tensor got = rope_inverse_frequencies(a);
  BOOST_REQUIRE(got.numel() == std::int64_t(want.size()));
  for (std::size_t i = 0; i < want.size(); ++i)
    BOOST_TEST(got[std::int64_t(i)].item<double>() == want[i], boost::test_tools::tolerance(1e-6));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rope)

BOOST_AUTO_TEST_CASE(yarn_frequencies_as_transformers_computes_them) {
  // The ramp from dimension 1 to 3: two pairs kept, the third halfway, two divided by the factor.
  expect_frequencies(yarn(4, true),
                     {1.0, 0.06309573352336884, 0.0024881698191165924, 6.279713852563873e-05, 3.962232312915148e-06});
  // Not truncated: from 1.09 to 2.35, the third pair 0.72 of the way to divided.
  expect_frequencies(yarn(4, false),
                     {1.0, 0.06309573352336884, 0.0018168874084949493, 6.279713852563873e-05, 3.962232312915148e-06});
  // Both bounds at 1.59: a step there (the ramp 0.001 wide, not a division by zero).
  expect_frequencies(yarn(2, false, 8, 8),
                     {1.0, 0.06309573352336884, 0.0019905357621610165, 0.00012559427705127746, 7.924464625830296e-06});
}

BOOST_AUTO_TEST_SUITE_END()
