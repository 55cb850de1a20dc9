#pragma once
// The training job's roles, wired together: the coordinator (rank 0), runners and trainers.
#include "arclight/comm/mpi_runtime.hpp"
#include "arclight/core/config.hpp"
#include "arclight/core/layout.hpp"
#include "arclight/core/placement.hpp"

namespace arclight::app {

// Refuses, with UsageError, a configuration the job cannot train with (unknown agent,
// a model that cannot hold the agent's episodes, a layout it cannot run).
void check_training_config(const Config& config);

// Runs this rank's part of the job; returns when training has ended on every rank.
void run_training(const comm::MpiRuntime& mpi, const Config& config, const Layout& layout, const Placement& placement);

}  // namespace arclight::app
