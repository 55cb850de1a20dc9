#include "arclight/model/compute_threads.hpp"

#include <ATen/Parallel.h>
#include <dlfcn.h>

namespace arclight::model {

void set_compute_threads(int threads) {
  if (threads < 1) threads = 1;
  at::set_num_threads(threads);
  // Debian's LibTorch calls BLAS through libblas.so.3; when that is OpenBLAS it keeps a pool of its own.
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

}  // namespace arclight::model
