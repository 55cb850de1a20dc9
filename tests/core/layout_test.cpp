#include "arclight/core/layout.hpp"

#include <boost/test/unit_test.hpp>

#include "arclight/core/error.hpp"

using namespace arclight;

namespace {
LayoutConfig split(std::string trainers, std::string runners = "rest") {
  LayoutConfig c;
  c.trainers = std::move(trainers);
  c.runners = std::move(runners);
  return c;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(layout)

BOOST_AUTO_TEST_CASE(split_puts_trainers_on_the_lowest_worker_ranks) {
  Layout l = make_layout(split("2"), 6);
  BOOST_TEST(l.roles[0].coordinator);
  BOOST_TEST(!l.roles[0].runner);
  BOOST_TEST(l.trainers() == (std::vector<int>{1, 2}));
  BOOST_TEST(l.runners() == (std::vector<int>{3, 4, 5}));
  BOOST_TEST(l.trainer_leader() == 1);
  BOOST_TEST(role_name(l.roles[3]) == "runner");
}

BOOST_AUTO_TEST_CASE(fractions_are_of_the_worker_ranks) {
  Layout l = make_layout(split("0.25"), 129);  // 128 workers
  BOOST_TEST(l.trainers().size() == 32u);
  BOOST_TEST(l.runners().size() == 96u);
  // A small fraction still yields one trainer.
  BOOST_TEST(make_layout(split("0.01"), 4).trainers().size() == 1u);
}

BOOST_AUTO_TEST_CASE(colocated_gives_every_worker_both_roles) {
  LayoutConfig c;
  c.mode = LayoutMode::colocated;
  Layout l = make_layout(c, 3);
  BOOST_TEST(l.runners() == (std::vector<int>{1, 2}));
  BOOST_TEST(l.trainers() == (std::vector<int>{1, 2}));
  BOOST_TEST(role_name(l.roles[1]) == "runner+trainer");
}

BOOST_AUTO_TEST_CASE(impossible_layouts_are_refused) {
  BOOST_CHECK_THROW(make_layout(LayoutConfig{}, 1), UsageError);   // one rank
  BOOST_CHECK_THROW(make_layout(split("3"), 4), UsageError);       // no runner left
  BOOST_CHECK_THROW(make_layout(split("0"), 4), UsageError);       // no trainer
  BOOST_CHECK_THROW(make_layout(split("1", "0"), 4), UsageError);  // no runner
  BOOST_CHECK_THROW(make_layout(split("2", "2"), 4), UsageError);  // more roles than ranks
  BOOST_CHECK_THROW(make_layout(split("1", "1"), 4), UsageError);  // an idle rank
  BOOST_CHECK_THROW(make_layout(split("one"), 4), UsageError);     // not a number
  BOOST_CHECK_THROW(make_layout(split("1.5"), 4), UsageError);     // fraction out of range
  BOOST_CHECK_THROW(make_layout(split("-1"), 4), UsageError);
}

BOOST_AUTO_TEST_CASE(refusal_says_why) {
  try {
    make_layout(split("3"), 4);
    BOOST_FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    BOOST_TEST(std::string(e.what()).find("no runner") != std::string::npos);
    BOOST_TEST(e.exit_code() == exit_usage);
  }
}

BOOST_AUTO_TEST_SUITE_END()
