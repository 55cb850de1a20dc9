#include "arclight/app/run_report.hpp"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::app {
namespace fs = std::filesystem;

std::string format_duration(double seconds) {
  long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

namespace {
std::string text_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

fs::path new_archive(const fs::path& dir) {
  const auto stamp =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  fs::path to = dir / "archive" / std::to_string(stamp);
  for (int n = 2; fs::exists(to); ++n)  // two runs ended within a second: the first one's archive stays
    to = dir / "archive" / log::concat(stamp, "-", n);
  fs::create_directories(to);
  return to;
}

// An earlier run's figures are kept, not appended to: they move to archive/<time>/. A resume in place of the run whose
// metrics.jsonl it continues keeps only what it does not write back, the rows of the steps it redoes (past the
// version), as archive/<time>/metrics.redone.jsonl, and cuts the file back to the history (a copy of the whole
// history at every requeue added up to the steps times the requeues); its event files go, as they hold the same
// figures (the history is replayed into a new one). A history read with damaged logs (rows may be missing) archives
// the earlier files whole. Returns whether metrics.jsonl holds the resumed history already.
bool archive_earlier_run(const fs::path& dir, const std::string* resumed_history, bool resumed_history_whole) {
  std::vector<fs::path> earlier;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "metrics.jsonl" || name.rfind("events.out.tfevents.", 0) == 0) earlier.push_back(e.path());
  }
  if (earlier.empty()) return false;
  const fs::path metrics = dir / "metrics.jsonl";
  if (resumed_history && resumed_history_whole && fs::exists(metrics)) {
    const std::string rows = text_of(metrics);
    if (rows.compare(0, resumed_history->size(), *resumed_history) == 0) {
      if (rows.size() > resumed_history->size()) {
        const fs::path to = new_archive(dir) / "metrics.redone.jsonl";
        std::ofstream out(to, std::ios::binary);
        out << std::string_view(rows).substr(resumed_history->size());
        out.close();  // a network file system may say only now that the write failed
        if (!out) throw Error("writing " + to.string() + " failed (a full disk or quota?)");
        fs::resize_file(metrics, resumed_history->size());  // after the copy: a crash between leaves both whole
        log::info("the metrics of the steps redone after the resume moved to ", to.string());
      }
      for (const fs::path& p : earlier)
        if (p != metrics) fs::remove(p);
      return true;
    }
  }
  const fs::path to = new_archive(dir);
  // TensorBoard reads every file under its --logdir whose name holds "tfevents": kept so, each resume's archive showed
  // as one more run, the resumed steps twice (the resume replays them from the version).
  for (const fs::path& p : earlier) {
    std::string name = p.filename().string();
    if (const std::size_t at = name.find("tfevents"); at != std::string::npos)
      name.replace(at, 8, "archived-tf-events");
    fs::rename(p, to / name);
  }
  log::info("an earlier run's metrics in ", dir.string(), " moved to ", to.string());
  return false;
}
}  // namespace

namespace {
// One line of metrics.jsonl, as written by RunReport::step: {"step":N,"name":number,...}.
bool parse_row(const std::string& line, std::int64_t& step, std::vector<std::pair<std::string, double>>& values) {
  values.clear();
  step = -1;
  std::size_t at = 0;
  while ((at = line.find('"', at)) != std::string::npos) {
    const std::size_t end = line.find('"', at + 1);
    if (end == std::string::npos || end + 1 >= line.size() || line[end + 1] != ':') return false;
    const std::string key = line.substr(at + 1, end - at - 1);
    const double value =
        line.compare(end + 2, 4, "null") == 0 ? std::nan("") : std::strtod(line.c_str() + end + 2, nullptr);
    if (key == "step")
      step = static_cast<std::int64_t>(value);
    else
      values.emplace_back(key, value);
    at = line.find_first_of(",}", end + 2);
    if (at == std::string::npos) break;
  }
  return step >= 0;
}
}  // namespace

