#include "arclight/comm/reducer.hpp"

#include <exception>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

#ifdef ARCLIGHT_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace arclight::comm {

#ifdef ARCLIGHT_HAVE_NCCL
namespace {

void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(log::concat(what, ": ", cudaGetErrorString(rc)));
}

// ncclUniqueId from the group's rank 0 by MPI_Bcast; ncclAllReduce on the CUDA buffers,
// grouped, on a stream of its own; on any error the communicator is aborted, never left hanging.
class NcclReducer : public GradientReducer {
 public:
  NcclReducer(MPI_Comm comm, int device) : mpi_(comm), device_(device) {
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    ncclUniqueId id;
    if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
    check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
    check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate");
  }
  ~NcclReducer() override {
    if (stream_) cudaStreamDestroy(stream_);
    // Unwinding after an error: the other trainers may sit in an all-reduce, which a destroy would wait for.
    if (comm_) std::uncaught_exceptions() > 0 ? ncclCommAbort(comm_) : ncclCommDestroy(comm_);
  }
  void begin(const std::vector<FloatBuffer>& buffers) override {
    for (const FloatBuffer& b : buffers)
      if (b.device != device_) throw Error("NcclReducer: a buffer is not on this rank's GPU");
    buffers_ = buffers;
  }
  void ready(std::size_t) override {}
  double leaders_value(double value) override {
    MPI_Bcast(&value, 1, MPI_DOUBLE, 0, mpi_);
    return value;
  }
  void finish() override {
    check(ncclGroupStart(), "ncclGroupStart");
    for (const FloatBuffer& b : buffers_)
      check(ncclAllReduce(b.data, b.data, b.size, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce");
    check(ncclGroupEnd(), "ncclGroupEnd");
    cudaError_t rc = cudaStreamSynchronize(stream_);
    if (rc != cudaSuccess) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      check_cuda(rc, "cudaStreamSynchronize after ncclAllReduce");
    }
  }

 private:
  void check(ncclResult_t rc, const char* what) {
    if (rc == ncclSuccess) return;
    if (comm_) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    throw Error(log::concat(what, ": ", ncclGetErrorString(rc)));
  }
  MPI_Comm mpi_;  // the trainers' communicator
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
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
