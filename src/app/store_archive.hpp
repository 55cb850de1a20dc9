#pragma once
// Rank 0's records and spans once the store has let them go: read back from the history and the
// span log (checkpoint.span_log = "all") of the checkpoint directory's LATEST version.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "arclight/store/memory_store.hpp"

namespace arclight::app {

class CheckpointStoreArchive final : public store::StoreArchive {
 public:
  // holds_spans: checkpoint.span_log = "all" (with "none" the store keeps no spans it lets go of).
  CheckpointStoreArchive(std::string checkpoint_dir, bool holds_spans)
      : dir_(std::move(checkpoint_dir)), holds_spans_(holds_spans) {}
  std::vector<store::SpanLogEntry> read(std::uint64_t first, std::uint64_t last) override;
  void history(Order order, const std::function<bool(std::string_view)>& visit) override;
  bool holds_spans() const override { return holds_spans_; }

 private:
  // A segment's entries; the last one read is kept, as queries tend to come for one step's rollouts.
  const std::vector<store::SpanLogEntry>& entries_of(const std::string& version, const std::string& segment);

  const std::string dir_;
  const bool holds_spans_;
  std::mutex mutex_;
  std::map<std::string, std::uint64_t> entry_counts_;  // by segment: segments never change
  std::string cached_segment_;
  std::vector<store::SpanLogEntry> cached_entries_;
};

}  // namespace arclight::app
