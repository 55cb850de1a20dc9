#include "store_archive.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::app {

namespace {
std::string latest_in(const std::string& dir) {
  const std::string latest = ckpt::latest_version(dir);
  if (latest.empty()) throw Error("no LATEST version in " + dir);
  return (std::filesystem::path(dir) / latest).string();
}
}  // namespace

// LATEST links every segment of the logs before it: the logs only grow. A segment's entries are counted from its
// attribute where it has one, so a late entry is found without reading the segments before it.
std::vector<store::SpanLogEntry> CheckpointStoreArchive::read(std::uint64_t first, std::uint64_t last) {
  if (!holds_spans_) throw Error("checkpoint.span_log = \"none\": the spans are not kept");
  std::lock_guard<std::mutex> lock(mutex_);
  const ckpt::CheckpointsHeld held;  // LATEST's version stays while it is read
  const std::string version = latest_in(dir_);
  std::vector<store::SpanLogEntry> out;
  std::uint64_t at = 0;  // the entry each segment begins with
  for (const std::string& segment : ckpt::log_segments(version, "/store/span_log")) {
    if (at > last) break;
    auto count = entry_counts_.find(segment);
    if (count == entry_counts_.end()) {
      const std::optional<std::uint64_t> said = ckpt::log_segment_entries(version, segment);
      count = entry_counts_.emplace(segment, said ? *said : entries_of(version, segment).size()).first;
    }
    if (first < at + count->second) {
      const std::vector<store::SpanLogEntry>& entries = entries_of(version, segment);
      if (entries.size() != count->second)
        throw Error(log::concat(segment, " of ", version, " holds ", entries.size(), " entries, not the ",
                                count->second, " it says"));
      for (std::uint64_t i = std::max(first, at); i <= last && i < at + entries.size(); ++i)
        out.push_back(entries[i - at]);
    }
    at += count->second;
  }
  if (out.size() != last - first + 1)
    throw Error(log::concat(version, ": its span log holds ", at, " entries, not entry ", last));
  return out;
}

void CheckpointStoreArchive::history(Order order, const std::function<bool(std::string_view)>& visit) {
  const ckpt::CheckpointsHeld held;
  const std::string version = latest_in(dir_);
  std::vector<std::string> segments = ckpt::log_segments(version, "/store/history");
  if (order == Order::newest_first) std::reverse(segments.begin(), segments.end());
  for (const std::string& segment : segments)
    if (!visit(ckpt::read_log_segment(version, segment))) return;
}

const std::vector<store::SpanLogEntry>& CheckpointStoreArchive::entries_of(const std::string& version,
                                                                           const std::string& segment) {
  if (cached_segment_ != segment) {
    cached_entries_ = store::decode_span_log(ckpt::read_log_segment(version, segment));
    cached_segment_ = segment;
  }
  return cached_entries_;
}

}  // namespace arclight::app
