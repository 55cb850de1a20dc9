// A checkpoint directory: its versions, LATEST, versions set aside, and retention.
#include "directory.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/files.hpp"
#include "arclight/core/log.hpp"
#include "hdf5_io.hpp"

namespace arclight::ckpt {
namespace fs = std::filesystem;

std::vector<std::int64_t> versions_in(const std::string& dir) {
  static const std::regex name{R"(v([0-9]{8})\.h5)"};
  std::vector<std::int64_t> out;
  std::error_code ec;
  fs::directory_iterator entries(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return out;
  // Not "no versions": the run would start afresh and set aside the versions it could not see.
  if (ec) throw Error("cannot list checkpoint directory " + dir + ": " + ec.message());
  for (const fs::directory_entry& e : entries) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (std::regex_match(file, m, name)) out.push_back(std::stoll(m[1]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string unique_token() {
  std::random_device device;
  const std::uint64_t x = (std::uint64_t(device()) << 32) ^ device() ^
                          std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(x));
  return text;
}

std::string version_file_name(std::int64_t version) {
  char name[32];
  std::snprintf(name, sizeof name, "v%08lld.h5", static_cast<long long>(version));
  return name;
}

std::optional<std::string> read_small_file(const std::string& path, std::size_t limit) {
  // Non-blocking, and only a regular file: a FIFO in its place must not hang the reader.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::string text(limit, '\0');
  ssize_t got = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) got = ::read(fd, text.data(), limit);
  ::close(fd);
  if (got < 0) return std::nullopt;
  text.resize(static_cast<std::size_t>(got));
  return text;
}

bool is_version_file_name(const std::string& name) {
  static const std::regex version_name{R"(v[0-9]{8}\.h5)"};
  return std::regex_match(name, version_name);
}

std::string latest_version(const std::string& dir) {
  std::optional<std::string> text = read_small_file((fs::path(dir) / "LATEST").string(), 64);
  if (!text) return {};
  const std::string name = text->substr(0, text->find('\n'));
  return is_version_file_name(name) ? name : std::string();  // anything else names no version of this directory
}

// LATEST's bytes: the file name, then a newline; written under a temporary name, fsynced, renamed.
void set_latest(const std::string& dir, const std::string& version_file) {
  const std::string latest_tmp = (fs::path(dir) / "LATEST.tmp").string();
  const std::string text = version_file + "\n";
  remove_stale(latest_tmp);
  // O_EXCL | O_NOFOLLOW: a link planted under the temporary name fails the write, never redirects it.
  const int fd = ::open(latest_tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("checkpoint: cannot create " + latest_tmp + ": " + std::strerror(errno));
  int why = 0;
  const ssize_t wrote = ::write(fd, text.data(), text.size());
  if (wrote < 0)
    why = errno;
  else if (wrote != static_cast<ssize_t>(text.size()))
    why = ENOSPC;  // a short write: the disk is full
  else if (::fsync(fd) != 0)
    why = errno;
  ::close(fd);
  if (why != 0) throw Error("checkpoint: cannot write " + latest_tmp + ": " + std::strerror(why));
  fs::rename(latest_tmp, fs::path(dir) / "LATEST");
  sync_to_disk(dir, true);
}

namespace {

// ".superseded-<UTC time>-<token>": a name used once.
std::string superseded_suffix() {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return std::string(".superseded-") + stamp + "-" + unique_token().substr(0, 8);
}

}  // namespace

std::string supersede_newer_versions(const std::string& dir, std::int64_t step) {
  std::vector<std::string> moved;
  const std::string suffix = superseded_suffix();
  std::vector<std::int64_t> versions = versions_in(dir);
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {  // newest first: a crash halfway keeps the order
    if (*it <= step) continue;
    const fs::path from = fs::path(dir) / version_file_name(*it);
    std::error_code ec;
    fs::rename(from, from.string() + suffix, ec);
    if (ec) throw Error("checkpoint: cannot set " + from.string() + " aside: " + ec.message());
    moved.push_back(from.filename().string());
  }
  if (!moved.empty()) sync_to_disk(dir, true);
  std::string text;
  for (const std::string& m : moved) text += (text.empty() ? "" : " ") + m;
  return text;
}

std::string supersede_directory(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || (versions_in(dir).empty() && latest_version(dir).empty())) return {};
  std::string to = fs::path(dir).lexically_normal().string();
  if (!to.empty() && to.back() == '/') to.pop_back();
  to += superseded_suffix();
  fs::rename(dir, to, ec);
  if (ec) throw Error("checkpoint: cannot set " + dir + " aside: " + ec.message());
  // The lock is on the file, not its name: moved back, it still keeps other jobs out of dir.
  const fs::path lock = fs::path(to) / lock_file_name;
  if (fs::exists(fs::symlink_status(lock, ec))) {
    fs::create_directory(dir, ec);
    fs::rename(lock, fs::path(dir) / lock_file_name, ec);
    if (ec) throw Error("checkpoint: cannot keep the lock of " + dir + ": " + ec.message());
  }
  return to;
}

namespace {

// Who holds a lock file, as it says: "host H, PID P".
std::string lock_holder(int fd) {
  char text[256] = {0};
  const ssize_t got = ::pread(fd, text, sizeof text - 1, 0);
  std::string holder = got > 0 ? std::string(text, static_cast<std::size_t>(got)) : std::string();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder.empty() ? std::string("it does not say who") : printable(holder);
}

std::string this_host() {
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& what, double wait_seconds,
                             const std::function<bool()>& stop_waiting) {
  const std::string path = (fs::path(dir) / lock_file_name).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw UsageError(what + " " + dir + ": cannot open its lock file " + path + ": " + std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_seconds);
  const auto stopped = [&] { return stop_waiting && stop_waiting(); };
  bool waiting = false;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = lock_holder(fd_);
    const bool may_wait = error == EWOULDBLOCK && std::chrono::steady_clock::now() < deadline;
    if (may_wait && !stopped()) {
      if (!waiting)
        log::warn(what, " ", dir, " is in use by another job (", holder, "): waiting up to ", wait_seconds,
                  " s for it to end (run.lock_wait_seconds)");
      waiting = true;
      for (int tick = 0; tick < 10 && !stopped(); ++tick) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    ::close(fd_);
    fd_ = -1;
    if (may_wait)  // and a stop signal came
      throw Error(what + " " + dir + " is in use by another job (" + holder +
                      "): a stop signal came while waiting for it; the job ends, to be run again",
                  exit_requeue);
    if (error == EWOULDBLOCK)
      throw UsageError(what + " " + dir + " is in use by another job (" + holder + ")" +
                       (waiting ? log::concat(", still after ", wait_seconds, " s") : std::string()) +
                       ": two jobs in one directory overwrite each other's checkpoints and metrics");
    log::warn("cannot lock ", path, " (", std::strerror(error), "): a second job in ", dir, " would not be stopped");
    return;
  }
  const std::string holder = "host " + printable(this_host()) + ", PID " + std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, holder.data(), holder.size(), 0) < 0)
    log::warn("cannot write who holds ", path, ": ", std::strerror(errno));
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock; the file stays, naming the last holder
}

namespace {

// The newest `keep` of `versions`, LATEST, and every file they link to (links point at the
// file that holds the data, so one level is the whole chain); nullopt when one does not read.
std::optional<std::set<std::string>> kept_files(const std::string& dir, const std::vector<std::int64_t>& versions,
                                                std::size_t keep) {
  std::vector<std::string> kept_versions;
  for (std::size_t i = versions.size() - keep; i < versions.size(); ++i)
    kept_versions.push_back(version_file_name(versions[i]));
  const std::string latest = latest_version(dir);
  if (!latest.empty()) kept_versions.push_back(latest);
  std::set<std::string> kept;
  for (const std::string& name : kept_versions) {
    if (!fs::exists(fs::path(dir) / name)) continue;
    kept.insert(name);
    try {
      for (const std::string& f : linked_files((fs::path(dir) / name).string())) kept.insert(f);
    } catch (const CorruptCheckpoint& e) {
      log::warn("retention: ", e.what(), "; keeping every older version");
      return std::nullopt;
    }
  }
  return kept;
}

// The name of a segment file (plan.cpp: <log>.s<version>-<token>.h5), or of its temporary.
bool is_segment_file_name(const std::string& name) {
  static const std::regex segment_name{
      R"((meta\.metrics_jsonl|store\.history|store\.span_log)\.s[0-9]{8}-[0-9a-f]{16}\.h5(\.tmp)?)"};
  return std::regex_match(name, segment_name);
}

// Segment files no kept version links to (a rewritten log, or a write that never committed):
// only names a write gives them, and only in a real segments folder (never through a link).
void remove_unlinked_segments(const std::string& dir, const std::set<std::string>& kept,
                              std::vector<std::string>& removed) {
  const fs::path segments = fs::path(dir) / "segments";
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(segments, ec))) return;
  for (const fs::directory_entry& e : fs::directory_iterator(segments, ec)) {
    const std::string file = e.path().filename().string();
    if (!is_segment_file_name(file) || kept.count("segments/" + file)) continue;
    std::error_code rm;
    if (!fs::is_directory(e.symlink_status(rm)) && fs::remove(e.path(), rm)) removed.push_back(e.path().string());
  }
}

// Leftovers of writes that never committed (a crash mid-write), older than the newest version.
void remove_leftovers(const std::string& dir, std::int64_t newest, std::vector<std::string>& removed) {
  static const std::regex tmp_name{R"(v([0-9]{8})\.h5\.tmp)"};
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (std::regex_match(file, m, tmp_name) && std::stoll(m[1]) < newest) {
      std::error_code rm;
      if (fs::remove(e.path(), rm)) removed.push_back(e.path().string());
    }
  }
}

}  // namespace

std::vector<std::string> apply_retention(const std::string& dir, int keep) {
  const std::lock_guard<std::recursive_mutex> hdf5(hdf5_mutex());
  std::vector<std::string> removed;
  std::vector<std::int64_t> versions = versions_in(dir);
  if (versions.empty()) return removed;
  // Every version kept (keep 0): no version goes, and no link is walked (thousands of versions at each save), but
  // the temporaries of writes that never committed do (a trainer's share of a 128-GPU version: gigabytes).
  if (keep <= 0) {
    remove_leftovers(dir, versions.back(), removed);
    return removed;
  }
  const std::optional<std::set<std::string>> kept =
      kept_files(dir, versions, std::min(versions.size(), static_cast<std::size_t>(keep)));
  if (!kept) return removed;
  for (std::int64_t v : versions) {
    const std::string name = version_file_name(v);
    if (kept->count(name)) continue;
    std::error_code ec;
    const std::string p = (fs::path(dir) / name).string();
    if (fs::remove(p, ec)) removed.push_back(p);
  }
  remove_unlinked_segments(dir, *kept, removed);
  remove_leftovers(dir, versions.back(), removed);
  return removed;
}

}  // namespace arclight::ckpt
