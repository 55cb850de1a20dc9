#pragma once
#include <string>
#include <vector>

// The configuration of a run, as plain structs. The app binds every field to a
// TOML key and a command-line flag of the same name (section.key).
namespace arclight {

struct RunConfig {
  std::string dir = "runs/default";  // metrics, logs and checkpoints go here
  unsigned seed = 1;
  int steps = 100;
};

// Which rank does what. Rank 0 is always the coordinator.
struct LayoutConfig {
  // "split": each worker rank is a runner or a trainer.
  // "colocated": every worker rank is both, alternating phases (small runs).
  std::string mode = "split";
  // A count ("2") or a fraction of the worker ranks ("0.25").
  std::string trainers = "1";
  // A count, a fraction, or "rest" for every worker rank that is not a trainer.
  std::string runners = "rest";
};

// Deliberate faults, for tests and failure drills. Off by default.
struct FaultConfig {
  int fatal_rank = -1;  // this rank raises a fatal error right after start-up
};

struct Config {
  RunConfig run;
  LayoutConfig layout;
  FaultConfig faults;
};

}  // namespace arclight
