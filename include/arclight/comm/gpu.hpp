#pragma once
#include <cstddef>
#include <string>

namespace arclight::comm {

// GPUs this process can use: 0 when CUDA was not compiled in, or no driver or device is there.
int visible_gpu_count();

// Makes `device` current for this process's CUDA calls; no-op for -1 (CPU).
void bind_device(int device);

// Floats in a GPU's memory (staging and tests). Throws where CUDA is absent.
class DeviceFloats {
 public:
  DeviceFloats(int device, std::size_t size);
  ~DeviceFloats();
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* data() const { return data_; }
  std::size_t size() const { return size_; }
  void upload(const float* host);
  void download(float* host) const;

 private:
  int device_;
  std::size_t size_;
  float* data_ = nullptr;
};

// The NCCL library's version as "2.x.y", or empty when NCCL was not compiled in.
std::string nccl_version();

}  // namespace arclight::comm
