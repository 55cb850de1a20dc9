#pragma once
// Checkpoints the tests write, and where their logs' segments land.
#include <cstdint>
#include <filesystem>
#include <string>

#include "arclight/ckpt/checkpoint.hpp"

// A version of a run whose logs grow by one entry a step (one new segment each).
inline arclight::ckpt::Checkpoint growing(std::int64_t step) {
  arclight::ckpt::Checkpoint c;
  c.step = step;
  c.policy_version = step;
  c.config_toml = "run.steps=10\n";
  c.arclight_version = "test";
  c.parameters.assign(100, float(step));
  c.exp_avg.assign(100, 0.5f);
  c.exp_avg_sq.assign(100, 0.25f);
  c.optimizer_steps = {step};
  c.coordinator_rng = "12345 678";
  c.store_tables = "tables";
  for (int s = 1; s <= step; ++s) {
    c.metrics_jsonl += "{\"step\":" + std::to_string(s) + "}\n";
    c.span_log += "spans of step " + std::to_string(s) + ";";
    c.store_history += "history of step " + std::to_string(s) + ";";
  }
  return c;
}

// The one segment file of a log at a version (plan.cpp names it <log>.s<version>-<token>.h5).
inline std::filesystem::path segment_file(const std::filesystem::path& dir, const std::string& prefix) {
  for (const auto& e : std::filesystem::directory_iterator(dir / "segments"))
    if (e.path().filename().string().rfind(prefix + "-", 0) == 0) return e.path();
  return {};
}
