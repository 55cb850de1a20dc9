// Checkpoint writes in the background (roles.hpp), shared by the coordinator and the trainers.
#include <mpi.h>

#include <chrono>
#include <thread>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "roles.hpp"

namespace arclight::app {

void BackgroundWriter::start(const std::string& what, std::function<void()> write) {
  wait();
  finished_ = false;
  started_ = Stopwatch::now();
  thread_ = std::thread([this, what, write = std::move(write)] {
    try {
      write();
    } catch (const ckpt::PeerWriteFailed& e) {
      // The rank that failed first names the cause and ends the job; this one ends it only if that never comes.
      std::this_thread::sleep_for(std::chrono::seconds(30));
      log::error("checkpoint: ", what, " failed: ", e.what());
      MPI_Abort(MPI_COMM_WORLD, exit_failure);
    } catch (const std::exception& e) {
      log::error("checkpoint: ", what, " failed: ", e.what());
      MPI_Abort(MPI_COMM_WORLD, exit_failure);
    }
    finished_ = true;
  });
}

}  // namespace arclight::app
