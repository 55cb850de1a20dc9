#include "arclight/core/placement.hpp"

#include <boost/test/unit_test.hpp>

#include <map>
#include <string>

using namespace arclight;

namespace {
EnvLookup env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

BOOST_AUTO_TEST_SUITE(placement)

BOOST_AUTO_TEST_CASE(local_rank_prefers_open_mpi_then_slurm) {
  BOOST_TEST(local_rank_from_env(env({{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"SLURM_LOCALID", "5"}})).value() == 3);
  BOOST_TEST(local_rank_from_env(env({{"SLURM_LOCALID", "5"}})).value() == 5);
  BOOST_TEST(!local_rank_from_env(env({})).has_value());
  // Garbage is ignored rather than trusted.
  BOOST_TEST(local_rank_from_env(env({{"OMPI_COMM_WORLD_LOCAL_RANK", "x1"}, {"SLURM_LOCALID", "2"}})).value() == 2);
  BOOST_TEST(!local_rank_from_env(env({{"SLURM_LOCALID", "-1"}})).has_value());
}

BOOST_AUTO_TEST_CASE(devices_follow_the_local_rank) {
  BOOST_TEST(device_for_local_rank(0, 8) == 0);
  BOOST_TEST(device_for_local_rank(7, 8) == 7);
  // More ranks than GPUs on a node share them round-robin.
  BOOST_TEST(device_for_local_rank(9, 8) == 1);
  BOOST_TEST(device_for_local_rank(2, 1) == 0);
}

BOOST_AUTO_TEST_CASE(no_gpu_means_cpu) {
  BOOST_TEST(device_for_local_rank(0, 0) == -1);
  BOOST_TEST(device_for_local_rank(5, 0) == -1);
}

BOOST_AUTO_TEST_CASE(threads_share_the_node) {
  BOOST_TEST(threads_for_rank(16, 4) == 4);
  BOOST_TEST(threads_for_rank(2, 4) == 1);  // oversubscribed: never zero
  BOOST_TEST(threads_for_rank(2, 0) == 2);
}

BOOST_AUTO_TEST_SUITE_END()
