#include <malloc.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "arclight/app/run.hpp"

namespace {
// SIGUSR1 and SIGTERM must find their handlers from the first moments: before LibTorch's static
// initialisers (a second or more) and MPI_Init. An executable's .preinit_array runs before any
// shared library's initialisers; only loading and relocating the libraries comes earlier.
void handle_signals_first() { arclight::app::stop_at_next_step_on_signals(); }
__attribute__((section(".preinit_array"), used)) void (*const signals_first)() = &handle_signals_first;
}  // namespace

int main(int argc, char** argv) {
  const std::string exit_code_file = arclight::app::take_exit_code_file();
  // Each forward and backward pass allocates and frees tensors of a few MB. glibc maps blocks
  // past its mmap threshold afresh and unmaps them on free, so the kernel would page in and
  // zero them again at every pass (a third of a runner's CPU time went to that). Keep them in
  // the heap, to be reused. (For a build without jemalloc; jemalloc_settings.cpp does the same
  // for jemalloc, and these settings do not touch it.)
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // Rank 0 serves the store and waits by testing and sleeping (comm/waiting.hpp), never inside
  // MPI but for its checkpoint writes: Open MPI's yield in every empty poll, its default where
  // ranks outnumber cores, would only add a system call to each of its polls. (Other ranks keep
  // it: they wait inside MPI in their all-reduces.) A user's own setting wins.
  if (const char* rank = std::getenv("OMPI_COMM_WORLD_RANK"); rank && std::string_view(rank) == "0")
    setenv("OMPI_MCA_mpi_yield_when_idle", "0", 0);
  // Open MPI's sharedfp/lockedfile component, opened by every MPI_File_open (parallel HDF5),
  // overflows a buffer on file paths of about 230 characters or more, and deep cluster paths
  // are that long. HDF5 never uses shared file pointers: leave that component out (a user's
  // own selection wins).
  setenv("OMPI_MCA_sharedfp", "^lockedfile", 0);
  int code = 0;
  bool coordinator = false;
  {
    arclight::comm::MpiRuntime mpi(argc, argv);
    coordinator = mpi.rank() == 0;
    code = arclight::app::run(mpi, argc, argv);
  }  // MPI_Finalize
  if (coordinator) arclight::app::report_exit_code(exit_code_file, code);
  return code;
}
