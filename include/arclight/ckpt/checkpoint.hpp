#pragma once
// Versioned HDF5 checkpoints: one file per version, <dir>/v<NNNNNNNN>.h5, written under a
// temporary name, fsynced and renamed, then LATEST replaced by rename, so that a crash at
// any point leaves the previous version valid. Every dataset carries a CRC-32C attribute;
// a version that is incomplete or fails a checksum is skipped, with a warning, for the one before.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arclight/core/error.hpp"

namespace arclight::ckpt {

// Everything a run needs to go on as if nothing had happened, at a step boundary
// (training is synchronous there: no rollout is in flight).
struct Checkpoint {
  // meta
  std::int64_t step = 0;
  std::int64_t policy_version = 0;
  std::string config_toml;        // the effective configuration of the run that saved
  std::string arclight_version;   // version and git hash
  double created = 0;             // seconds since the epoch
  // model and optimizer (AdamW), flat in the policy's parameter order
  std::vector<float> parameters;
  std::vector<float> exp_avg, exp_avg_sq;
  std::vector<std::int64_t> optimizer_steps;  // per parameter tensor
  // the coordinator's random state (task generation) and the metrics history
  std::string coordinator_rng;
  std::string metrics_jsonl;
  // the store: its policy resource versions (content strings) and its counters
  std::vector<std::string> policy_resources;
  std::vector<std::int64_t> store_statistics;
};

std::string version_file_name(std::int64_t version);  // v00000042.h5

// Writes `checkpoint` as version `version` in `dir` and makes it LATEST. Returns the path.
std::string write_checkpoint(const std::string& dir, std::int64_t version, const Checkpoint& checkpoint);

// Reads one version file, verifying every checksum; throws CorruptCheckpoint.
Checkpoint read_checkpoint(const std::string& path);

// A version file that is incomplete, unreadable or fails a checksum: bad input.
struct CorruptCheckpoint : Error {
  explicit CorruptCheckpoint(const std::string& what) : Error(what, exit_usage) {}
};

// The newest valid version in `dir`: LATEST first, then older versions, each bad one
// reported with a warning. nullopt when there is none.
std::optional<std::pair<std::string, Checkpoint>> load_latest(const std::string& dir);

// Keeps the newest `keep` versions (0: all); returns the paths it removed.
std::vector<std::string> apply_retention(const std::string& dir, int keep);

}  // namespace arclight::ckpt
