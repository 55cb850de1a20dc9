#pragma once
#include <string>
#include <vector>

#include "arclight/core/config.hpp"

namespace arclight {

struct RankRole {
  bool coordinator = false;
  bool runner = false;
  bool trainer = false;
};

std::string role_name(const RankRole& role);

// The role of every rank of a job.
struct Layout {
  std::vector<RankRole> roles;  // indexed by rank
  int world_size() const { return static_cast<int>(roles.size()); }
  std::vector<int> runners() const;
  std::vector<int> trainers() const;
  // The trainer that publishes each new policy version: the lowest trainer rank.
  int trainer_leader() const;
};

// Assigns roles, or throws UsageError for a layout that cannot work
// (one rank, no runner, no trainer, more roles than ranks, idle ranks).
// Trainers take the lowest worker ranks, so that they sit together on few nodes.
Layout make_layout(const LayoutConfig& config, int world_size);

}  // namespace arclight
