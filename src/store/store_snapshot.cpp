// MemoryStore's state for checkpoints: the export (store_import.cpp: the import, whole or lazy; store_release.cpp:
// what the store lets go of once a checkpoint holds it, reads back, and an import restores of it).
#include <algorithm>

#include "arclight/core/bytes.hpp"
#include "arclight/core/log.hpp"
#include "arclight/store/memory_store.hpp"
#include "arclight/store/record_codec.hpp"
#include "arclight/store/span_record.hpp"
#include "snapshot_format.hpp"

namespace arclight::store {
std::vector<SpanLogEntry> decode_span_log(std::string_view bytes) {
  std::vector<SpanLogEntry> entries;
  for (ByteReader log(bytes); log.remaining() > 0;) {
    const snapshot::EntryView e = snapshot::next_entry(log);
    entries.push_back({e.rollout_id, e.attempt_id, e.sequence_id, std::string(e.record)});
  }
  return entries;
}

MemoryStore::Snapshot MemoryStore::export_state(std::size_t history_from, std::size_t span_log_from,
                                                SpanLog span_log) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Snapshot s;
  s.tables = tables_locked();
  s.history_end = history_base_ + history_.size();
  s.span_log_end = span_log_base_ + span_log_.size();
  s.history = history_locked(history_from, s.history_end);
  if (span_log == SpanLog::copied) {
    s.span_log = span_log_locked(span_log_from, s.span_log_end);
    s.span_log_bytes = s.span_log.size();
  } else {
    s.span_log_bytes = span_log_bytes_locked(span_log_from, s.span_log_end);
  }
  s.history_base = history_base_;
  s.span_log_base = span_log_base_;
  return s;
}

std::string MemoryStore::export_history(std::size_t from, std::size_t until) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return history_locked(from, until);
}

namespace {
constexpr std::size_t span_log_piece = 4096;  // entries: a millisecond or so under the store's lock
}

std::string MemoryStore::export_span_log(std::size_t from, std::size_t until) const {
  until = std::min(until, log_lengths().second);
  std::uint64_t bytes = 0;  // counted first, so that the copy grows no buffer (a gigabyte copied twice)
  for (std::size_t at = from; at < until; at += span_log_piece) {
    std::lock_guard<std::mutex> lock(mutex_);
    bytes += span_log_bytes_locked(at, std::min(until, at + span_log_piece));
  }
  std::string out;
  out.reserve(bytes);
  append_span_log(from, until, out);
  return out;
}

void MemoryStore::append_span_log(std::size_t from, std::size_t until, std::string& out) const {
  until = std::min(until, log_lengths().second);
  for (std::size_t at = from; at < until; at += span_log_piece) {
    std::lock_guard<std::mutex> lock(mutex_);
    append_span_log_locked(at, std::min(until, at + span_log_piece), out);
  }
}

std::string MemoryStore::tables_locked() const {
  std::string out;
  ByteWriter w(out);
  w.u32(snapshot::tables_magic);
  w.u32(snapshot::tables_format);
  w.u64(rollout_count());
  w.u64(attempt_count());
  w.u64(resources_.size());
  encode_released(w);
  std::vector<const RolloutRecord*> open;
  for (const RolloutRecord& rec : rollouts_)
    if (!is_final(rec.rollout.status)) open.push_back(&rec);
  w.u64(open.size());
  for (const RolloutRecord* rec : open) {
    encode_rollout(w, rec->rollout);
    w.u32(static_cast<std::uint32_t>(rec->attempts.size()));
    for (AttemptId id : rec->attempts) encode_attempt(w, attempt_at(id).attempt);
  }
  std::vector<const Worker*> workers;
  for (const auto& [id, worker] : workers_) workers.push_back(&worker);
  std::sort(workers.begin(), workers.end(), [](const Worker* a, const Worker* b) { return a->id < b->id; });
  w.u64(workers.size());
  for (const Worker* worker : workers) encode_worker_liveness(w, *worker);
  return out;
}

// What a lazy import needs of the records let go of: where they end, the run's statistics (which
// count them), the resources versions (the contents of all but the latest of a name live in the
// archive), and the records in memory that neither the open rollouts nor the history's newest
// entries place.
void MemoryStore::encode_released(ByteWriter& w) const {
  for (std::uint64_t n :
       {std::uint64_t(rollout_base_), std::uint64_t(attempt_base_), std::uint64_t(resources_released_),
        std::uint64_t(archived_spans_end_), std::uint64_t(history_base_), std::uint64_t(span_log_base_)})
    w.u64(n);
  for (std::uint64_t n : stats_.rollouts) w.u64(n);
  for (std::uint64_t n : stats_.attempts) w.u64(n);
  w.u64(stats_.spans);
  w.u64(stats_.resources);
  for (ResourcesId id = 1; id <= resources_released_; ++id) encode_resources(w, resources_[id - 1]);
  std::vector<std::pair<AttemptId, RolloutId>> others;
  std::vector<const AttemptRecord*> spans_released;
  for (const AttemptRecord& rec : attempts_) {
    if (rec.lost || rollout_released(rec.attempt.rollout_id))
      others.emplace_back(rec.attempt.id, rec.lost ? 0 : rec.attempt.rollout_id);
    else if (rec.spans_released)
      spans_released.push_back(&rec);
  }
  w.u64(others.size());
  for (const auto& [attempt, rollout] : others) w.u64(attempt), w.u64(rollout);
  std::vector<RolloutId> lost;
  for (const RolloutRecord& rec : rollouts_)
    if (rec.lost) lost.push_back(rec.rollout.id);
  w.u64(lost.size());
  for (RolloutId id : lost) w.u64(id);
  w.u64(spans_released.size());
  for (const AttemptRecord* rec : spans_released)
    w.u64(rec->attempt.id), w.u64(rec->first_log_entry), w.u64(rec->last_log_entry),
        w.u64(rollout_at(rec->attempt.rollout_id).last_sequence_id), w.u8(rec->spans_unkept);
}

