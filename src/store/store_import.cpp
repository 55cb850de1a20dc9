// MemoryStore's state from a checkpoint: the import, whole or lazy (store_snapshot.cpp writes it; store_release.cpp
// reads back, on a query, what a lazy import left in the checkpoint).
#include <unistd.h>

#include <algorithm>

#include "arclight/core/bytes.hpp"
#include "arclight/core/log.hpp"
#include "arclight/store/memory_store.hpp"
#include "arclight/store/record_codec.hpp"
#include "arclight/store/span_record.hpp"
#include "snapshot_format.hpp"

namespace arclight::store {
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
  contents_held_.clear();
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
  if (in.u32() != snapshot::tables_magic) throw DecodeError("store tables: unknown format");
  const std::uint32_t format = in.u32();
  if (format < 2) throw DecodeError("store tables: unknown format");
  if (format > snapshot::tables_format)
    throw DecodeError(log::concat("store tables: format ", format, ", written by a newer arclight (this one reads ",
                                  snapshot::tables_format, " and before)"));
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
  const std::uint64_t entries = (tables.size() + history.size() + lost_bytes) / snapshot::lost_entry_bytes;
  if (kept_out.rollout_base > rollout_count || kept_out.attempt_base > attempt_count ||
      kept_out.resources_released > resources_count || rollout_count - kept_out.rollout_base > entries ||
      attempt_count - kept_out.attempt_base > entries || resources_count > entries)
    throw DecodeError("store snapshot: counts beyond its size");
  // The lost segments' bytes above are only what the version's links claim. The records in memory were in the saving
  // rank's memory: more of them than this machine's memory holds is a forged count (its allocation would end the
  // rank), not a store to rebuild.
  const double record_bytes = double(rollout_count - kept_out.rollout_base) * sizeof(RolloutRecord) +
                              double(attempt_count - kept_out.attempt_base) * sizeof(AttemptRecord) +
                              double(resources_count) * sizeof(ResourcesVersion);
  if (record_bytes > double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE)))
    throw DecodeError(log::concat("store snapshot: counts of records (", rollout_count, " rollouts, ", attempt_count,
                                  " attempts) past this machine's memory"));
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
  for (std::uint64_t open = in.u64(); open > 0; --open) place_rollout(decode_history_rollout(in, false), false);
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
MemoryStore::ArchivedRollout MemoryStore::decode_history_rollout(ByteReader& from, bool placed) {
  ArchivedRollout r;
  r.rollout = decode_rollout(from);
  const std::uint32_t attempts = from.u32();
  if (attempts != r.rollout.attempt_count) throw DecodeError("store snapshot: an attempt count that does not add up");
  for (std::uint32_t k = 0; k < attempts; ++k) {
    Attempt& a = r.attempts.emplace_back(decode_attempt(from));
    if (a.rollout_id != r.rollout.id) throw DecodeError("store snapshot: an attempt of another rollout");
    if (a.sequence_id != k + 1) throw DecodeError("store snapshot: attempts out of order");
  }
  if (!placed) return r;
  for (std::uint32_t k = 0; k < attempts; ++k) {
    ArchivedRollout::SpanPlace& place = r.span_places.emplace_back();
    place.state = from.u8();
    if (place.state > snapshot::not_kept) throw DecodeError("store history: an attempt's span place of no kind");
    if (place.state != snapshot::placed) continue;
    place.first_log_entry = from.u64();
    place.last_log_entry = from.u64();
    if (place.first_log_entry > place.last_log_entry) throw DecodeError("store history: a span place out of order");
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
    if (kind == HistoryEntry::rollout || kind == snapshot::placed_rollout) {
      ArchivedRollout r = decode_history_rollout(past, kind == snapshot::placed_rollout);
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
  // The tables held the content of archived versions that rollouts not ended named: it goes at the next release.
  for (const ResourcesVersion& v : resources_)
    if (content_archived(v) && !v.content.empty()) contents_held_.push_back(v.id);
}

// The span log: each span's record kept as it is, under its attempt; an entry of spans let go of
// (a lazy import's) keeps its place in the log, as it did in the store that saved.
void MemoryStore::import_span_log(std::string_view span_log, Imported& imported) {
  for (ByteReader log(span_log); log.remaining() > 0;) {
    const auto [rollout_id, attempt_id, sequence_id, record] = snapshot::next_entry(log);
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