RunReport::RunReport(const std::string& run_dir, int total_steps, Progress style, const std::string* resumed_history,
                     bool resumed_history_whole)
    : total_steps_(total_steps),
      bar_(style == Progress::bar || (style == Progress::automatic && isatty(STDERR_FILENO))) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw UsageError("run.dir = \"" + run_dir + "\": " + ec.message());
  bool history_in_place = false;
  try {
    history_in_place = archive_earlier_run(run_dir, resumed_history, resumed_history_whole);
  } catch (const fs::filesystem_error& e) {  // a failure of the run (requeued), as a row that cannot be written is
    throw Error("archiving the earlier metrics in " + run_dir + ": " + e.what());
  }
  metrics_path_ = (fs::path(run_dir) / "metrics.jsonl").string();
  metrics_.open(metrics_path_, std::ios::app);
  if (!metrics_) throw UsageError("cannot write " + metrics_path_);
  events_ = std::make_unique<EventWriter>(run_dir);
  if (resumed_history) {
    if (!history_in_place) {
      metrics_ << *resumed_history;
      flush_metrics();
    }
    // Each row at its time: the run's seconds it was written at ("elapsed") counted back from the last row's, which
    // the resume continues from (all at the resume's instant before, TensorBoard's time axes one point).
    std::vector<std::pair<std::int64_t, std::vector<std::pair<std::string, double>>>> parsed;
    std::istringstream rows(*resumed_history);
    std::string line;
    std::int64_t step;
    std::vector<std::pair<std::string, double>> values;
    while (std::getline(rows, line))
      if (parse_row(line, step, values)) parsed.emplace_back(step, values);
    const auto elapsed_of = [](const std::vector<std::pair<std::string, double>>& row) -> std::optional<double> {
      for (const auto& [name, value] : row)
        if (name == "elapsed" && std::isfinite(value)) return value;
      return std::nullopt;
    };
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::optional<double> last = parsed.empty() ? std::nullopt : elapsed_of(parsed.back().second);
    for (const auto& [row_step, row] : parsed) {
      const std::optional<double> elapsed = elapsed_of(row);
      events_->scalars(row_step, row, last && elapsed ? now - std::max(0.0, *last - *elapsed) : now);
    }
  }
}

// A row that does not reach the file is lost for good: the next checkpoint's history is read back from it.
void RunReport::flush_metrics() {
  metrics_.flush();
  if (!metrics_) throw Error("writing " + metrics_path_ + " failed (a full disk or quota?)");
}

std::string RunReport::history() const { return text_of(metrics_path_); }

RunReport::~RunReport() {
  if (bar_) log::end_status();
}

void RunReport::note(const std::string& line) {
  if (bar_) {  // above the bar, which the next step draws again
    log::status(line);
    log::end_status();
  } else {
    log::progress(line);
  }
}

namespace {
// An outside agent names its own figures (a result span's keys): kept to letters, digits and _.-/ so that a name
// needs no escaping in the JSON line, cannot forge another key ("elapsed", which a resume reads back), and reaches the
// terminal and TensorBoard as it reaches the file.
std::string figure_name(const std::string& name) {
  std::string out = name;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-' && c != '/') c = '_';
  return out;
}
}  // namespace

void RunReport::step(int step, const std::vector<Figure>& figures, double elapsed_seconds) {
  std::ostringstream json, line;
  json << "{\"step\":" << step;
  line << "step=" << step;
  std::vector<std::pair<std::string, double>> scalars;
  for (const Figure& f : figures) {
    const std::string name = figure_name(f.name);
    json << ",\"" << name << "\":";  // JSON has no NaN nor infinity: null
    if (std::isfinite(f.value))
      json << std::setprecision(10) << f.value;  // counts and seconds past 10^6 whole (6 digits: 1.23457e+06)
    else
      json << "null";
    line << ' ' << name << '=' << std::fixed << std::setprecision(f.precision) << f.value;
    scalars.emplace_back(name, f.value);
  }
  metrics_ << json.str() << "}\n";
  flush_metrics();
  const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  events_->scalars(step, scalars, wall);
  if (!bar_) {
    log::progress(line.str());
    return;
  }
  bool validated = false;
  for (const Figure& f : figures) validated = validated || f.name.rfind("val_", 0) == 0;
  if (validated) note(line.str());
  draw_bar(step, figures, elapsed_seconds);
}

void RunReport::draw_bar(int step, const std::vector<Figure>& figures, double elapsed_seconds) {
  const double done = total_steps_ > 0 ? double(step) / total_steps_ : 1.0;
  const int width = 24, filled = static_cast<int>(std::lround(done * width));
  std::string bar(filled, '#');
  bar.append(width - filled, '-');
  const double eta = step > 0 ? elapsed_seconds / step * (total_steps_ - step) : 0.0;
  std::ostringstream tail;
  for (const Figure& f : figures)
    if (f.name == "reward" || f.name == "success")
      tail << ' ' << f.name << ' ' << std::fixed << std::setprecision(3) << f.value;
  char line[512];  // the tail holds two figures at most
  std::snprintf(line, sizeof line, "step %d/%d [%s] %3.0f%% %s ETA %s%s", step, total_steps_, bar.c_str(), done * 100,
                format_duration(elapsed_seconds).c_str(), format_duration(eta).c_str(), tail.str().c_str());
  log::status(line);
}

}  // namespace arclight::app
