#pragma once
#include <cstdint>
#include <vector>

// Group-relative advantages (GRPO), plain arithmetic.
namespace arclight::algo {

// Discounted returns-to-go: G_t = r_t + gamma * G_{t+1}.
std::vector<double> returns_to_go(const std::vector<double>& rewards, double gamma);

// (x - mean) / (std + eps) within each group of values sharing a key; the
// population standard deviation (verl's torch.std divides by n - 1: its advantages are
// sqrt((n - 1) / n) of these). A group of one, or of equal values, gives zeros (verl gives
// a group of one its raw score); a value that is not finite gives 0 and is left out of its
// group's mean and spread.
std::vector<double> normalize_within(const std::vector<double>& values, const std::vector<std::int64_t>& keys,
                                     double eps = 1e-6);

// Advantages of G trajectories of one task (one GRPO group). rewards[g][t] is the
// reward after step t of trajectory g. "trajectory": each trajectory's summed
// reward, normalized within the group, for all its steps. "per_step": the
// returns-to-go, normalized among the group's trajectories at the same step: a step only
// one trajectory reached has no baseline and gets 0, and later steps are compared only
// with the trajectories that lasted as long ("trajectory" is verl's outcome GRPO).
std::vector<std::vector<double>> group_advantages(const std::vector<std::vector<double>>& rewards, bool per_step,
                                                  double gamma);

}  // namespace arclight::algo
