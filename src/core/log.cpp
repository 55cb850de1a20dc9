#include "arclight/core/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>

namespace arclight::log {
namespace {
std::atomic<Level> current_level{Level::info};
std::atomic<int> current_rank{0};
std::mutex write_mutex;
bool status_shown = false;  // under write_mutex, as the line
std::string status_line;
constexpr std::string_view clear_line = "\r\033[K";
}  // namespace

std::optional<Level> parse_level(std::string_view name) {
  for (Level l : {Level::trace, Level::debug, Level::info, Level::warn, Level::error, Level::off})
    if (level_name(l) == name) return l;
  return std::nullopt;
}

std::string_view level_name(Level level) {
  switch (level) {
    case Level::trace: return "trace";
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warn: return "warn";
    case Level::error: return "error";
    case Level::off: return "off";
  }
  return "?";
}

void init(int rank, Level level) {
  current_rank = rank;
  current_level = level;
}

Level level() { return current_level; }
int rank() { return current_rank; }
bool enabled(Level l) { return l != Level::off && l >= current_level.load(); }

void write(Level l, std::string_view message) {
  std::string line = concat("[arclight r", current_rank.load(), ' ', level_name(l), "] ", message, '\n');
  std::lock_guard<std::mutex> lock(write_mutex);
  if (status_shown) {  // above the status line, drawn again below it; after an error (the job may end now) it ends
    line = concat(clear_line, line, l == Level::error ? "" : status_line);
    status_shown = l != Level::error;
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void status(std::string_view line) {
  std::lock_guard<std::mutex> lock(write_mutex);
  status_line = line;
  status_shown = true;
  std::fwrite(clear_line.data(), 1, clear_line.size(), stderr);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void end_status() {
  std::lock_guard<std::mutex> lock(write_mutex);
  if (!std::exchange(status_shown, false)) return;
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

void progress(std::string_view message) {
  if (current_rank != 0) return;
  std::lock_guard<std::mutex> lock(write_mutex);
  std::fwrite(message.data(), 1, message.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace arclight::log
