// metrics.jsonl stays JSON when a figure is not a number (an outside agent's NaN reward): it is written as null, and
// a resumed run reads such a history back.
#include "arclight/app/run_report.hpp"
#include "arclight/core/error.hpp"
#include "../temp_dir.hpp"

#include <sys/resource.h>

#include <boost/test/unit_test.hpp>

#include <csignal>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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

// An outside agent names its validation figures: a name cannot break the line nor forge a key a resume reads back
// ("elapsed"), and large counts and seconds are written whole.
BOOST_AUTO_TEST_CASE(a_figure_s_name_cannot_break_the_line_and_large_values_are_whole) {
  TempDir dir;
  {
    app::RunReport report(dir.dir(), 1, Progress::lines);
    report.step(1, {{"elapsed", 1234567.5, 1}, {"val_a\":0,\"elapsed", 1e300, 3}, {"val_b\nc\\", 2, 3}}, 1.0);
  }
  std::ifstream in(dir.file("metrics.jsonl"));
  const std::string written((std::istreambuf_iterator<char>(in)), {});
  BOOST_TEST(written == "{\"step\":1,\"elapsed\":1234567.5,\"val_a__0__elapsed\":1e+300,\"val_b_c_\":2}\n");
}

// A row that does not reach metrics.jsonl (a full disk, a quota) is lost for good, the next checkpoint's history read
// back from the file: the step says so instead of going on. A file size limit stands in for the full disk.
BOOST_AUTO_TEST_CASE(a_metrics_row_that_cannot_be_written_is_an_error) {
  TempDir dir;
  app::RunReport report(dir.dir(), 1000, Progress::lines);
  rlimit before{};
  getrlimit(RLIMIT_FSIZE, &before);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing us
  rlimit small = before;
  small.rlim_cur = 4096;
  setrlimit(RLIMIT_FSIZE, &small);
  // Rows longer in the file than in the event file (ten digits a value there, four bytes here): metrics.jsonl fills
  // first, and went on unwritten until the event file failed too.
  std::vector<app::Figure> figures;
  for (int i = 0; i < 20; ++i) figures.push_back({"f" + std::to_string(i), 0.1234567891, 3});
  std::string error;
  try {
    for (int step = 1; step <= 1000; ++step) report.step(step, figures, 1.0);
  } catch (const Error& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  BOOST_TEST(error.find("metrics.jsonl failed") != std::string::npos, error);
}

// A fresh run in a directory moves the earlier run's files aside; two within one second keep both archives.
BOOST_AUTO_TEST_CASE(earlier_runs_are_archived_and_none_is_overwritten) {
  TempDir dir;
  for (int run = 1; run <= 3; ++run) {
    app::RunReport report(dir.dir(), 1, Progress::lines);
    report.step(1, {{"reward", double(run), 3}}, 1.0);
  }
  std::vector<std::string> archived;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.file("archive")))
    if (e.path().filename() == "metrics.jsonl") {
      std::ifstream in(e.path());
      archived.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
  std::sort(archived.begin(), archived.end());
  BOOST_TEST(archived == (std::vector<std::string>{"{\"step\":1,\"reward\":1}\n", "{\"step\":1,\"reward\":2}\n"}));
  // TensorBoard reads every file under its --logdir whose name holds "tfevents": the archived ones are out of its
  // sight (each resume showed as a run of its own, its steps twice), the new run's in it.
  int event_files = 0, archived_events = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.dir())) {
    const std::string name = e.path().filename().string();
    event_files += name.find("tfevents") != std::string::npos;
    archived_events += name.find("archived-tf-events") != std::string::npos;
  }
  BOOST_TEST(event_files == 1);
  BOOST_TEST(archived_events == 2);
}

namespace {
std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What the run directory holds, as "name" (the run's files) and "archive/name" (an archive's), sorted.
std::vector<std::string> files_of(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.dir()))
    if (e.is_regular_file())
      names.push_back((e.path().parent_path().parent_path().filename() == "archive" ? "archive/" : "") +
                      e.path().filename().string());
  for (std::string& n : names)
    if (n.find("tf-events") != std::string::npos || n.find("tfevents") != std::string::npos)
      n = n.rfind("archive/", 0) == 0 ? "archive/events" : "events";
  std::sort(names.begin(), names.end());
  return names;
}
}  // namespace

// A resume continues the directory's metrics.jsonl: the file is cut back to the history the version holds, the rows of
// the steps redone are all that is archived (the whole history was, at every requeue), and the event file is made
// anew from the history. A history that is not what the file begins with, or one read with damaged logs, archives the
// earlier files whole.
BOOST_AUTO_TEST_CASE(a_resume_archives_only_the_steps_it_redoes) {
  TempDir dir;
  std::string history;
  {
    app::RunReport report(dir.dir(), 4, Progress::lines);
    for (int step = 1; step <= 4; ++step) {
      report.step(step, {{"reward", double(step), 3}}, step);
      if (step == 2) history = report.history();  // the version at step 2
    }
  }
  TempDir elsewhere;  // a second name of the file: cut back in place, the file keeps it (rewritten, it would not)
  std::filesystem::create_hard_link(dir.file("metrics.jsonl"), elsewhere.file("metrics.link"));
  {
    app::RunReport resumed(dir.dir(), 4, Progress::lines, &history);
    BOOST_TEST(resumed.history() == history);
    resumed.step(3, {{"reward", 30.0, 3}}, 3.0);  // appended to the history kept in place
  }
  BOOST_TEST(std::filesystem::hard_link_count(dir.file("metrics.jsonl")) == 2u, "metrics.jsonl was replaced");
  BOOST_TEST(text_of(dir.file("metrics.jsonl")) == history + "{\"step\":3,\"reward\":30}\n");
  BOOST_TEST(files_of(dir) == (std::vector<std::string>{"archive/metrics.redone.jsonl", "events", "metrics.jsonl"}));
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.file("archive")))
    if (e.is_regular_file())
      BOOST_TEST(text_of(e.path().string()) == "{\"step\":3,\"reward\":3}\n{\"step\":4,\"reward\":4}\n");
  // Resumed from the version at step 3 (the file's last row): nothing redone, nothing more archived.
  history += "{\"step\":3,\"reward\":30}\n";
  { app::RunReport resumed(dir.dir(), 4, Progress::lines, &history); }
  BOOST_TEST(files_of(dir) == (std::vector<std::string>{"archive/metrics.redone.jsonl", "events", "metrics.jsonl"}));
  // A history read with damaged logs, and one from another run: the earlier files archived whole.
  { app::RunReport damaged(dir.dir(), 4, Progress::lines, &history, false); }
  const std::string other = "{\"step\":1,\"reward\":9}\n";
  { app::RunReport another(dir.dir(), 4, Progress::lines, &other); }
  BOOST_TEST(files_of(dir) == (std::vector<std::string>{"archive/events", "archive/events", "archive/metrics.jsonl",
                                                        "archive/metrics.jsonl", "archive/metrics.redone.jsonl",
                                                        "events", "metrics.jsonl"}));
  BOOST_TEST(text_of(dir.file("metrics.jsonl")) == other);
}

BOOST_AUTO_TEST_SUITE_END()
