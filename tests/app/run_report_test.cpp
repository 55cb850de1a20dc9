// metrics.jsonl stays JSON when a figure is not a number (an outside agent's NaN reward): it is written as null, and
// a resumed run reads such a history back.
#include "arclight/app/run_report.hpp"
#include "../temp_dir.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

using namespace arclight;

BOOST_AUTO_TEST_SUITE(run_report)

BOOST_AUTO_TEST_CASE(a_figure_that_is_not_a_number_is_null) {
  TempDir first, second;
  std::string history;
  {
    app::RunReport report(first.dir(), 2, Progress::lines);
    report.step(1, {{"reward", std::nan(""), 3}, {"loss", 1.5, 4}}, 1.0);
    report.step(2, {{"reward", INFINITY, 3}, {"loss", 0.25, 4}}, 2.0);
    history = report.history();
  }
  std::ifstream in(first.file("metrics.jsonl"));
  const std::string written((std::istreambuf_iterator<char>(in)), {});
  BOOST_TEST(written == "{\"step\":1,\"reward\":null,\"loss\":1.5}\n{\"step\":2,\"reward\":null,\"loss\":0.25}\n");
  BOOST_TEST(history == written);
  app::RunReport resumed(second.dir(), 3, Progress::lines, &history);  // replays it into the new event file
  BOOST_TEST(resumed.history() == written);
}

BOOST_AUTO_TEST_SUITE_END()
