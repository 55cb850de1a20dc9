#include "arclight/app/run_report.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::app {
namespace fs = std::filesystem;

std::string format_duration(double seconds) {
  long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

namespace {
// An earlier run's figures are kept, not appended to: they move to archive/<time>/.
void archive_earlier_run(const fs::path& dir) {
  std::vector<fs::path> earlier;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "metrics.jsonl" || name.rfind("events.out.tfevents.", 0) == 0) earlier.push_back(e.path());
  }
  if (earlier.empty()) return;
  const auto stamp = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const fs::path to = dir / "archive" / std::to_string(stamp);
  fs::create_directories(to);
  for (const fs::path& p : earlier) fs::rename(p, to / p.filename());
  log::info("an earlier run's metrics in ", dir.string(), " moved to ", to.string());
}
}  // namespace

RunReport::RunReport(const std::string& run_dir, int total_steps, const std::string& style)
    : total_steps_(total_steps), bar_(style == "bar" || (style == "auto" && isatty(STDERR_FILENO))) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw UsageError("run.dir = \"" + run_dir + "\": " + ec.message());
  archive_earlier_run(run_dir);
  metrics_path_ = (fs::path(run_dir) / "metrics.jsonl").string();
  metrics_.open(metrics_path_, std::ios::app);
  if (!metrics_) throw UsageError("cannot write " + metrics_path_);
  events_ = std::make_unique<EventWriter>(run_dir);
}

RunReport::~RunReport() {
  if (bar_) std::fputc('\n', stderr);
}

void RunReport::note(const std::string& line) {
  if (bar_) std::fprintf(stderr, "\r\033[K%s\n", line.c_str());
  else log::progress(line);
}

void RunReport::step(int step, const std::vector<Figure>& figures, double elapsed_seconds) {
  std::ostringstream json, line;
  json << "{\"step\":" << step;
  line << "step=" << step;
  std::vector<std::pair<std::string, double>> scalars;
  for (const Figure& f : figures) {
    json << ",\"" << f.name << "\":" << std::setprecision(6) << f.value;
    line << ' ' << f.name << '=' << std::fixed << std::setprecision(f.precision) << f.value;
    scalars.emplace_back(f.name, f.value);
  }
  metrics_ << json.str() << "}\n";
  metrics_.flush();
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
    if (f.name == "reward" || f.name == "success") tail << ' ' << f.name << ' ' << std::fixed << std::setprecision(3) << f.value;
  std::fprintf(stderr, "\r\033[Kstep %d/%d [%s] %3.0f%% %s ETA %s%s", step, total_steps_, bar.c_str(), done * 100,
               format_duration(elapsed_seconds).c_str(), format_duration(eta).c_str(), tail.str().c_str());
  std::fflush(stderr);
}

}  // namespace arclight::app
