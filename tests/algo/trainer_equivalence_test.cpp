// K trainers on a split batch end with the same parameters as one trainer on the whole
// batch (mpirun -np 2 or more). Every rank also trains the single-trainer reference itself.
#include "../mpi_test_main.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "arclight/algo/trainer.hpp"
#include "arclight/comm/reducer.hpp"
#include "trainer_fixtures.hpp"

using namespace arclight;

namespace {
int rank_ = 0, size_ = 1;
}  // namespace

BOOST_AUTO_TEST_CASE(k_trainers_on_a_split_batch_end_like_one_on_the_whole) {
  const ModelConfig mc = trainer_test_model();
  GrpoConfig gc;
  gc.lr = 3e-3;
  gc.micro_batch = 3;  // several micro-batches: gradient accumulation too
  gc.grad_clip = 0.5;  // clipping acts on the summed gradient, the same everywhere
  const int vocab = 11;
  model::Policy split(mc, vocab, 5), whole(mc, vocab, 5);
  comm::ReducerConfig rc;  // small buckets: several all-reduces start while backward runs
  rc.first_bucket_bytes = 4 << 10;
  rc.bucket_bytes = 16 << 10;
  comm::MpiReducer reducer(MPI_COMM_WORLD, rc);
  algo::Trainer split_trainer(split, gc, &reducer), whole_trainer(whole, gc, nullptr);
  double worst = 0;
  for (int step = 0; step < 3; ++step) {
    auto batch = make_batch(13, vocab, step);
    std::vector<algo::Sample> shard;
    // Every size_-th sample: shards unequal in tokens (the coordinator's balanced cut would hide a weighting error)
    for (std::size_t i = rank_; i < batch.size(); i += size_) shard.push_back(batch[i]);
    const double total = algo::action_tokens(batch);
    split_trainer.step(shard, total);
    whole_trainer.step(batch, total);
    if (step == 0) BOOST_TEST(reducer.bucket_count() > 1u);
    auto a = split.flat_parameters(), b = whole.flat_parameters();
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  }
  double everywhere = 0;
  MPI_Allreduce(&worst, &everywhere, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  BOOST_TEST_MESSAGE(size_ << " trainers vs 1: largest parameter difference after 3 steps " << everywhere);
  // Sums in another order differ in the last bits; AdamW divides by sqrt(v), so where a gradient is near zero that
  // moves a parameter by a small fraction of lr. A wrong reduction (a shard lost or counted twice) moves it by ~lr.
  BOOST_TEST(everywhere < gc.lr / 100);
}

// Fewer samples than trainers: a trainer with none joins the others' all-reduces (which hung: its all-reduces were
// all blocking, theirs non-blocking during backward) and takes their step. A batch with no sample at all takes none
// (AdamW's momentum alone would move the weights).
BOOST_AUTO_TEST_CASE(a_trainer_without_a_share_takes_the_step_and_an_empty_batch_takes_none) {
  const ModelConfig mc = trainer_test_model();
  GrpoConfig gc;
  gc.lr = 3e-3;
  const int vocab = 11;
  model::Policy split(mc, vocab, 5), whole(mc, vocab, 5);
  comm::ReducerConfig rc;
  rc.first_bucket_bytes = 4 << 10;
  rc.bucket_bytes = 16 << 10;
  comm::MpiReducer reducer(MPI_COMM_WORLD, rc);
  algo::Trainer split_trainer(split, gc, &reducer), whole_trainer(whole, gc, nullptr);
  double worst = 0;
  for (int count : {1, 0, 1}) {
    const auto batch = make_batch(count, vocab, 7 + count);
    const std::vector<algo::Sample> shard = rank_ == 0 ? batch : std::vector<algo::Sample>{};
    const auto before = whole.flat_parameters();
    split_trainer.step(shard, algo::action_tokens(batch));
    whole_trainer.step(batch, algo::action_tokens(batch));
    const auto a = split.flat_parameters(), b = whole.flat_parameters();
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
    if (count == 0) BOOST_TEST((b == before), "an empty batch leaves the weights as they were");
    if (count == 1) BOOST_TEST((b != before), "one sample moves them");
  }
  double everywhere = 0;
  MPI_Allreduce(&worst, &everywhere, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  BOOST_TEST(everywhere < gc.lr / 100);
}

// Sums that differ in their last bits from trainer to trainer (as threads that sum in other orders leave them): every
// trainer still clips by the first one's norm, so none drifts from the others by the clipping.
BOOST_AUTO_TEST_CASE(every_trainer_clips_by_the_first_ones_norm) {
  struct Perturbed : GradientReducer {  // the MPI sum, then a little more on every rank but the first
    comm::MpiReducer inner{MPI_COMM_WORLD, comm::ReducerConfig{}};
    std::vector<FloatBuffer> buffers;
    void begin(const std::vector<FloatBuffer>& b) override { inner.begin(buffers = b); }
    void ready(std::size_t i) override { inner.ready(i); }
    void finish() override {
      inner.finish();
      if (rank_ > 0)
        for (std::size_t i = 0; i < buffers.front().size; ++i) buffers.front().data[i] *= 1.0001f;
    }
    double leaders_value(double value) override { return inner.leaders_value(value); }
  } reducer;
  GrpoConfig gc;
  gc.lr = 3e-3;
  gc.grad_clip = 1e-6;  // clipping acts on every step
  model::Policy policy(trainer_test_model(), 11, 5);
  algo::Trainer trainer(policy, gc, &reducer);
  const auto batch = make_batch(4, 11, 3);
  const algo::TrainStats stats = trainer.step(batch, algo::action_tokens(batch) * size_);
  double lowest = 0, highest = 0;
  MPI_Allreduce(&stats.grad_norm, &lowest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&stats.grad_norm, &highest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  BOOST_TEST(lowest > 0);
  BOOST_TEST(lowest == highest, "the norms the trainers clipped by: " << lowest << " to " << highest);
  // The scale applied, not only the norm reported: every parameter but the first (whose gradient differs) came out
  // of the step the same, bit for bit, on every trainer.
  const std::size_t first = policy.parameter_buffers().front().size;
  std::vector<float> mine = policy.flat_parameters(), leaders = mine;
  MPI_Bcast(leaders.data(), static_cast<int>(leaders.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  BOOST_REQUIRE(first < mine.size());
  BOOST_TEST(std::equal(mine.begin() + first, mine.end(), leaders.begin() + first));
}

int main(int argc, char** argv) { return mpi_test_main(argc, argv, rank_, size_); }
