#pragma once
// Where rank 0 reports each step: metrics.jsonl, TensorBoard event files, and the
// terminal (a progress bar with ETA when stderr is a terminal, plain lines otherwise).
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "arclight/app/event_writer.hpp"
#include "arclight/core/config.hpp"

namespace arclight::app {

struct Figure {
  std::string name;
  double value;
  int precision;  // decimals on the terminal
};

class RunReport {
 public:
  // style: a bar, lines, or (automatic) a bar when stderr is a terminal. Files an earlier run
  // left in the directory move to archive/<time>/ first. A resumed run passes the metrics
  // history its checkpoint holds: it becomes metrics.jsonl again and is replayed into the
  // new event file, so the curves neither break nor repeat the steps after the checkpoint; where
  // it continues the directory's metrics.jsonl, only the rows of the steps redone are archived.
  // resumed_history_whole: false where the version's logs were damaged (its rows may have gaps).
  RunReport(const std::string& run_dir, int total_steps, Progress style, const std::string* resumed_history = nullptr,
            bool resumed_history_whole = true);
  ~RunReport();
  void step(int step, const std::vector<Figure>& figures, double elapsed_seconds);
  void note(const std::string& line);  // a line on the terminal that the bar does not overwrite
  const std::string& metrics_path() const { return metrics_path_; }
  // Everything metrics.jsonl holds (what a checkpoint saves).
  std::string history() const;
  const std::string& events_path() const { return events_->path(); }

 private:
  void draw_bar(int step, const std::vector<Figure>& figures, double elapsed_seconds);
  void flush_metrics();
  int total_steps_;
  bool bar_;
  std::string metrics_path_;
  std::ofstream metrics_;
  std::unique_ptr<EventWriter> events_;
};

// "1h02m", "3m05s", "42s".
std::string format_duration(double seconds);

}  // namespace arclight::app
