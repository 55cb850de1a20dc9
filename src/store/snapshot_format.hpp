#pragma once
// The layout of MemoryStore's snapshot (store-private): what its export (store_snapshot.cpp) writes and its import
// (store_import.cpp) reads.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "arclight/core/bytes.hpp"
#include "arclight/store/types.hpp"

namespace arclight::store::snapshot {

inline constexpr std::uint32_t tables_magic = 0x54534c41;  // "ALST"
inline constexpr std::uint32_t tables_format = 6;  // 5: no span with an extra JSON (Span::extra_json) in the logs;
                                                   // 4: no history record of kind 6 (placed_rollout) with them, so
                                                   // that an older arclight refuses the tables, not a record;
                                                   // 3: without whether each attempt's spans were kept; 2: without what
                                                   // was let go of (read, imported whole)
inline constexpr std::size_t lost_entry_bytes = 1 + 8;  // kind, id: the least a history entry takes
// A history entry's kind on the wire for an ended rollout whose attempts say where their spans lie in the span log
// (kind 1, written before, does not say: a query of its spans scans the whole log).
inline constexpr std::uint8_t placed_rollout = 6;
// Where an attempt's spans are, after each attempt of a placed rollout: a byte, then for `placed` two uint64s.
enum SpanPlace : std::uint8_t { no_spans = 0, placed = 1, not_kept = 2 };

// One span log entry, its record still in the log's bytes.
struct EntryView {
  RolloutId rollout_id;
  AttemptId attempt_id;
  std::uint64_t sequence_id;
  std::string_view record;
};
inline EntryView next_entry(ByteReader& log) {
  EntryView e;
  e.rollout_id = log.u64();
  e.attempt_id = log.u64();
  e.sequence_id = log.u64();
  e.record = log.bytes();
  return e;
}

}  // namespace arclight::store::snapshot
