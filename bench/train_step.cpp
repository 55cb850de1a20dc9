// One training step (forward, GRPO loss, backward, gradient all-reduce, clip, AdamW) on
// 2 MPI ranks, the same model and batch as bench/ddp_train.py runs under PyTorch DDP. With a
// Hugging Face model directory, a CUDA device and a compute type, one rank trains that model
// there instead, as bench/train_step_hf.py does with transformers (scripts/gpu_check.sh); `recompute` after them
// turns model.gradient_checkpointing on.
//   bench_train_step [BATCH LENGTH STEPS [HF_DIR DEVICE DTYPE [recompute]]]
#include <mpi.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "arclight/algo/trainer.hpp"
#include "arclight/comm/reducer.hpp"
#include "arclight/model/compute_threads.hpp"

using namespace arclight;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int batch = argc > 1 ? std::atoi(argv[1]) : 512;  // sequences over all ranks
  const int length = argc > 2 ? std::atoi(argv[2]) : 17;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 10;
  const bool hf = argc > 4;
  const bool recompute = argc == 8 && std::string(argv[7]) == "recompute";
  if ((hf && argc != 7 && !recompute) ||
      (hf && std::string(argv[6]) != "float32" && std::string(argv[6]) != "bfloat16")) {
    if (rank == 0)
      std::fprintf(stderr,
                   "usage: bench_train_step [BATCH LENGTH STEPS [HF_DIR DEVICE float32|bfloat16 [recompute]]]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int device = hf ? std::atoi(argv[5]) : -1;
  model::set_compute_threads(1);
  ModelConfig mc;
  mc.d_model = 64;
  mc.n_layers = 2;
  mc.n_heads = 4;
  mc.d_ff = 256;
  mc.max_seq = length;
  mc.positions = Positions::learned;  // as in the PyTorch twin
  if (hf) {
    mc.source = ModelSource::hf;
    mc.path = argv[4];
    mc.dtype = std::string(argv[6]) == "bfloat16" ? ComputeType::bfloat16 : ComputeType::float32;
    mc.gradient_checkpointing = recompute;
  }
  model::Policy policy(mc, hf ? 0 : 35, 1);
  policy.place_on(device);
  const int vocab = policy.vocab_size();
  GrpoConfig gc;
  gc.micro_batch = batch;
  comm::MpiReducer reducer(MPI_COMM_WORLD, comm::ReducerConfig{});
  algo::Trainer trainer(policy, gc, size > 1 ? &reducer : nullptr);
  std::mt19937 rng(rank);
  std::vector<algo::Sample> shard(batch / size);
  for (algo::Sample& s : shard) {
    for (int t = 0; t < length; ++t) {
      s.tokens.push_back(static_cast<std::int32_t>(rng() % vocab));
      s.action_mask.push_back(t % 2 == 1);
      s.behaviour_logprobs.push_back(-3.5f);
      s.temperatures.push_back(1.0f);
      s.advantages.push_back(float(int(rng() % 3) - 1));
    }
  }
  const double total = algo::action_tokens(shard) * size;
  std::vector<double> times;
  for (int i = 0; i < steps + 2; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    trainer.step(shard, total);
    if (device >= 0) torch::cuda::synchronize(device);
    MPI_Barrier(MPI_COMM_WORLD);
    if (i >= 2) times.push_back(MPI_Wtime() - t);  // two warm-up steps
  }
  std::sort(times.begin(), times.end());
  if (rank == 0) std::printf("%.6f\n", times[times.size() / 2]);
  MPI_Finalize();
  return 0;
}
