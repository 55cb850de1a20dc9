#include "arclight/comm/gpu.hpp"
#include "arclight/core/error.hpp"

#ifdef ARCLIGHT_HAVE_NCCL
#include "nccl_comm.hpp"
#endif

namespace arclight::comm {

#ifdef ARCLIGHT_HAVE_NCCL
namespace {

class NcclBroadcast : public DeviceBroadcast {
 public:
  NcclBroadcast(MPI_Comm comm, int device) : nccl_(comm, device) {}
  void start(void* data, std::size_t bytes, int root) override {
    nccl_.after_default_stream();  // the leader's copy of its weights in; a runner's load out of the last version
    nccl_.check(ncclBroadcast(data, data, bytes, ncclUint8, root, nccl_.get(), nccl_.stream()), "ncclBroadcast");
  }
  bool finished() override { return nccl_.finished(); }
  void wait() override { nccl_.wait(); }
  void abort() override { nccl_.abort(); }

 private:
  NcclComm nccl_;
};

}  // namespace

std::unique_ptr<DeviceBroadcast> make_nccl_broadcast(MPI_Comm comm, int device) {
  return std::make_unique<NcclBroadcast>(comm, device);
}
#else
std::unique_ptr<DeviceBroadcast> make_nccl_broadcast(MPI_Comm, int) {
  throw Error("weights on GPUs over NCCL, and this binary was built without it");
}
#endif

}  // namespace arclight::comm
