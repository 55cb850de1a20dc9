#pragma once
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

// Leveled logging with a rank prefix. Progress lines come from rank 0 only.
namespace arclight::log {

enum class Level { trace, debug, info, warn, error, off };

// Parses "trace", "debug", "info", "warn", "error" or "off".
std::optional<Level> parse_level(std::string_view name);
std::string_view level_name(Level level);

// The environment variable that sets the level when no flag does.
inline constexpr const char* level_env = "ARCLIGHT_LOG_LEVEL";

void init(int rank, Level level);
Level level();
int rank();
bool enabled(Level level);

// Writes one line "[arclight r<rank> <level>] message" to stderr, atomically.
void write(Level level, std::string_view message);
// Writes one progress line to stdout, on rank 0 only.
void progress(std::string_view message);
// Draws a line at the foot of stderr (a progress bar on a terminal), under the lock that messages are written with: a
// message goes above it, and it is drawn again below (a message was written into the bar's line, mid-bar); after an
// error, which may end the job (MPI_Abort's banner), it is not.
void status(std::string_view line);
// Ends the status line where one is shown: it stays on the screen, and what comes next starts a line of its own.
void end_status();

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <class... Parts>
void trace(const Parts&... p) {
  if (enabled(Level::trace)) write(Level::trace, concat(p...));
}
template <class... Parts>
void debug(const Parts&... p) {
  if (enabled(Level::debug)) write(Level::debug, concat(p...));
}
template <class... Parts>
void info(const Parts&... p) {
  if (enabled(Level::info)) write(Level::info, concat(p...));
}
template <class... Parts>
void warn(const Parts&... p) {
  if (enabled(Level::warn)) write(Level::warn, concat(p...));
}
template <class... Parts>
void error(const Parts&... p) {
  if (enabled(Level::error)) write(Level::error, concat(p...));
}

}  // namespace arclight::log
