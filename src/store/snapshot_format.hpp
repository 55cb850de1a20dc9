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
inline constexpr std::uint32_t tables_format = 4;  // 3: without whether each attempt's spans were kept; 2: without what
                                                   // was let go of (read, imported whole)
inline constexpr std::size_t lost_entry_bytes = 1 + 8;  // kind, id: the least a history entry takes

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
