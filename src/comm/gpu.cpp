#include "arclight/comm/gpu.hpp"

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

#ifdef ARCLIGHT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef ARCLIGHT_HAVE_NCCL
#include <nccl.h>
#endif

namespace arclight::comm {

int visible_gpu_count() {
#ifdef ARCLIGHT_HAVE_CUDA
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    log::debug("no usable GPU: ", cudaGetErrorString(rc));
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

void bind_device(int device) {
  if (device < 0) return;
#ifdef ARCLIGHT_HAVE_CUDA
  cudaError_t rc = cudaSetDevice(device);
  if (rc != cudaSuccess) throw Error(log::concat("cudaSetDevice(", device, "): ", cudaGetErrorString(rc)));
#else
  throw Error("a GPU device was requested but this binary was built without CUDA");
#endif
}

std::string nccl_version() {
#ifdef ARCLIGHT_HAVE_NCCL
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return log::concat(code / 10000, '.', code / 100 % 100, '.', code % 100);
#else
  return "";
#endif
}

}  // namespace arclight::comm
