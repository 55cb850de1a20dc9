#pragma once
#include <string>

namespace arclight {

// What this binary is and what was compiled into it.
struct BuildInfo {
  const char* version;
  const char* git_hash;
  bool cuda;
  bool nccl;
  bool parallel_hdf5;
};

const BuildInfo& build_info();

}  // namespace arclight
