#include "arclight/comm/reducer.hpp"

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

#ifdef ARCLIGHT_HAVE_NCCL
#include "nccl_comm.hpp"
#endif

namespace arclight::comm {

#ifdef ARCLIGHT_HAVE_NCCL
namespace {

// ncclAllReduce on the CUDA buffers, grouped, on the communicator's stream; finish() waits for them, ending the job
// with NCCL's message where a peer fails.
class NcclReducer : public GradientReducer {
 public:
  NcclReducer(MPI_Comm comm, int device) : mpi_(comm), nccl_(comm, device) {}
  void begin(const std::vector<FloatBuffer>& buffers) override {
    for (const FloatBuffer& b : buffers)
      if (b.device != nccl_.device()) throw Error("NcclReducer: a buffer is not on this rank's GPU");
    buffers_ = buffers;
  }
  void ready(std::size_t) override {}
  double leaders_value(double value) override {
    MPI_Bcast(&value, 1, MPI_DOUBLE, 0, mpi_);
    return value;
  }
  void finish() override {
    nccl_.after_default_stream();  // backward's gradients
    nccl_.check(ncclGroupStart(), "ncclGroupStart");
    for (const FloatBuffer& b : buffers_)
      nccl_.check(ncclAllReduce(b.data, b.data, b.size, ncclFloat, ncclSum, nccl_.get(), nccl_.stream()),
                  "ncclAllReduce");
    nccl_.check(ncclGroupEnd(), "ncclGroupEnd");
    nccl_.wait();
  }

 private:
  MPI_Comm mpi_;  // the trainers' communicator
  NcclComm nccl_;
  std::vector<FloatBuffer> buffers_;
};

}  // namespace

bool nccl_available() { return true; }
std::unique_ptr<GradientReducer> make_nccl_reducer(MPI_Comm comm, int device) {
  return std::make_unique<NcclReducer>(comm, device);
}
#else
bool nccl_available() { return false; }
std::unique_ptr<GradientReducer> make_nccl_reducer(MPI_Comm, int) {
  throw Error("buffers on a GPU need NCCL, and this binary was built without it");
}
#endif

}  // namespace arclight::comm
