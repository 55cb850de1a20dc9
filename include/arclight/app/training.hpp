#pragma once
// The training job's roles, wired together: the coordinator (rank 0), runners and trainers.
#include "arclight/comm/mpi_runtime.hpp"
#include "arclight/core/config.hpp"
#include "arclight/core/layout.hpp"
#include "arclight/core/placement.hpp"

#include <string>

namespace arclight::comm {
class StartupWatch;
}

namespace arclight::app {

// Refuses, with UsageError, a configuration the job cannot train with (unknown agent,
// a model that cannot hold the agent's episodes, a layout it cannot run).
void check_training_config(const Config& config);
// The chat template of a Hugging Face model (model.chat_template, or recognised from its tokenizer_config.json), by
// name; empty for a scratch model or a directory without tokenizer files. UsageError when it is not known.
std::string chat_template_of(const ModelConfig& model);

// Creates the checkpoint directory if missing and refuses, with UsageError, one that cannot take
// a file: found at start-up, not at the first checkpoint after training up to it. Rank 0's job.
void check_checkpoint_dir(const Config& config);

// Runs this rank's part of the job; returns its exit code when training has ended on every
// rank: exit_ok, or on rank 0 exit_requeue after a signal-triggered checkpoint.
// resume: "auto", a checkpoint version file, or empty.
// `startup` ends where this rank's own pulses or watch begin.
int run_training(const comm::MpiRuntime& mpi, const Config& config, const Layout& layout, const Placement& placement,
                 const std::string& resume, const std::string& effective_config, comm::StartupWatch& startup);

}  // namespace arclight::app
