#pragma once
// Rank 0's spans once the store has let them go (checkpoint.span_log = "all"): read back from
// the span log of the checkpoint directory's LATEST version, one segment at a time.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "arclight/store/memory_store.hpp"

namespace arclight::app {

class CheckpointSpanArchive final : public store::SpanArchive {
 public:
  explicit CheckpointSpanArchive(std::string checkpoint_dir) : dir_(std::move(checkpoint_dir)) {}
  std::vector<store::SpanLogEntry> read(std::uint64_t first, std::uint64_t last) override;

 private:
  // A segment's entries; the last one read is kept, as queries tend to come for one step's rollouts.
  const std::vector<store::SpanLogEntry>& entries_of(const std::string& version, const std::string& segment);

  const std::string dir_;
  std::mutex mutex_;
  std::map<std::string, std::uint64_t> entry_counts_;  // by segment: segments never change
  std::string cached_segment_;
  std::vector<store::SpanLogEntry> cached_entries_;
};

}  // namespace arclight::app
