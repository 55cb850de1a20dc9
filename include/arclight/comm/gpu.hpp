#pragma once
#include <string>

namespace arclight::comm {

// GPUs this process can use: 0 when CUDA was not compiled in, or no driver or device is there.
int visible_gpu_count();

// Makes `device` current for this process's CUDA calls; no-op for -1 (CPU).
void bind_device(int device);

// The NCCL library's version as "2.x.y", or empty when NCCL was not compiled in.
std::string nccl_version();

}  // namespace arclight::comm
