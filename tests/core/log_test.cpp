#include "arclight/core/log.hpp"

#include <boost/test/unit_test.hpp>

using namespace arclight;

BOOST_AUTO_TEST_SUITE(logging)

BOOST_AUTO_TEST_CASE(levels_parse_by_name) {
  BOOST_TEST((log::parse_level("debug") == log::Level::debug));
  BOOST_TEST((log::parse_level("off") == log::Level::off));
  BOOST_TEST(!log::parse_level("verbose").has_value());
  for (auto l : {log::Level::trace, log::Level::info, log::Level::error})
    BOOST_TEST((log::parse_level(log::level_name(l)) == l));
}

BOOST_AUTO_TEST_CASE(threshold_filters) {
  log::init(2, log::Level::warn);
  BOOST_TEST(!log::enabled(log::Level::info));
  BOOST_TEST(log::enabled(log::Level::warn));
  BOOST_TEST(log::enabled(log::Level::error));
  BOOST_TEST(log::rank() == 2);
  log::init(0, log::Level::off);
  BOOST_TEST(!log::enabled(log::Level::error));
  log::init(0, log::Level::info);
}

BOOST_AUTO_TEST_CASE(concat_joins_any_streamable) {
  BOOST_TEST(log::concat("step ", 3, " loss ", 0.5) == "step 3 loss 0.5");
}

BOOST_AUTO_TEST_SUITE_END()