// Records let go of: the history before them is the checkpoint's.
std::string MemoryStore::history_locked(std::size_t from, std::size_t until) const {
  auto in_checkpoint = [](std::size_t entry) {
    return StoreError(StoreError::invalid_argument,
                      log::concat("history entry ", entry, " lives in the checkpoint, not in memory"));
  };
  if (from < history_base_) throw in_checkpoint(from);
  std::string out;
  ByteWriter w(out);
  for (std::size_t i = from; i < std::min(until, history_base_ + history_.size()); ++i) {
    const HistoryEntry& e = history_[i - history_base_];
    if (e.kind == HistoryEntry::rollout) {
      if (rollout_released(e.id)) throw in_checkpoint(i);
      const RolloutRecord& rec = rollouts_[e.id - 1 - rollout_base_];
      // Where each attempt's spans lie, where an archive keeps them (span_log = "all"): a query of them, once the
      // record has left memory, reads just those entries.
      const bool placed = spans_archived();
      w.u8(placed ? snapshot::placed_rollout : std::uint8_t(HistoryEntry::rollout));
      encode_rollout(w, rec.rollout);
      w.u32(static_cast<std::uint32_t>(rec.attempts.size()));
      for (AttemptId id : rec.attempts) encode_attempt(w, attempt_at(id).attempt);
      for (AttemptId id : rec.attempts) {
        if (!placed) break;
        const AttemptRecord& a = attempt_at(id);
        if (a.spans_unkept) {
          w.u8(snapshot::not_kept);
        } else if (a.spans.empty() && !a.spans_released) {
          w.u8(snapshot::no_spans);
        } else {
          w.u8(snapshot::placed);
          w.u64(a.first_log_entry), w.u64(a.last_log_entry);
        }
      }
      continue;
    }
    w.u8(e.kind);
    if (e.kind >= HistoryEntry::lost_rollout) {
      w.u64(e.id);
    } else {
      encode_resources(w, resources_[e.id - 1]);
    }
  }
  return out;
}

// Released spans: with an archive, the log before them is the checkpoint's (an export
// from there would have to read it back); without one, they are not kept.
template <class Visit>
void MemoryStore::visit_span_log_locked(std::size_t from, std::size_t until, Visit&& visit) const {
  if (from < span_log_base_ && spans_archived())
    throw StoreError(StoreError::invalid_argument, "the span log before entry " + std::to_string(span_log_base_) +
                                                       " lives in the checkpoint, not in memory");
  for (std::size_t i = std::max(from, span_log_base_); i < std::min(until, span_log_base_ + span_log_.size()); ++i) {
    const auto& [attempt_id, index] = span_log_[i - span_log_base_];
    if (attempt_released(attempt_id) || attempt_at(attempt_id).spans_released) {
      if (spans_archived())
        throw StoreError(StoreError::invalid_argument,
                         "span log entry " + std::to_string(i) + " lives in the checkpoint, not in memory");
      continue;  // let go of and kept nowhere: left out
    }
    const AttemptRecord& rec = attempt_at(attempt_id);
    visit(rec.attempt.rollout_id, attempt_id, rec.spans[index]);
  }
}

std::uint64_t MemoryStore::span_log_bytes_locked(std::size_t from, std::size_t until) const {
  std::uint64_t bytes = 0;
  visit_span_log_locked(from, until, [&](RolloutId, AttemptId, const StoredSpan& span) {
    bytes += 3 * sizeof(std::uint64_t) + sizeof(std::uint32_t) + span.record.size();
  });
  return bytes;
}

void MemoryStore::append_span_log_locked(std::size_t from, std::size_t until, std::string& out) const {
  ByteWriter w(out);
  visit_span_log_locked(from, until, [&](RolloutId rollout_id, AttemptId attempt_id, const StoredSpan& span) {
    w.u64(rollout_id);
    w.u64(attempt_id);
    w.u64(span.sequence_id);
    w.bytes(span.record);
  });
}

// Tens of megabytes between checkpoints: grown by doubling, the copies and the fresh pages they
// fault in would cost rank 0 twice over.
std::string MemoryStore::span_log_locked(std::size_t from, std::size_t until) const {
  std::string out;
  out.reserve(span_log_bytes_locked(from, until));
  append_span_log_locked(from, until, out);
  return out;
}

std::pair<std::size_t, std::size_t> MemoryStore::log_lengths() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {history_base_ + history_.size(), span_log_base_ + span_log_.size()};
}

}  // namespace arclight::store
