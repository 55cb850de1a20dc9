#pragma once
// Gradient all-reduce among the trainers: MPI for host tensors, NCCL for CUDA tensors.
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "arclight/core/config.hpp"
#include "arclight/core/gradient_reducer.hpp"

namespace arclight::comm {

struct ReducerConfig {
  std::size_t bucket_bytes = 25u << 20;         // fused buffer per all-reduce
  std::size_t first_bucket_bytes = 1u << 20;    // small, so communication starts early in backward
  Compression compression = Compression::none;  // bf16 or fp16: the sums travel in 16 bits
};

// Bucketed, fused MPI all-reduce, non-blocking for buckets that fill during backward. A bucket whose buffers lie side
// by side in memory (gradients as views of one flat tensor, as the policy allocates them) is reduced in place; others
// are copied into a fused buffer and back. Buffers are assigned to buckets from the last to the first (the order
// backward produces them), the first bucket small; buckets go out strictly in bucket order, so the order is the same on
// every rank.
//
// fp16 (5 exponent bits) scales each bucket by a power of two that the trainers agree on (a one-float MAX all-reduce of
// their largest |gradient|), so that the sum of every trainer's share stays below fp16's largest value and small
// gradients keep their precision instead of flushing to zero; unscaled exactly on the way back. A bucket's data goes
// out when the next bucket's maximum does (or at finish()), so that every trainer issues the collectives in one order.
class MpiReducer : public GradientReducer {
 public:
  MpiReducer(MPI_Comm comm, ReducerConfig config);
  ~MpiReducer() override;
  void begin(const std::vector<FloatBuffer>& buffers) override;
  void ready(std::size_t index) override;
  void finish() override;
  double leaders_value(double value) override;

  std::size_t bucket_count() const { return buckets_.size(); }
  // The buffers of each bucket, in bucket order (for tests).
  std::vector<std::vector<std::size_t>> bucket_members() const;

 private:
  struct Bucket {
    std::vector<std::size_t> members;
    std::size_t elements = 0;
    float* in_place = nullptr;  // members adjacent in memory: reduce them where they are
    std::vector<float> fused;
    std::vector<std::uint16_t> packed;  // with compression
    std::size_t waiting = 0;            // members not yet ready this step
    bool launched = false;
    MPI_Request request = MPI_REQUEST_NULL;
    // fp16: the largest |gradient| of this trainer's share, then of all (MAX), and the scale it gives.
    float local_max = 0, global_max = 0, scale = 1;
    MPI_Request max_request = MPI_REQUEST_NULL;
  };
  void plan(const std::vector<FloatBuffer>& buffers);
  void launch_ready_buckets(bool blocking);
  void launch_data(Bucket& bucket, bool blocking);
  void launch_scaled_data(bool blocking);  // the bucket whose maximum went out last, once it is known
  void unpack(Bucket& bucket);

  MPI_Comm comm_;
  ReducerConfig config_;
  MPI_Op half_sum_ = MPI_OP_NULL;
  std::vector<FloatBuffer> buffers_;
  std::vector<std::size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  std::size_t next_launch_ = 0;
  int ranks_ = 1;
  Bucket* scaling_ = nullptr;  // fp16: its maximum went out, its data not yet
};

// 16-bit float conversions used by compression (round to nearest even).
std::uint16_t to_bf16(float value);
float from_bf16(std::uint16_t value);
std::uint16_t to_fp16(float value);
float from_fp16(std::uint16_t value);

// NCCL on CUDA buffers; built when NCCL is found. Throws where it cannot run.
std::unique_ptr<GradientReducer> make_nccl_reducer(MPI_Comm comm, int device);
bool nccl_available();

// Chooses by where the buffers live: NCCL for CUDA buffers, MPI for host buffers.
std::unique_ptr<GradientReducer> make_reducer(MPI_Comm comm, int device, const ReducerConfig& config);

}  // namespace arclight::comm
