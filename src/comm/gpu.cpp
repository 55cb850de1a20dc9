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

std::string gpu_bus_id(int device) {
  if (device < 0) return "";
#ifdef ARCLIGHT_HAVE_CUDA
  char id[32] = {0};
  const cudaError_t rc = cudaDeviceGetPCIBusId(id, sizeof id, device);
  if (rc != cudaSuccess) throw Error(log::concat("cudaDeviceGetPCIBusId(", device, "): ", cudaGetErrorString(rc)));
  return id;
#else
  throw Error("a GPU device was named but this binary was built without CUDA");
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

#ifdef ARCLIGHT_HAVE_CUDA
namespace {
void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(log::concat(what, ": ", cudaGetErrorString(rc)));
}
}  // namespace

DeviceFloats::DeviceFloats(int device, std::size_t size) : device_(device), size_(size) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  void* p = nullptr;
  check(cudaMalloc(&p, size_ * sizeof(float)), "cudaMalloc");
  data_ = static_cast<float*>(p);
}
DeviceFloats::~DeviceFloats() {
  if (data_) cudaFree(data_);
}
void DeviceFloats::upload(const float* host) { copy_to_gpu(data_, host, size_); }
void copy_to_gpu(float* gpu, const float* host, std::size_t count) {
  check(cudaMemcpy(gpu, host, count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
}
void DeviceFloats::download(float* host) const { download_bytes(host, size_ * sizeof(float)); }
void DeviceFloats::download_bytes(void* host, std::size_t bytes) const {
  if (bytes > size_ * sizeof(float)) throw Error("DeviceFloats::download_bytes: more bytes than the buffer holds");
  check(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
}
#else
DeviceFloats::DeviceFloats(int device, std::size_t size) : device_(device), size_(size) {
  throw Error("GPU memory was requested but this binary was built without CUDA");
}
DeviceFloats::~DeviceFloats() = default;
void DeviceFloats::upload(const float*) {}
void copy_to_gpu(float*, const float*, std::size_t) {
  throw Error("GPU memory was named but this binary was built without CUDA");
}
void DeviceFloats::download(float*) const {}
void DeviceFloats::download_bytes(void*, std::size_t) const {}
#endif

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
