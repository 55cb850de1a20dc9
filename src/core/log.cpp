#include "arclight/core/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace arclight::log {
namespace {
std::atomic<Level> current_level{Level::info};
std::atomic<int> current_rank{0};
std::mutex write_mutex;
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
  std::fwrite(line.data(), 1, line.size(), stderr);
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
