// grpo.train_blocks = N: only the last N blocks, the final norm and the head train; with model.gradient_checkpointing
// too (the layers that train run again in the backward, and their gradients' hooks fire there).
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "arclight/algo/trainer.hpp"
#include "trainer_fixtures.hpp"

using namespace arclight;

namespace {
// One trainer, nothing to sum with: records what a step hands the reducer.
struct RecordingReducer : GradientReducer {
  std::vector<std::size_t> sizes;
  std::vector<int> times_ready;
  int finished = 0;
  void begin(const std::vector<FloatBuffer>& buffers) override {
    sizes.clear();
    for (const FloatBuffer& b : buffers) sizes.push_back(b.size);
    times_ready.assign(buffers.size(), 0);
  }
  void ready(std::size_t index) override {
    BOOST_REQUIRE(index < times_ready.size());
    ++times_ready[index];
  }
  void finish() override { ++finished; }
  double leaders_value(double value) override { return value; }
};

bool trains_in_the_last_block(const std::string& name, int layers) {
  return name.rfind("lm_head.", 0) == 0 || name.rfind("model.norm.", 0) == 0 || model::layer_of(name) == layers - 1;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(trainer_blocks)

// A frozen parameter gets no gradient at all (backward stops at the block that trains: the embeddings' and the lower
// blocks' were computed and thrown away), and the trainers sum only the gradients that train.
BOOST_DATA_TEST_CASE(frozen_blocks_stay_out_of_backward_and_of_the_gradient_sum,
                     boost::unit_test::data::make({false, true}), recompute) {
  ModelConfig mc = trainer_test_model();
  mc.n_layers = 3;
  mc.gradient_checkpointing = recompute;
  GrpoConfig gc;
  gc.train_blocks = 1;
  const int vocab = 11;
  model::Policy policy(mc, vocab, 5);
  RecordingReducer reducer;
  algo::Trainer trainer(policy, gc, &reducer);
  const std::vector<float> before = policy.flat_parameters();
  const auto batch = make_batch(13, vocab, 0);
  trainer.step(batch, algo::action_tokens(batch));
  const std::vector<float> after = policy.flat_parameters();

  const std::vector<std::string> names = policy.parameter_names();
  const std::vector<FloatBuffer> gradients = policy.gradient_buffers();
  BOOST_REQUIRE(names.size() == gradients.size());
  std::vector<std::size_t> trained_sizes;
  std::size_t offset = 0, frozen = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t n = gradients[i].size;
    const bool trains = trains_in_the_last_block(names[i], mc.n_layers);
    const bool has_gradient = std::any_of(gradients[i].data, gradients[i].data + n, [](float g) { return g != 0; });
    const bool moved = !std::equal(before.begin() + offset, before.begin() + offset + n, after.begin() + offset);
    BOOST_TEST(has_gradient == trains, names[i] << (trains ? " has no gradient" : " has a gradient"));
    BOOST_TEST(moved == trains, names[i] << (trains ? " did not train" : " moved"));
    if (trains) trained_sizes.push_back(n);
    frozen += !trains;
    offset += n;
  }
  BOOST_TEST(frozen > 0u);
  BOOST_TEST(reducer.sizes == trained_sizes);  // in the parameters' order, as every trainer's
  BOOST_TEST(reducer.times_ready == std::vector<int>(trained_sizes.size(), 1));
  BOOST_TEST(reducer.finished == 1);
}

BOOST_AUTO_TEST_SUITE_END()
