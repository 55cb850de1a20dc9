#include "arclight/algo/advantages.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>

using namespace arclight::algo;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_SUITE(advantages)

BOOST_AUTO_TEST_CASE(returns_to_go_discount_later_rewards) {
  auto g = returns_to_go({1, 0, 2}, 0.5);
  BOOST_TEST(g[2] == 2.0, tt::tolerance(1e-12));
  BOOST_TEST(g[1] == 1.0, tt::tolerance(1e-12));  // 0 + 0.5 * 2
  BOOST_TEST(g[0] == 1.5, tt::tolerance(1e-12));  // 1 + 0.5 * 1
}

BOOST_AUTO_TEST_CASE(trajectory_advantages_are_group_z_scores) {
  // Totals 1, 2, 3, 6: mean 3, population std sqrt(3.5).
  auto a = group_advantages({{1}, {1, 1}, {3}, {2, 2, 2}}, false, 1.0);
  const double sd = std::sqrt(3.5);
  BOOST_TEST(a[0][0] == (1 - 3) / sd, tt::tolerance(1e-5));
  BOOST_TEST(a[1][1] == (2 - 3) / sd, tt::tolerance(1e-5));  // every step of a trajectory shares its advantage
  BOOST_TEST(a[3].size() == 3u);
  BOOST_TEST(a[3][0] == (6 - 3) / sd, tt::tolerance(1e-5));
  double sum = 0;
  for (auto& row : a) sum += row[0];
  BOOST_TEST(sum == 0.0, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(per_step_advantages_normalize_each_step_across_the_group) {
  // Returns-to-go (gamma 1): traj A {3, 2}, traj B {1}, traj C {5, 4}.
  auto a = group_advantages({{1, 2}, {1}, {1, 4}}, true, 1.0);
  // Step 0: values 3, 1, 5: mean 3, std sqrt(8/3).
  const double sd0 = std::sqrt(8.0 / 3.0);
  BOOST_TEST(a[0][0] == 0.0, tt::tolerance(1e-9));
  BOOST_TEST(a[1][0] == -2 / sd0, tt::tolerance(1e-5));
  BOOST_TEST(a[2][0] == 2 / sd0, tt::tolerance(1e-5));
  // Step 1: values 2, 4: mean 3, std 1.
  BOOST_TEST(a[0][1] == -1.0, tt::tolerance(1e-5));
  BOOST_TEST(a[2][1] == 1.0, tt::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(equal_rewards_give_no_signal) {
  auto a = group_advantages({{1}, {1}, {1}}, false, 1.0);
  for (auto& row : a) BOOST_TEST(row[0] == 0.0);
  auto single = group_advantages({{5}}, false, 1.0);
  BOOST_TEST(single[0][0] == 0.0);
}

BOOST_AUTO_TEST_CASE(large_rewards_keep_their_spread) {
  // E[x^2] - mean^2 loses a spread of 1 at 1e8 (its advantages were all 0).
  auto a = group_advantages({{1e8}, {1e8 + 1}}, false, 1.0);
  BOOST_TEST(a[0][0] == -1.0, tt::tolerance(1e-5));
  BOOST_TEST(a[1][0] == 1.0, tt::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(a_reward_that_is_not_finite_counts_for_nothing) {
  // One NaN made its group's mean NaN, and every advantage 0; now the others keep theirs, and it gets 0.
  auto a = group_advantages({{1}, {std::nan("")}, {3}, {INFINITY}}, false, 1.0);
  BOOST_TEST(a[0][0] == -1.0, tt::tolerance(1e-5));
  BOOST_TEST(a[2][0] == 1.0, tt::tolerance(1e-5));
  BOOST_TEST(a[1][0] == 0.0);
  BOOST_TEST(a[3][0] == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
