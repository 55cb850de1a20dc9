#include "nccl_comm.hpp"

#include <chrono>
#include <exception>
#include <thread>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::comm {
namespace {
void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(log::concat(what, ": ", cudaGetErrorString(rc)));
}
}  // namespace

NcclComm::NcclComm(MPI_Comm comm, int device) : device_(device) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  ncclUniqueId id;
  if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
  check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaEventCreateWithFlags(&default_stream_done_, cudaEventDisableTiming), "cudaEventCreate");
}

NcclComm::~NcclComm() {
  if (default_stream_done_) cudaEventDestroy(default_stream_done_);
  if (stream_) cudaStreamDestroy(stream_);
  // Unwinding after an error: the peers may sit in a collective, which a destroy would wait for.
  if (comm_) std::uncaught_exceptions() > 0 ? ncclCommAbort(comm_) : ncclCommDestroy(comm_);
}

void NcclComm::check(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess) return;
  abort();
  throw Error(log::concat(what, ": ", ncclGetErrorString(rc)));
}

void NcclComm::after_default_stream() {
  check_cuda(cudaEventRecord(default_stream_done_, cudaStreamLegacy), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(stream_, default_stream_done_, 0), "cudaStreamWaitEvent");
}

bool NcclComm::finished() {
  if (!comm_) throw Error("the NCCL communicator was aborted");
  const cudaError_t rc = cudaStreamQuery(stream_);
  if (rc == cudaSuccess) return true;
  if (rc != cudaErrorNotReady) {
    abort();
    check_cuda(rc, "a CUDA error under an NCCL collective");
  }
  ncclResult_t async = ncclSuccess;
  check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
  check(async, "NCCL");  // a peer that died, a network error
  return false;
}

void NcclComm::wait() {
  while (!finished()) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

void NcclComm::abort() {
  if (!comm_) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

}  // namespace arclight::comm
