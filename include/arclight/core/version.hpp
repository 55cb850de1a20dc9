#pragma once
#include <string>

namespace arclight {

// What this binary is and what was compiled into it.
struct BuildInfo {
  const char* version;
  const char* git_hash;
  bool cuda;        // the CUDA toolkit (device checks, NCCL's staging)
  bool torch_cuda;  // a LibTorch built with CUDA: the policy can compute on GPUs
  bool nccl;
  bool parallel_hdf5;
};

const BuildInfo& build_info();

}  // namespace arclight
