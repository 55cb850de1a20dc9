#include "arclight/comm/gpu.hpp"

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

#ifdef ARCLIGHT_HAVE_CUDA
#include <cuda_runtime_api.h>
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

}  // namespace arclight::comm
