#include "arclight/core/layout.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight {
namespace {

// A count ("3") or a fraction in (0, 1) ("0.25") of `workers`; "rest" gives -1.
int parse_share(const std::string& key, const std::string& value, int workers, bool rest_allowed) {
  if (rest_allowed && value == "rest") return -1;
  const char* begin = value.c_str();
  char* end = nullptr;
  errno = 0;
  if (value.find_first_of(".eE") == std::string::npos) {
    long count = std::strtol(begin, &end, 10);
    if (end != begin && *end == '\0' && errno == 0 && count >= 0 && count <= 1000000) return static_cast<int>(count);
  } else {
    double fraction = std::strtod(begin, &end);
    if (end != begin && *end == '\0' && errno == 0 && fraction > 0.0 && fraction < 1.0)
      return std::max(1, static_cast<int>(std::lround(fraction * workers)));
  }
  throw UsageError(log::concat("layout.", key, " = \"", value,
                               "\": expected a count (e.g. \"2\"), a fraction in (0, 1) (e.g. \"0.25\")",
                               rest_allowed ? " or \"rest\"" : ""));
}

}  // namespace

std::string role_name(const RankRole& role) {
  if (role.coordinator) return "coordinator";
  if (role.runner && role.trainer) return "runner+trainer";
  if (role.runner) return "runner";
  if (role.trainer) return "trainer";
  return "idle";
}

std::vector<int> Layout::runners() const {
  std::vector<int> out;
  for (int r = 0; r < world_size(); ++r)
    if (roles[r].runner) out.push_back(r);
  return out;
}

std::vector<int> Layout::trainers() const {
  std::vector<int> out;
  for (int r = 0; r < world_size(); ++r)
    if (roles[r].trainer) out.push_back(r);
  return out;
}

int Layout::trainer_leader() const {
  auto t = trainers();
  return t.empty() ? -1 : t.front();
}

Layout make_layout(const LayoutConfig& config, int world_size) {
  if (world_size < 2)
    throw UsageError(log::concat("layout: ", world_size,
                                 " rank(s); arclight needs at least 2 (rank 0 coordinates, the others run and train), "
                                 "e.g. mpirun -np 4"));
  const int workers = world_size - 1;
  Layout layout;
  layout.roles.resize(world_size);
  layout.roles[0].coordinator = true;

  if (config.mode == LayoutMode::colocated) {
    for (int r = 1; r < world_size; ++r) layout.roles[r].runner = layout.roles[r].trainer = true;
    return layout;
  }

  const int trainers = parse_share("trainers", config.trainers, workers, false);
  int runners = parse_share("runners", config.runners, workers, true);
  if (runners < 0) runners = workers - trainers;
  if (trainers < 1)
    throw UsageError("layout: no trainer (layout.trainers = \"" + config.trainers + "\"); at least one is needed");
  if (runners < 1)
    throw UsageError(log::concat("layout: no runner: ", trainers, " trainer(s) leave none of the ", workers,
                                 " worker rank(s); use more ranks, fewer trainers, or layout.mode = \"colocated\""));
  if (runners + trainers > workers)
    throw UsageError(log::concat("layout: ", runners, " runner(s) + ", trainers, " trainer(s) need ",
                                 runners + trainers + 1, " ranks, the job has ", world_size));
  if (runners + trainers < workers)
    throw UsageError(log::concat("layout: ", runners, " runner(s) + ", trainers, " trainer(s) leave ",
                                 workers - runners - trainers, " rank(s) idle; set layout.runners = \"rest\""));
  for (int r = 1; r <= trainers; ++r) layout.roles[r].trainer = true;
  for (int r = trainers + 1; r < world_size; ++r) layout.roles[r].runner = true;
  return layout;
}

}  // namespace arclight
