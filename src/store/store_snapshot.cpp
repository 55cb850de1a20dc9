// MemoryStore's state for checkpoints: export and import, whole or lazy (store_release.cpp: what
// the store lets go of once a checkpoint holds it, reads back, and an import restores of it).
#include <algorithm>

#include "arclight/core/bytes.hpp"
#include "arclight/core/log.hpp"
#include "arclight/store/memory_store.hpp"
#include "arclight/store/record_codec.hpp"
#include "arclight/store/span_record.hpp"

namespace arclight::store {
namespace {
constexpr std::uint32_t tables_magic = 0x54534c41;  // "ALST"
constexpr std::uint32_t tables_format = 4;       // 3: without whether each attempt's spans were kept; 2: without what
                                                 // was let go of (read, imported whole)
constexpr std::size_t lost_entry_bytes = 1 + 8;  // kind, id: the least a history entry takes

}  // namespace

namespace {
// One span log entry, its record still in the log's bytes.
struct EntryView {
  RolloutId rollout_id;
  AttemptId attempt_id;
  std::uint64_t sequence_id;
  std::string_view record;
};
EntryView next_entry(ByteReader& log) {
  EntryView e;
  e.rollout_id = log.u64();
  e.attempt_id = log.u64();
  e.sequence_id = log.u64();
  e.record = log.bytes();
  return e;
}
}  // namespace

std::vector<SpanLogEntry> decode_span_log(std::string_view bytes) {
  std::vector<SpanLogEntry> entries;
  for (ByteReader log(bytes); log.remaining() > 0;) {
    const EntryView e = next_entry(log);
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
  w.u32(tables_magic);
  w.u32(tables_format);
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

// Counts come from the bytes: a claimed count only bounds a loop that runs out of them.
MemoryStore::Released MemoryStore::decode_released(ByteReader& in, std::uint32_t format) {
  Released r;
  r.present = true;
  r.unkept_known = format >= 4;
  for (std::uint64_t* n : {&r.rollout_base, &r.attempt_base, &r.resources_released, &r.archived_spans_end,
                           &r.history_base, &r.span_log_base})
    *n = in.u64();
  for (std::uint64_t& n : r.stats.rollouts) n = in.u64();
  for (std::uint64_t& n : r.stats.attempts) n = in.u64();
  r.stats.spans = in.u64();
  r.stats.resources = in.u64();
  for (std::uint64_t id = 1; id <= r.resources_released; ++id) {
    r.resources.push_back(decode_resources(in));
    if (r.resources.back().id != id) throw DecodeError("store tables: resources let go of out of order");
  }
  for (std::uint64_t n = in.u64(); n > 0; --n) {
    const AttemptId attempt = in.u64();
    r.other_attempts.emplace_back(attempt, in.u64());
  }
  for (std::uint64_t n = in.u64(); n > 0; --n) r.lost_rollouts.push_back(in.u64());
  for (std::uint64_t n = in.u64(); n > 0; --n) {
    Released::SpansReleased& a = r.spans_released.emplace_back();
    a.attempt = in.u64();
    a.first_log_entry = in.u64();
    a.last_log_entry = in.u64();
    a.last_sequence_id = in.u64();
    if (r.unkept_known) {
      const std::uint8_t unkept = in.u8();
      if (unkept > 1) throw DecodeError("store tables: an attempt neither kept nor unkept");
      a.unkept = unkept == 1;
    }
  }
  return r;
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
    w.u8(e.kind);
    if (e.kind >= HistoryEntry::lost_rollout) {
      w.u64(e.id);
    } else if (e.kind == HistoryEntry::rollout) {
      if (rollout_released(e.id)) throw in_checkpoint(i);
      const RolloutRecord& rec = rollouts_[e.id - 1 - rollout_base_];
      encode_rollout(w, rec.rollout);
      w.u32(static_cast<std::uint32_t>(rec.attempts.size()));
      for (AttemptId id : rec.attempts) encode_attempt(w, attempt_at(id).attempt);
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

MemoryStore::Imported MemoryStore::import_state(std::string_view tables, std::string_view history,
                                                std::string_view span_log,
                                                std::optional<std::uint64_t> lost_history_bytes,
                                                std::optional<LogStarts> from) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (rollout_count() != 0 || attempt_count() != 0 || !resources_.empty())
    throw StoreError(StoreError::invalid_argument, "import_state needs an empty store");
  // A snapshot that does not read leaves the store empty, as it was.
  try {
    return import_locked(tables, history, span_log, lost_history_bytes, from);
  } catch (...) {  // a bad_alloc too: this machine's memory, not the snapshot, so it is no DecodeError
    clear_locked();
    throw;
  }
}

void MemoryStore::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  clear_locked();
}

void MemoryStore::clear_locked() {
  rollouts_.clear();
  attempts_.clear();
  resources_.clear();
  resources_by_name_.clear();
  workers_.clear();
  history_.clear();
  span_log_.clear();
  rollout_base_ = attempt_base_ = history_base_ = 0;
  resources_released_ = 0;
  span_log_base_ = release_scan_ = archived_spans_end_ = 0;
  held_back_.clear();
  queue_.clear();
  watched_.clear();
  stats_ = Statistics{};
}

MemoryStore::Imported MemoryStore::import_locked(std::string_view tables, std::string_view history,
                                                 std::string_view span_log,
                                                 std::optional<std::uint64_t> lost_history_bytes,
                                                 std::optional<LogStarts> from) {
  Imported imported;
  const Released released = import_tables(tables, history, lost_history_bytes.value_or(0), from);
  const bool lazy = from && released.present;
  import_history(history, lazy);
  if (lost_history_bytes) mark_lost(imported);
  count_imported(lazy);
  restore_span_counters(released);
  import_span_log(span_log, imported);
  const bool unkept = !lazy && mark_unkept_spans(released);
  if (lazy) {  // the run's statistics, of the records let go of too; the bytes of the spans in memory
    const std::uint64_t span_bytes = stats_.span_bytes;
    stats_ = released.stats;
    stats_.span_bytes = span_bytes;
  } else if (unkept && released.stats.spans > stats_.spans + imported.lost_spans) {
    // The store's count, which counted them, less the log's spans of attempts this import lost (the unkept spans
    // of attempts a damaged segment took stay counted: no table says how many they were).
    stats_.spans = released.stats.spans - imported.lost_spans;
  }
  imported.requeued = requeue_unended();
  imported.resources = resources_.size();
  return imported;
}

// The tables: what can still change (open rollouts, workers). Sizes the id-indexed tables: for
// a lazy import, only what stays in memory.
MemoryStore::Released MemoryStore::import_tables(std::string_view tables, std::string_view history,
                                                 std::uint64_t lost_bytes, std::optional<LogStarts> from) {
  ByteReader in(tables);
  if (in.u32() != tables_magic) throw DecodeError("store tables: unknown format");
  const std::uint32_t format = in.u32();
  if (format < 2 || format > tables_format) throw DecodeError("store tables: unknown format");
  const std::uint64_t rollout_count = in.u64(), attempt_count = in.u64(), resources_count = in.u64();
  const Released released = format == 2 ? Released{} : decode_released(in, format);  // format 2: imported whole
  if (from) {
    if (format == 2 && (from->history != 0 || from->span_log != 0))
      throw DecodeError("store snapshot: logs in part, but its tables do not say what was let go of");
    if (from->history > released.history_base || from->span_log > released.span_log_base)
      throw DecodeError(log::concat("store snapshot: logs from entries ", from->history, " and ", from->span_log,
                                    ", past what it had let go of (", released.history_base, " and ",
                                    released.span_log_base, ")"));
  }
  const bool lazy = from && released.present;
  // Spans let go of and kept nowhere (checkpoint.span_log = "none", or a span log written anew without them) are not in
  // the version's span log, which so numbers its entries below the saving store's count: read from past them, the log
  // would be numbered as the store counted, and an archive that holds spans reads the file by number. Read from its
  // start, it is numbered as the file. Signs of such a store: no span went to an archive since it last had one that
  // keeps none, or attempts in memory whose spans went kept nowhere (what versions of older builds show).
  const bool left_spans_out =
      released.archived_spans_end == 0 || std::any_of(released.spans_released.begin(), released.spans_released.end(),
                                                      [](const Released::SpansReleased& a) { return a.unkept; });
  if (lazy && from->span_log > 0 && left_spans_out && spans_archived())
    throw DecodeError(
        "its span log left out spans let go of and kept nowhere (checkpoint.span_log = \"none\" when it saved, or a "
        "log written anew without them), and this store keeps spans: read it from its start");
  const Released& kept_out = lazy ? released : Released{};
  // Every id in memory comes exactly once, from the tables or the history: a count beyond what
  // the bytes can hold (a history entry's least size: a lost record's kind and id) is refused
  // before anything is allocated for it. With lost segments, the bytes they held count too.
  const std::uint64_t entries = (tables.size() + history.size() + lost_bytes) / lost_entry_bytes;
  if (kept_out.rollout_base > rollout_count || kept_out.attempt_base > attempt_count ||
      kept_out.resources_released > resources_count || rollout_count - kept_out.rollout_base > entries ||
      attempt_count - kept_out.attempt_base > entries || resources_count > entries)
    throw DecodeError("store snapshot: counts beyond its size");
  rollout_base_ = kept_out.rollout_base;
  attempt_base_ = kept_out.attempt_base;
  rollouts_.resize(rollout_count - rollout_base_);
  attempts_.resize(attempt_count - attempt_base_);
  resources_.resize(resources_count);
  if (lazy) {
    history_base_ = from->history;
    span_log_base_ = release_scan_ = from->span_log;
    resources_released_ = kept_out.resources_released;
    // Into a store whose archive keeps no spans: no span goes to an archive from here on, and how far one went is
    // forgotten, as set_archive forgets it (its versions' span log leaves out what it lets go of, which the check above
    // finds at the next resume that keeps spans).
    archived_spans_end_ = archive_ && !archive_->holds_spans() ? 0 : kept_out.archived_spans_end;
    place_released(kept_out);
  }
  for (std::uint64_t open = in.u64(); open > 0; --open) place_rollout(decode_history_rollout(in), false);
  for (std::uint64_t workers = in.u64(); workers > 0; --workers) {
    Worker w = decode_worker_liveness(in);
    w.status = WorkerStatus::unknown;  // a worker of the run that saved: not heard from since
    workers_[w.id] = w;
  }
  if (in.remaining() != 0) throw DecodeError("store tables: trailing bytes");
  return released;
}

// A lazy import's records that the history's newest entries do not place: the resources versions
// before them, and the records in memory whose rollouts were let go of or lost.
void MemoryStore::place_released(const Released& released) {
  for (const ResourcesVersion& v : released.resources) resources_[v.id - 1] = v;  // in order, checked
  auto attempt_slot = [this](AttemptId id) -> AttemptRecord& {
    if (id <= attempt_base_ || id > attempt_count() || attempt_at(id).attempt.id != 0)
      throw DecodeError("store snapshot: an attempt let go of out of place");
    return attempt_at(id);
  };
  for (const auto& [id, rollout] : released.other_attempts) {
    if (rollout != 0 && !rollout_released(rollout)) throw DecodeError("store snapshot: an attempt's rollout in memory");
    AttemptRecord& rec = attempt_slot(id);
    rec.attempt.id = id;
    rec.attempt.rollout_id = rollout;
    rec.attempt.status = AttemptStatus::failed;  // ended; not seen by queries, which skip its rollout
    rec.lost = rollout == 0;
    rec.spans_released = true;
  }
  for (RolloutId id : released.lost_rollouts) {
    if (id <= rollout_base_ || id > rollout_count() || rollout_at(id).rollout.id != 0)
      throw DecodeError("store snapshot: a lost rollout out of place");
    RolloutRecord& rec = rollout_at(id);
    rec.rollout.id = id;
    rec.rollout.status = RolloutStatus::failed;
    rec.lost = true;
  }
  // Its record comes with its rollout's, in the history; where its spans are, only from here.
  for (const Released::SpansReleased& a : released.spans_released) {
    if (a.attempt <= attempt_base_ || a.attempt > attempt_count() || a.first_log_entry > a.last_log_entry)
      throw DecodeError("store snapshot: an attempt out of place");
    AttemptRecord& rec = attempt_at(a.attempt);
    rec.spans_released = true;
    rec.spans_unkept = released.unkept_known ? a.unkept : released.archived_spans_end == 0;
    rec.first_log_entry = a.first_log_entry;
    rec.last_log_entry = a.last_log_entry;
  }
}

// A rollout and its attempts as the tables and the history hold them.
MemoryStore::ArchivedRollout MemoryStore::decode_history_rollout(ByteReader& from) {
  ArchivedRollout r;
  r.rollout = decode_rollout(from);
  const std::uint32_t attempts = from.u32();
  if (attempts != r.rollout.attempt_count) throw DecodeError("store snapshot: an attempt count that does not add up");
  for (std::uint32_t k = 0; k < attempts; ++k) {
    Attempt& a = r.attempts.emplace_back(decode_attempt(from));
    if (a.rollout_id != r.rollout.id) throw DecodeError("store snapshot: an attempt of another rollout");
    if (a.sequence_id != k + 1) throw DecodeError("store snapshot: attempts out of order");
  }
  return r;
}

// A rollout and its attempts, into the places their ids name (each empty until then).
RolloutId MemoryStore::place_rollout(ArchivedRollout r, bool ended) {
  const RolloutId id = r.rollout.id;
  if (id <= rollout_base_ || id > rollout_count() || rollout_at(id).rollout.id != 0)
    throw DecodeError("store snapshot: a rollout out of place");
  if (is_final(r.rollout.status) != ended || r.rollout.config.max_attempts < 1)
    throw DecodeError("store snapshot: rollout " + std::to_string(id) + " is not what its place says");
  RolloutRecord& rec = rollout_at(id);
  rec.rollout = std::move(r.rollout);
  for (Attempt& a : r.attempts) {
    if (a.id <= attempt_base_ || a.id > attempt_count() || attempt_at(a.id).attempt.id != 0)
      throw DecodeError("store snapshot: an attempt out of place");
    rec.attempts.push_back(a.id);
    attempt_at(a.id).attempt = std::move(a);
  }
  return id;
}

// The history: ended rollouts and resources versions, in the order they came. A lazy import
// keeps only the entries of records let go of, as the store that saved did.
void MemoryStore::import_history(std::string_view history, bool lazy) {
  for (ByteReader past(history); past.remaining() > 0;) {
    const std::uint8_t kind = past.u8();
    if (kind == HistoryEntry::rollout) {
      ArchivedRollout r = decode_history_rollout(past);
      const RolloutId id = r.rollout.id;
      if (!rollout_released(id))
        rollout_at(place_rollout(std::move(r), true)).history_entry = history_base_ + history_.size();
      history_.push_back(HistoryEntry{HistoryEntry::rollout, id});
    } else if (kind == HistoryEntry::resources) {
      ResourcesVersion v = decode_resources(past);
      const ResourcesId id = v.id;
      if (id == 0 || id > resources_.size()) throw DecodeError("store snapshot: resources out of place");
      if (id <= resources_released_) {  // the tables placed it
        if (resources_[id - 1].name != v.name) throw DecodeError("store snapshot: resources out of place");
      } else {
        if (resources_[id - 1].id != 0) throw DecodeError("store snapshot: resources out of place");
        resources_[id - 1] = std::move(v);
      }
      history_.push_back(HistoryEntry{HistoryEntry::resources, id});
    } else if (kind >= HistoryEntry::lost_rollout && kind <= HistoryEntry::lost_resources) {
      const std::uint64_t id = past.u64();
      if (lazy && placed_lost(kind, id))
        history_.push_back(HistoryEntry{static_cast<HistoryEntry::Kind>(kind), id});
      else
        place_lost(kind, id);
    } else {
      throw DecodeError("store history: unknown record " + std::to_string(kind));
    }
  }
}

// A lazy import's lost record that the tables placed, or that left memory.
bool MemoryStore::placed_lost(std::uint8_t kind, std::uint64_t id) const {
  if (kind == HistoryEntry::lost_rollout)
    return rollout_released(id) || (id > rollout_base_ && id <= rollout_count() && rollout_at(id).lost);
  if (kind == HistoryEntry::lost_attempt)
    return attempt_released(id) || (id > attempt_base_ && id <= attempt_count() && attempt_at(id).lost);
  return id != 0 && id <= resources_released_ && resources_[id - 1].id == id && resources_[id - 1].name.empty();
}

// A record that a damaged segment held: its id stays taken, its contents are gone.
void MemoryStore::place_lost(std::uint8_t kind, std::uint64_t id) {
  auto check_free = [id](bool in_memory, auto taken) {
    if (!in_memory || taken()) throw DecodeError("store snapshot: a lost record out of place");
  };
  if (kind == HistoryEntry::lost_rollout) {
    check_free(id > rollout_base_ && id <= rollout_count(), [&] { return rollout_at(id).rollout.id != 0; });
    RolloutRecord& rec = rollout_at(id);
    rec.rollout.id = id;
    rec.rollout.status = RolloutStatus::failed;  // ended, as all the history's rollouts
    rec.lost = true;
    rec.history_entry = history_base_ + history_.size();
  } else if (kind == HistoryEntry::lost_attempt) {
    check_free(id > attempt_base_ && id <= attempt_count(), [&] { return attempt_at(id).attempt.id != 0; });
    AttemptRecord& rec = attempt_at(id);
    rec.attempt.id = id;  // of no rollout: no rollout leads to it
    rec.attempt.status = AttemptStatus::failed;
    rec.lost = true;
  } else {
    check_free(id != 0 && id <= resources_.size(), [&] { return resources_[id - 1].id != 0; });
    resources_[id - 1].id = id;  // and no name
  }
  history_.push_back(HistoryEntry{static_cast<HistoryEntry::Kind>(kind), id});
}

// After a history that lost segments: every id in memory that none of the rest placed was theirs.
void MemoryStore::mark_lost(Imported& imported) {
  for (std::size_t i = 0; i < rollouts_.size(); ++i)
    if (rollouts_[i].rollout.id == 0)
      place_lost(HistoryEntry::lost_rollout, rollout_base_ + i + 1), ++imported.lost_rollouts;
  for (std::size_t i = 0; i < attempts_.size(); ++i)
    if (attempts_[i].attempt.id == 0)
      place_lost(HistoryEntry::lost_attempt, attempt_base_ + i + 1), ++imported.lost_attempts;
  for (std::size_t i = 0; i < resources_.size(); ++i)
    if (resources_[i].id == 0) place_lost(HistoryEntry::lost_resources, i + 1), ++imported.lost_resources;
}

// Every id placed (none missing), the name index rebuilt, and the statistics (a lazy import's
// come with the tables: they count what left memory too).
void MemoryStore::count_imported(bool lazy) {
  for (const RolloutRecord& rec : rollouts_) {
    if (rec.rollout.id == 0) throw DecodeError("store snapshot: a rollout is missing");
    if (!rec.lost && !lazy) ++stats_.rollouts[static_cast<int>(rec.rollout.status)];
  }
  for (const AttemptRecord& rec : attempts_) {
    if (rec.attempt.id == 0) throw DecodeError("store snapshot: an attempt is missing");
    if (!rec.lost && !lazy) ++stats_.attempts[static_cast<int>(rec.attempt.status)];
  }
  for (const ResourcesVersion& v : resources_) {
    if (v.id == 0) throw DecodeError("store snapshot: a resources version is missing");
    if (v.name.empty()) continue;  // lost
    resources_by_name_[v.name].push_back(v.id);
    if (!lazy) ++stats_.resources;
  }
}

// The span log: each span's record kept as it is, under its attempt; an entry of spans let go of
// (a lazy import's) keeps its place in the log, as it did in the store that saved.
void MemoryStore::import_span_log(std::string_view span_log, Imported& imported) {
  for (ByteReader log(span_log); log.remaining() > 0;) {
    const auto [rollout_id, attempt_id, sequence_id, record] = next_entry(log);
    if (attempt_released(attempt_id)) {
      span_log_.emplace_back(attempt_id, 0);
      continue;
    }
    if (attempt_id != 0 && attempt_id <= attempt_count() && attempt_at(attempt_id).lost) {
      ++imported.lost_spans;  // its attempt's record is gone
      continue;
    }
    if (attempt_id == 0 || attempt_id > attempt_count() || attempt_at(attempt_id).attempt.rollout_id != rollout_id)
      throw DecodeError("span log: a span of an unknown attempt");
    AttemptRecord& rec = attempt_at(attempt_id);
    if (rec.spans_released) {
      span_log_.emplace_back(attempt_id, 0);
      continue;
    }
    if (const std::string_view span_id = span_id_of_body(record); !span_id.empty()) rec.span_ids.emplace(span_id);
    std::uint64_t& counter = rollout_at(rollout_id).last_sequence_id;
    counter = std::max(counter, sequence_id);
    keep_span(rec, sequence_id, std::string(record));
  }
}

// What had not ended goes back to the queue; its runner's attempt is over.
std::vector<RolloutId> MemoryStore::requeue_unended() {
  const double now = clock_.now();
  std::vector<RolloutId> requeued;
  for (RolloutRecord& rec : rollouts_) {
    if (is_final(rec.rollout.status)) continue;
    if (!rec.attempts.empty()) {
      AttemptRecord& latest = attempt_at(rec.attempts.back());
      if (!is_final(latest.attempt.status)) set_attempt_status(latest, AttemptStatus::unresponsive, now);
    }
    set_rollout_status(rec, RolloutStatus::requeuing, now);
    requeued.push_back(rec.rollout.id);
  }
  if (!requeued.empty()) log::debug("store restored: ", requeued.size(), " rollouts requeued");
  return requeued;
}

}  // namespace arclight::store
