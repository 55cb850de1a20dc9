// The trainer's optimizer state as checkpoints save and restore it.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "arclight/algo/trainer.hpp"
#include "trainer_fixtures.hpp"

using namespace arclight;

BOOST_AUTO_TEST_SUITE(trainer_state)

// A restore may load a version's state and then give the version up for the one before (its store does not read
// back): when that one was saved before the first step, no moment of the version given up may stay.
BOOST_AUTO_TEST_CASE(a_state_saved_before_the_first_step_leaves_no_moments_of_one_loaded_before) {
  const ModelConfig mc = trainer_test_model();
  const GrpoConfig gc;
  const int vocab = 11;
  model::Policy stepped_policy(mc, vocab, 5), restored_policy(mc, vocab, 5), fresh_policy(mc, vocab, 5);
  algo::Trainer stepped(stepped_policy, gc, nullptr), restored(restored_policy, gc, nullptr),
      fresh(fresh_policy, gc, nullptr);
  const auto batch = make_batch(13, vocab, 0);
  stepped.step(batch, algo::action_tokens(batch));
  const algo::OptimizerState after_a_step = stepped.optimizer_state();
  BOOST_REQUIRE(after_a_step.exp_avg.size() == stepped_policy.parameter_count());

  restored.load_optimizer_state(after_a_step);
  BOOST_TEST(restored.optimizer_state().exp_avg == after_a_step.exp_avg);
  restored.load_optimizer_state(fresh.optimizer_state());  // the version before, saved before the first step
  BOOST_TEST(restored.optimizer_state().exp_avg.empty());
  // Its next step is a first step, as a fresh trainer's.
  const auto next = make_batch(13, vocab, 1);
  const double tokens = algo::action_tokens(next);
  BOOST_TEST(restored.step(next, tokens).loss == fresh.step(next, tokens).loss);
  BOOST_TEST(restored_policy.flat_parameters() == fresh_policy.flat_parameters());
}

// A restore on GPUs fills AdamW's moments where they live (fresh_optimizer_state's buffers, over NCCL): filled with a
// saved state's moments, the trainer holds that state, and its next step is the stepped trainer's next step.
BOOST_AUTO_TEST_CASE(moments_filled_in_place_are_the_state_loaded) {
  const ModelConfig mc = trainer_test_model();
  const GrpoConfig gc;
  const int vocab = 11;
  model::Policy stepped_policy(mc, vocab, 5), filled_policy(mc, vocab, 5);
  algo::Trainer stepped(stepped_policy, gc, nullptr), filled(filled_policy, gc, nullptr);
  const auto batch = make_batch(13, vocab, 0);
  stepped.step(batch, algo::action_tokens(batch));
  const algo::OptimizerState saved = stepped.optimizer_state();
  const std::vector<float> weights = stepped_policy.flat_parameters();
  filled_policy.load_flat_parameters(weights.data(), weights.size());

  const algo::Trainer::MomentBuffers moments = filled.fresh_optimizer_state(saved.steps);
  BOOST_REQUIRE_EQUAL(moments.exp_avg.size(), saved.steps.size());
  std::size_t at = 0, with_state = 0;
  for (std::size_t i = 0; i < moments.exp_avg.size(); ++i) {
    const FloatBuffer m = moments.exp_avg[i], v = moments.exp_avg_sq[i];
    BOOST_TEST(m.device == -1);
    std::copy_n(saved.exp_avg.data() + at, m.size, m.data);
    std::copy_n(saved.exp_avg_sq.data() + at, v.size, v.data);
    with_state += m.size > 0;
    at += filled_policy.parameter_buffers()[i].size;
  }
  BOOST_TEST(with_state > 0u);
  const algo::OptimizerState back = filled.optimizer_state();
  BOOST_TEST(back.exp_avg == saved.exp_avg);
  BOOST_TEST(back.exp_avg_sq == saved.exp_avg_sq);
  BOOST_TEST(back.steps == saved.steps);
  const auto next = make_batch(13, vocab, 1);
  const double tokens = algo::action_tokens(next);
  BOOST_TEST(filled.step(next, tokens).loss == stepped.step(next, tokens).loss);
  BOOST_TEST(filled_policy.flat_parameters() == stepped_policy.flat_parameters());
}

// float16's loss scale (GradScaler's): a power of two times the loss, divided out of the summed gradient, leaves the
// step as it was (bit for bit in float32, where the scale is exact); one that makes the gradient overflow skips the
// step and halves the scale. (float16 itself needs a GPU, where a trainer starts at initial_loss_scale.)
BOOST_AUTO_TEST_CASE(a_loss_scale_leaves_the_step_and_an_overflow_skips_it_and_halves_the_scale) {
  const ModelConfig mc = trainer_test_model();
  const GrpoConfig gc;
  const int vocab = 11;
  model::Policy plain_policy(mc, vocab, 5), scaled_policy(mc, vocab, 5);
  algo::Trainer plain(plain_policy, gc, nullptr), scaled(scaled_policy, gc, nullptr);
  BOOST_TEST(plain.loss_scale() == 1.0);  // float32: none
  scaled.use_loss_scale(1024);
  const auto batch = make_batch(13, vocab, 0);
  const double tokens = algo::action_tokens(batch);
  BOOST_TEST(plain.step(batch, tokens).grad_norm == scaled.step(batch, tokens).grad_norm);
  BOOST_TEST(plain_policy.flat_parameters() == scaled_policy.flat_parameters());
  BOOST_TEST(scaled.loss_scale() == 1024.0);

  const std::vector<float> before = scaled_policy.flat_parameters();
  scaled.use_loss_scale(std::ldexp(1.0, 200));  // past float's range
  const auto next = make_batch(13, vocab, 1);
  BOOST_TEST(!std::isfinite(scaled.step(next, algo::action_tokens(next)).grad_norm));
  BOOST_TEST(scaled_policy.flat_parameters() == before);  // skipped
  BOOST_TEST(scaled.loss_scale() == std::ldexp(1.0, 199));
  // At 1 (overflows in a row) it still grows back after loss_scale_growth_steps good steps.
  scaled.use_loss_scale(1);
  const auto one = make_batch(1, vocab, 2);
  for (int i = 0; i < algo::Trainer::loss_scale_growth_steps; ++i) {
    BOOST_REQUIRE(scaled.loss_scale() == 1.0);
    scaled.step(one, algo::action_tokens(one));
  }
  BOOST_TEST(scaled.loss_scale() == 2.0);
  BOOST_CHECK_THROW(scaled.use_loss_scale(0.5), Error);
}

BOOST_AUTO_TEST_SUITE_END()
