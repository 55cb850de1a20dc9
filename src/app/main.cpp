#include <malloc.h>

#include "arclight/app/run.hpp"

int main(int argc, char** argv) {
  // Each forward and backward pass allocates and frees tensors of a few MB. glibc maps blocks
  // past its mmap threshold afresh and unmaps them on free, so the kernel would page in and
  // zero them again at every pass (a third of a runner's CPU time went to that). Keep them in
  // the heap, to be reused.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  arclight::comm::MpiRuntime mpi(argc, argv);
  return arclight::app::run(mpi, argc, argv);
}
