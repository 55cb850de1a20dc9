#pragma once
// One NCCL communicator over the ranks of an MPI communicator, with a CUDA stream of its own (comm-private, built with
// NCCL only): what the gradient reducer and the weights' broadcast share. An error it sees aborts the communicator
// (never left hanging: a peer may wait in a collective) and throws one message.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

namespace arclight::comm {

class NcclComm {
 public:
  // Collective over `comm`: its rank 0 makes NCCL's unique id and broadcasts it over MPI.
  NcclComm(MPI_Comm comm, int device);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  // Throws for an NCCL call's error, the communicator aborted first.
  void check(ncclResult_t rc, const char* what);
  // Before enqueuing: the stream waits for what was enqueued so far on the default stream (LibTorch's), and nothing
  // there waits for the stream (a broadcast pending until every runner joins must not hold generation or training).
  void after_default_stream();
  // Whether all that was enqueued on the stream has finished. An error (a peer's that NCCL reports asynchronously,
  // a CUDA fault) aborts and throws.
  bool finished();
  // Waits for finished(), sleeping between looks (the rank's other threads keep the cores).
  void wait();
  // Ends the communicator where a peer hangs: what is under way is dropped (a buffer it wrote into may still be
  // written while the kernels stop: its owner keeps it). Later calls throw.
  void abort();

 private:
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t default_stream_done_ = nullptr;
};

}  // namespace arclight::comm
