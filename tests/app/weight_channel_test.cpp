// The split layouts' weight channel under MPI (mpirun -np 3): rank 0 is the trainer leader, ranks 1 and 2 runners.
// Each version reaches every runner whole (float32), or rounded to 16 bits when comm.compression says so, and the
// end of training ends every runner's poll. Also the trainers' agreement on their gradient transport.
#include "../mpi_test_main.hpp"
#include "../../src/app/roles.hpp"
#include "../../src/app/weight_channel.hpp"
#include "../model/test_models.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "arclight/comm/gpu.hpp"
#include "arclight/comm/reducer.hpp"
#include "arclight/core/version.hpp"

using namespace arclight;

namespace {
int rank_ = 0, size_ = 1;

// Weights that 16 bits cannot all hold exactly: what a runner loads shows which rounding the channel used.
std::vector<float> weights_of_version(std::int64_t version, std::size_t count) {
  std::vector<float> w(count);
  for (std::size_t i = 0; i < count; ++i) w[i] = 0.001f * float(version) + 1e-4f * float(i % 997) + 1.0f / 3.0f;
  return w;
}

float rounded(Compression c, float v) {
  if (c == Compression::bf16) return comm::from_bf16(comm::to_bf16(v));
  if (c == Compression::fp16) return comm::from_fp16(comm::to_fp16(v));
  return v;
}

// Two versions and the end, as a runner must see them. `device` >= 0: every rank's policy there, the weights over NCCL.
void check_channel(Compression compression, int device = -1) {
  model::Policy policy(small(), 11, 5);
  if (device >= 0) policy.place_on(device);
  MPI_Comm sync;  // a communicator a case: nothing of one case meets the next
  MPI_Comm_dup(MPI_COMM_WORLD, &sync);
  app::SplitWeights channel(sync, rank_ == 0, 30.0, compression, device);
  channel.attach(policy);
  const std::size_t count = policy.parameter_count();
  if (rank_ == 0) {
    for (std::int64_t v = 1; v <= 2; ++v) {
      policy.load_flat_parameters(weights_of_version(v, count).data(), count);
      channel.publish(v, policy);
    }
    channel.stop();
    return;
  }
  std::uint64_t version = 0;
  std::size_t wrong = 0, exact = 0;
  // Bounded well within the device check's 120 s for both cases: a rank whose NCCL set-up failed never sends.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool running = true;
  while (running && std::chrono::steady_clock::now() < deadline) {
    const std::uint64_t before = version;
    running = channel.poll(policy, version);
    if (version == before) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    const std::vector<float> want = weights_of_version(static_cast<std::int64_t>(version), count);
    const std::vector<float> got = policy.flat_parameters();
    BOOST_REQUIRE_EQUAL(got.size(), count);
    for (std::size_t i = 0; i < count; ++i) {
      wrong += got[i] != rounded(compression, want[i]);
      exact += got[i] == want[i];
    }
  }
  BOOST_TEST(!running, "the end of training never came");
  BOOST_TEST(version == 2u);  // the newest; version 1 may be skipped when both have come
  BOOST_TEST(wrong == 0u);
  if (compression != Compression::none) BOOST_TEST(exact < count / 2, "the weights were not rounded to 16 bits");
}

// A leader with hung_seconds 1 s that publishes versions 1 to 3 while its runners are in a long batch (a runner loads
// between batches), waits `then` for the batch's end, and stops. Returns on the leader whether it still broadcasts;
// on a runner its last version. A runner's batch follows its first version: policy calls for `batch`, looking for
// versions after each as the built-in runner does; with `hang` it first makes no MPI call at all for that long.
struct LongBatch {
  std::chrono::milliseconds batch, hang{0}, then;
};
std::uint64_t run_a_long_batch(const LongBatch& how, bool& broadcasting) {
  model::Policy policy(small(), 11, 5);
  MPI_Comm sync;
  MPI_Comm_dup(MPI_COMM_WORLD, &sync);
  app::SplitWeights channel(sync, rank_ == 0, 1.0);
  channel.attach(policy);
  const std::size_t count = policy.parameter_count();
  if (rank_ == 0) {
    for (std::int64_t v = 1; v <= 3; ++v) {
      policy.load_flat_parameters(weights_of_version(v, count).data(), count);
      channel.publish(v, policy);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    std::this_thread::sleep_for(how.then);
    channel.stop();
    broadcasting = channel.broadcasting();
    return 0;
  }
  std::uint64_t version = 0;
  bool running = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (running && std::chrono::steady_clock::now() < deadline) {
    const std::uint64_t before = version;
    running = channel.poll(policy, version);
    if (version == before || before != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    const auto batch_end = std::chrono::steady_clock::now() + how.batch;
    std::this_thread::sleep_for(how.hang);
    while (std::chrono::steady_clock::now() < batch_end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      channel.arrived(version);
    }
  }
  BOOST_TEST(!running, "the end (or the fence) never came");
  return version;
}

// A GPU a rank; or one GPU for all with ARCLIGHT_TEST_SHARED_GPU=1 (scripts/gpu_check.sh on a one-GPU machine): NCCL
// takes one rank per GPU a host, so each rank is a host of its own to NCCL (NCCL_HOSTID), over sockets on loopback.
boost::test_tools::assertion_result gpus_for_nccl(boost::unit_test::test_unit_id) {
  const int gpus = comm::visible_gpu_count();
  const bool shared = std::getenv("ARCLIGHT_TEST_SHARED_GPU") != nullptr;
  boost::test_tools::assertion_result ok(comm::nccl_available() && build_info().torch_cuda && gpus > 0 &&
                                         (gpus >= size_ || shared));
  ok.message() << "needs NCCL, a CUDA LibTorch and a GPU a rank, or ARCLIGHT_TEST_SHARED_GPU=1 (here " << gpus
               << " GPU(s) for " << size_ << " ranks): the weights over NCCL are not tried";
  return ok;
}

int nccl_device() {
  const int gpus = comm::visible_gpu_count();
  if (gpus < size_) {
    setenv("NCCL_HOSTID", ("arclight-test-rank-" + std::to_string(rank_)).c_str(), 1);  // before NCCL's first call
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  }
  return rank_ % gpus;
}

Layout split_layout(int runners) {
  LayoutConfig lc;
  lc.mode = LayoutMode::split;
  lc.trainers = "1";
  return make_layout(lc, 2 + runners);  // rank 0 the coordinator, rank 1 the trainer
}
}  // namespace

BOOST_AUTO_TEST_SUITE(weight_channel)

BOOST_AUTO_TEST_CASE(full_weights) { check_channel(Compression::none); }
BOOST_AUTO_TEST_CASE(bf16_weights) { check_channel(Compression::bf16); }
BOOST_AUTO_TEST_CASE(fp16_weights) { check_channel(Compression::fp16); }

// Runners in a batch longer than hung_seconds acknowledge versions as they come: the leader, which waits for version
// 2's acknowledgements before it sends version 3, neither turns to point-to-point sends nor fences them (before, a
// runner acknowledged a version when it loaded it: the leader took it for a hung one).
BOOST_AUTO_TEST_CASE(a_runner_in_a_long_batch_is_not_taken_for_a_hung_one) {
  bool broadcasting = false;
  const std::uint64_t version =
      run_a_long_batch({std::chrono::milliseconds(2500), {}, std::chrono::seconds(3)}, broadcasting);
  if (rank_ == 0) BOOST_TEST(broadcasting, "a runner in a long batch was taken for a hung one");
  if (rank_ > 0) BOOST_TEST(version == 3u);
}

// One runner hangs (rank 1: no MPI call for 4 s) while the other is in a long batch (rank 2): the leader turns to
// point-to-point sends and fences the hung one only; the busy one takes the turn during its batch and gets every
// version (before, it took the turn after its batch, and was fenced too).
BOOST_AUTO_TEST_CASE(a_hung_runner_fences_only_itself) {
  bool broadcasting = true;
  const std::chrono::milliseconds hang(rank_ == 1 ? 4000 : 0);
  const std::uint64_t version =
      run_a_long_batch({std::chrono::seconds(4), hang, std::chrono::seconds(4)}, broadcasting);
  if (rank_ == 0) BOOST_TEST(!broadcasting, "the hung runner did not turn the channel to point to point");
  if (rank_ == 2) BOOST_TEST(version == 3u, "the busy runner was fenced");
}

BOOST_AUTO_TEST_CASE(full_weights_over_nccl, *boost::unit_test::precondition(gpus_for_nccl)) {
  check_channel(Compression::none, nccl_device());
}
BOOST_AUTO_TEST_CASE(bf16_weights_over_nccl, *boost::unit_test::precondition(gpus_for_nccl)) {
  check_channel(Compression::bf16, nccl_device());
}

// NCCL where the leader and every runner have a GPU of their own; MPI where any is on the CPU, two share a GPU, or
// NCCL is not built in.
BOOST_AUTO_TEST_CASE(weights_go_over_nccl_only_between_gpus_of_their_own) {
  const Layout layout = split_layout(2);  // 0 coordinator, 1 trainer leader, 2 and 3 runners
  const std::vector<std::string> one_host(4, "node0"), two_hosts{"node0", "node0", "node1", "node1"};
  const std::string a = "0000:1b:00.0", b = "0000:3b:00.0", c = "0000:5d:00.0";
  BOOST_TEST(app::weights_over_nccl(layout, one_host, {"", a, b, c}, true));
  BOOST_TEST(!app::weights_over_nccl(layout, one_host, {"", a, b, c}, false));  // NCCL not built in
  BOOST_TEST(!app::weights_over_nccl(layout, one_host, {"", a, "", c}, true));  // a runner on the CPU
  BOOST_TEST(!app::weights_over_nccl(layout, one_host, {"", a, b, b}, true));   // two runners on one GPU
  BOOST_TEST(!app::weights_over_nccl(layout, one_host, {"", a, a, b}, true));   // a runner on the leader's GPU
  BOOST_TEST(app::weights_over_nccl(layout, two_hosts, {"", a, a, b}, true));   // the same bus on another host
  LayoutConfig colocated;
  colocated.mode = LayoutMode::colocated;
  BOOST_TEST(!app::weights_over_nccl(make_layout(colocated, 3), one_host, {"", a, b}, true));
}

// Trainers whose gradients live on GPUs need NCCL and a GPU each: said at start-up (the MPI reducer refused GPU
// buffers at the first step's all-reduce, and two trainers on one GPU failed NCCL's set-up with "invalid usage").
BOOST_AUTO_TEST_CASE(trainers_on_gpus_need_nccl_and_a_gpu_each) {
  LayoutConfig two;
  two.trainers = "2";
  const Layout layout = make_layout(two, 4);  // 0 coordinator, 1 and 2 trainers, 3 a runner
  const std::vector<std::string> one_host(4, "node0"), two_hosts{"node0", "node0", "node1", "node1"};
  const std::string a = "0000:1b:00.0", b = "0000:3b:00.0";
  BOOST_TEST(app::gradients_on_gpus_problem(layout, one_host, {"", a, b, ""}, true).empty());
  BOOST_TEST(app::gradients_on_gpus_problem(layout, one_host, {"", "", "", ""}, false).empty());  // on CPUs: MPI
  BOOST_TEST(app::gradients_on_gpus_problem(layout, one_host, {"", a, b, ""}, false)
                 .find("NCCL, which this build "
                       "lacks") != std::string::npos);
  BOOST_TEST(
      app::gradients_on_gpus_problem(layout, one_host, {"", a, a, ""}, true).find("trainers 1 and 2 share GPU") !=
      std::string::npos);
  BOOST_TEST(app::gradients_on_gpus_problem(layout, two_hosts, {"", a, a, ""}, true).empty());  // one bus, two hosts
  LayoutConfig one;
  one.trainers = "1";
  BOOST_TEST(
      app::gradients_on_gpus_problem(make_layout(one, 4), one_host, {"", a, a, a}, false).empty());  // no all-reduce
}

// Colocated layouts: the runner thread loads what the trainer thread published last, once, and the stop.
BOOST_AUTO_TEST_CASE(shared_weights_hand_over_the_newest_version) {
  model::Policy trainer(small(), 11, 5), runner(small(), 11, 6);
  const std::size_t count = trainer.parameter_count();
  app::SharedWeights channel;
  std::uint64_t version = 0;
  BOOST_TEST(!channel.arrived(version));
  for (std::int64_t v = 1; v <= 2; ++v) {
    trainer.load_flat_parameters(weights_of_version(v, count).data(), count);
    channel.publish(v, trainer);
  }
  BOOST_TEST(channel.arrived(version));
  BOOST_TEST(channel.poll(runner, version));
  BOOST_TEST(version == 2u);
  BOOST_TEST(runner.flat_parameters() == weights_of_version(2, count));
  BOOST_TEST(!channel.arrived(version));
  channel.stop();
  BOOST_TEST(channel.arrived(version));
  BOOST_TEST(!channel.poll(runner, version));
}

BOOST_AUTO_TEST_SUITE_END()

// One trainer without its GPU would build an MPI reducer among NCCL ones: every trainer refuses to start, at once.
BOOST_AUTO_TEST_SUITE(gradient_transport)

BOOST_AUTO_TEST_CASE(trainers_that_agree_go_on) {
  BOOST_CHECK_NO_THROW(app::check_same_gradient_transport(MPI_COMM_WORLD, "mpi"));
  BOOST_CHECK_NO_THROW(app::check_same_gradient_transport(MPI_COMM_WORLD, "nccl"));
}

BOOST_AUTO_TEST_CASE(a_trainer_without_its_gpu_stops_every_trainer) {
  BOOST_CHECK_EXCEPTION(app::check_same_gradient_transport(MPI_COMM_WORLD, rank_ == 1 ? "mpi" : "nccl"), UsageError,
                        [](const UsageError& e) {
                          const std::string what = e.what();
                          return what.find("2 of 3 trainers") != std::string::npos &&
                                 what.find(rank_ == 1 ? "this trainer: mpi" : "this trainer: nccl") !=
                                     std::string::npos;
                        });
}

BOOST_AUTO_TEST_SUITE_END()

int main(int argc, char** argv) { return mpi_test_main(argc, argv, rank_, size_); }
