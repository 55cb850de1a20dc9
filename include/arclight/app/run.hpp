#pragma once
#include "arclight/app/cli.hpp"
#include "arclight/comm/mpi_runtime.hpp"

namespace arclight::app {

// Runs the whole arclight process after MPI_Init: parse, agree on bad input,
// dispatch. Returns the exit code; a fatal error on any rank ends every rank.
int run(comm::MpiRuntime& mpi, int argc, const char* const* argv);

}  // namespace arclight::app
