#pragma once
#include "arclight/app/cli.hpp"
#include "arclight/comm/mpi_runtime.hpp"

namespace arclight::app {

// Runs the whole arclight process after MPI_Init: parse, agree on bad input,
// dispatch. Returns the exit code; a fatal error on any rank ends every rank.
int run(comm::MpiRuntime& mpi, int argc, const char* const* argv);

// mpirun, after any rank's non-zero exit (3 after a checkpoint too), sleeps twice odls_base_sigkill_timeout even where
// every rank has ended; slurm/train_128gpu.sh reads the job's exit code from a file and ends mpirun instead of holding
// the allocation idle for it. take_exit_code_file, first thing in main: the file ARCLIGHT_EXIT_CODE_FILE names, for a
// process mpirun started ("" otherwise), the variable removed (an agent's own arclight, started by a runner, must
// never write there). report_exit_code: rank 0, once MPI is finalized (every rank past the job's last collective),
// writes `code` there if the file exists (it is never created here).
std::string take_exit_code_file();
void report_exit_code(const std::string& file, int code);

// SIGUSR1 and SIGTERM (Slurm's warning before pre-emption or the time limit) ask rank 0 to
// checkpoint at the next step boundary and end the job with exit_requeue. Called first thing
// in main, so that a signal during start-up or a resume is not the default's death.
void stop_at_next_step_on_signals();
// Whether SIGTERM or SIGUSR1 has come since (a long-running command that is not training stops on it).
bool stop_signal_received();

}  // namespace arclight::app
