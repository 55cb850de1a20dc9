// GRPO steps on a GPU end where the same steps on the CPU end (run where a GPU is: scripts/gpu_check.sh; skipped,
// saying so, elsewhere).
#include <boost/test/unit_test.hpp>
#include <torch/cuda.h>

#include <cmath>

#include "arclight/algo/trainer.hpp"
#include "trainer_fixtures.hpp"

using namespace arclight;

namespace {
boost::test_tools::assertion_result cuda_present(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result present(torch::cuda::is_available());
  present.message() << "no GPU here (or a LibTorch without CUDA): the trainer's CUDA path is not run";
  return present;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(trainer_gpu)

BOOST_AUTO_TEST_CASE(grpo_steps_on_a_gpu_end_like_those_on_the_cpu, *boost::unit_test::precondition(cuda_present)) {
  const ModelConfig mc = trainer_test_model();
  GrpoConfig gc;
  gc.lr = 3e-3;
  gc.micro_batch = 3;
  gc.grad_clip = 0.5;
  gc.kl_coef = 0.01;  // the reference policy moves to the GPU too
  const int vocab = 11;
  model::Policy cpu(mc, vocab, 5), gpu(mc, vocab, 5);
  gpu.place_on(0);
  algo::Trainer on_cpu(cpu, gc, nullptr), on_gpu(gpu, gc, nullptr);
  for (int step = 0; step < 3; ++step) {
    const auto batch = make_batch(13, vocab, step);
    const double total = algo::action_tokens(batch);
    const auto a = on_cpu.step(batch, total), b = on_gpu.step(batch, total);
    BOOST_TEST(std::abs(a.loss - b.loss) < 1e-4, "step " << step << ": loss " << a.loss << " vs " << b.loss);
  }
  const auto a = cpu.flat_parameters(), b = gpu.flat_parameters();
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  BOOST_TEST_MESSAGE("GPU vs CPU: largest parameter difference after 3 steps " << worst);
  BOOST_TEST(worst < gc.lr / 100);  // as two trainers' sums in another order (trainer_equivalence_test)
  const auto moments = on_gpu.optimizer_state();
  BOOST_TEST(moments.exp_avg.size() == gpu.parameter_count());  // read back from the device
}

BOOST_AUTO_TEST_SUITE_END()
