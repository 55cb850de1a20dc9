#include "arclight/core/log.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

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

// A progress bar is a status line: a message written while it is shown goes above it, the bar drawn again below (it
// was written into the bar's line, mid-bar), but not after an error; the bar's end gives the line its newline once.
BOOST_AUTO_TEST_CASE(a_message_goes_above_the_status_line) {
  char path[] = "/tmp/arclight_log_test_XXXXXX";
  const int file = ::mkstemp(path);
  BOOST_REQUIRE(file >= 0);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(file, 2);
  log::init(0, log::Level::info);
  log::status("step 1/3 [#--]");
  log::warn("a warning");
  log::status("step 2/3 [##-]");
  log::status("step 3/3 [###]");
  log::end_status();
  log::end_status();
  log::warn("after the bar");
  log::status("step 4/5 [####-]");
  log::error("the end");
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(file);
  std::ifstream in(path);
  std::ostringstream written;
  written << in.rdbuf();
  ::unlink(path);
  const std::string clear = "\r\033[K";
  BOOST_TEST(written.str() == clear + "step 1/3 [#--]" + clear + "[arclight r0 warn] a warning\nstep 1/3 [#--]" +
                                  clear + "step 2/3 [##-]" + clear +
                                  "step 3/3 [###]\n[arclight r0 warn] after the bar\n" + clear + "step 4/5 [####-]" +
                                  clear + "[arclight r0 error] the end\n");
}

BOOST_AUTO_TEST_SUITE_END()
