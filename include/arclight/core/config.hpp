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

// The store's default RolloutConfig: how long an attempt may take and stay silent, and retries.
struct RolloutDefaults {
  double timeout_seconds = 300;       // from an attempt's start; 0: no limit
  double unresponsive_seconds = 30;   // since its last heartbeat (a span batch); 0: no limit
  int max_attempts = 3;
  std::vector<std::string> retry_condition = {"failed", "timeout", "unresponsive"};
};

// How runners talk to the store.
struct RunnerConfig {
  int span_batch = 64;               // spans per batch to the store
  double span_flush_seconds = 0.25;  // a batch waits at most this long; each batch is a heartbeat
};

// The policy network. The vocabulary comes from the task.
struct ModelConfig {
  int d_model = 64;
  int n_layers = 2;
  int n_heads = 4;
  int d_ff = 256;
  int max_seq = 64;
  std::string positions = "rotary";  // rotary or learned
};

// Deliberate faults, for tests and failure drills. Off by default.
struct FaultConfig {
  int fatal_rank = -1;  // this rank raises a fatal error right after start-up
};

struct Config {
  RunConfig run;
  LayoutConfig layout;
  ModelConfig model;
  RolloutDefaults rollout;
  RunnerConfig runner;
  FaultConfig faults;
};

}  // namespace arclight
