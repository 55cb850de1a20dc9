// Checkpoint writes in the background (roles.hpp), shared by the coordinator and the trainers.
#include <mpi.h>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "roles.hpp"

namespace arclight::app {

void BackgroundWriter::start(const std::string& what, std::function<void()> write) {
  wait();
  finished_ = false;
  thread_ = std::thread([this, what, write = std::move(write)] {
    try {
      write();
    } catch (const std::exception& e) {
      log::error("checkpoint: ", what, " failed: ", e.what());
      MPI_Abort(MPI_COMM_WORLD, exit_failure);
    }
    finished_ = true;
  });
}

}  // namespace arclight::app
