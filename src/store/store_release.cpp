// Bounded memory on rank 0: MemoryStore lets go of the spans and records that a committed
// checkpoint holds, reads them back from its archive when a query asks, and what an import restores of them.
#include <algorithm>

#include "arclight/core/bytes.hpp"
#include "arclight/core/log.hpp"
#include "arclight/store/memory_store.hpp"
#include "arclight/store/record_codec.hpp"
#include "arclight/store/span_record.hpp"
#include "snapshot_format.hpp"

namespace arclight::store {

std::size_t MemoryStore::release_spans(std::size_t until_entry, const std::vector<RolloutId>& keep) {
  std::lock_guard<std::mutex> lock(mutex_);
  until_entry = std::min(until_entry, span_log_base_ + span_log_.size());
  const std::unordered_set<RolloutId> kept(keep.begin(), keep.end());
  std::vector<AttemptId> candidates;
  candidates.swap(held_back_);
  for (std::size_t i = std::max(release_scan_, span_log_base_); i < until_entry; ++i)
    candidates.push_back(span_log_[i - span_log_base_].first);
  release_scan_ = std::max(release_scan_, until_entry);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  if (spans_archived()) archived_spans_end_ = std::max(archived_spans_end_, until_entry);
  std::size_t released = 0;
  for (AttemptId id : candidates) {
    if (attempt_released(id)) continue;
    AttemptRecord& rec = attempt_at(id);
    if (rec.spans_released || rec.spans.empty()) continue;
    const Rollout& rollout = rollout_at(rec.attempt.rollout_id).rollout;
    if (!is_final(rollout.status) || kept.count(rollout.id) || rec.last_log_entry >= until_entry) {
      held_back_.push_back(id);  // it may still take spans, or be trained on
      continue;
    }
    for (const StoredSpan& stored : rec.spans) stats_.span_bytes -= sizeof(StoredSpan) + stored.record.capacity();
    released += rec.spans.size();
    std::vector<StoredSpan>().swap(rec.spans);
    std::unordered_set<std::string>().swap(rec.span_ids);
    rec.spans_released = true;
    rec.spans_unkept = !spans_archived();
  }
  while (!span_log_.empty() &&
         (attempt_released(span_log_.front().first) || attempt_at(span_log_.front().first).spans_released)) {
    span_log_.pop_front();
    ++span_log_base_;
  }
  return released;
}

// Front to back, so that ids stay an offset into the tables: a rollout that is slow to end
// holds back the ones after it until it has.
std::size_t MemoryStore::release_records(std::size_t until_history_entry, const std::vector<RolloutId>& keep) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!archive_) return 0;
  const std::unordered_set<RolloutId> kept(keep.begin(), keep.end());
  auto releasable = [&](const RolloutRecord& rec) {
    if (!is_final(rec.rollout.status) || rec.history_entry >= until_history_entry || kept.count(rec.rollout.id))
      return false;
    return std::all_of(rec.attempts.begin(), rec.attempts.end(),
                       [&](AttemptId id) { return attempt_at(id).spans.empty(); });  // let go of, or none
  };
  std::size_t released = 0;
  while (!rollouts_.empty() && releasable(rollouts_.front())) {
    rollouts_.pop_front();
    ++rollout_base_;
    ++released;
  }
  // An attempt goes with its rollout (a lost one has none), once the ones before it have gone.
  while (!attempts_.empty() &&
         (attempts_.front().attempt.rollout_id == 0 || rollout_released(attempts_.front().attempt.rollout_id))) {
    attempts_.pop_front();
    ++attempt_base_;
  }
  // The history's entries a checkpoint holds, up to the first rollout still in memory; the
  // content of resources versions with them, but for the latest of each name.
  while (!history_.empty() && history_base_ < until_history_entry &&
         (history_.front().kind != HistoryEntry::rollout || rollout_released(history_.front().id))) {
    if (history_.front().kind == HistoryEntry::resources) {
      resources_released_ = history_.front().id;
      if (content_archived(resources_[resources_released_ - 1])) contents_held_.push_back(resources_released_);
    } else if (history_.front().kind == HistoryEntry::lost_resources) {
      // A lazy import places it from the tables, as the versions before it. An import that lost records puts them
      // after the history it kept, so a lost version may come after newer ones: the count never goes back.
      resources_released_ = std::max<std::size_t>(resources_released_, history_.front().id);
    }
    history_.pop_front();
    ++history_base_;
  }
  let_go_of_archived_contents_locked();
  return released;
}

void MemoryStore::let_go_of_archived_contents_locked() {
  if (contents_held_.empty()) return;
  std::unordered_set<ResourcesId> named;
  for (const RolloutRecord& rec : rollouts_)
    if (!is_final(rec.rollout.status) && rec.rollout.resources_id != 0) named.insert(rec.rollout.resources_id);
  std::vector<ResourcesId> still;
  for (ResourcesId id : contents_held_) {
    ResourcesVersion& v = resources_[id - 1];
    if (!content_archived(v)) continue;  // in memory as any version
    if (named.count(id))
      still.push_back(id);
    else
      std::string().swap(v.content);
  }
  contents_held_.swap(still);
}

std::shared_ptr<StoreArchive> MemoryStore::archive() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return archive_;
}

void MemoryStore::walk_archived_history(const std::string& what, StoreArchive::Order order,
                                        const std::function<bool(ArchivedRollout&&)>& on_rollout,
                                        const std::function<bool(ResourcesVersion&&)>& on_resources) {
  const std::shared_ptr<StoreArchive> archive = this->archive();
  auto gone = [&](const std::string& why) {
    return StoreError(StoreError::not_found, what + " left rank 0's memory for the checkpoint, " + why);
  };
  if (!archive) throw gone("which is no longer read");
  bool found = false;
  auto walk = [&](std::string_view segment) {
    for (ByteReader past(segment); past.remaining() > 0;) {
      const std::uint8_t kind = past.u8();
      if (kind == HistoryEntry::rollout || kind == snapshot::placed_rollout) {
        found = !on_rollout(decode_history_rollout(past, kind == snapshot::placed_rollout));
      } else if (kind == HistoryEntry::resources) {
        found = !on_resources(decode_resources(past));
      } else if (kind == HistoryEntry::lost_rollout) {
        ArchivedRollout lost;
        lost.rollout.id = past.u64();
        lost.lost = true;
        found = !on_rollout(std::move(lost));
      } else if (kind == HistoryEntry::lost_attempt || kind == HistoryEntry::lost_resources) {
        past.u64();
      } else {
        throw DecodeError("store history: unknown record " + std::to_string(kind));
      }
      if (found) return false;
    }
    return true;
  };
  try {
    archive->history(order, walk);
    if (found) return;
  } catch (const std::exception& e) {  // a file gone or damaged since: an answer, not the end of rank 0
    throw gone(std::string("which did not read back: ") + e.what());
  }
  throw gone("which does not hold it");
}

std::unordered_map<RolloutId, MemoryStore::ArchivedRollout> MemoryStore::read_back(const std::vector<RolloutId>& ids) {
  std::unordered_map<RolloutId, ArchivedRollout> out;
  if (ids.empty()) return out;
  std::unordered_set<RolloutId> wanted(ids.begin(), ids.end());
  walk_archived_history(
      log::concat("rollout ", ids.front()), StoreArchive::Order::oldest_first,
      [&](ArchivedRollout&& r) {
        if (!wanted.erase(r.rollout.id)) return true;
        if (!r.lost) out.emplace(r.rollout.id, std::move(r));
        return !wanted.empty();
      },
      [](ResourcesVersion&&) { return true; });
  return out;
}

MemoryStore::ArchivedRollout MemoryStore::read_back_one(RolloutId id) {
  auto read = read_back({id});
  if (read.empty()) throw StoreError(StoreError::not_found, log::concat("rollout ", id, lost_with_damage));
  return std::move(read.begin()->second);
}

std::unordered_map<ResourcesId, ResourcesVersion> MemoryStore::read_back_resources(
    std::unordered_set<ResourcesId> wanted) {
  std::unordered_map<ResourcesId, ResourcesVersion> found;
  if (wanted.empty()) return found;
  // Newest first: the versions asked for most are those of the rollouts that waited past a checkpoint.
  walk_archived_history(
      log::concat("the content of resources ", *std::min_element(wanted.begin(), wanted.end())),
      StoreArchive::Order::newest_first, [](ArchivedRollout&&) { return true; },
      [&](ResourcesVersion&& v) {
        if (wanted.erase(v.id)) found.emplace(v.id, std::move(v));
        return !wanted.empty();
      });
  return found;
}

// A rollout let go of: its spans are in the archive's span log, before the entries it was told of.
std::vector<Span> MemoryStore::read_back_spans(const ArchivedRollout& r, const SpanFilter& filter) {
  AttemptId attempt = filter.attempt_id;
  if (attempt == latest_attempt) {
    if (r.attempts.empty()) return {};
    attempt = r.attempts.back().id;
  } else if (attempt != 0 &&
             std::none_of(r.attempts.begin(), r.attempts.end(), [&](const Attempt& a) { return a.id == attempt; })) {
    throw StoreError(StoreError::not_found, log::concat("no attempt ", attempt, " of rollout ", r.rollout.id));
  }
  std::size_t end = 0;
  std::shared_ptr<StoreArchive> archive;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    end = archived_spans_end_;
    archive = archive_;
  }
  std::vector<Span> out;
  // Not kept: as for spans let go of without their records; none is kept if none ever went to an archive.
  if (!archive || !archive->holds_spans() || end == 0) {
    if (filter.attempt_id == 0) return out;
    throw StoreError(StoreError::not_found,
                     log::concat("attempt ", attempt, " of rollout ", r.rollout.id, spans_not_kept));
  }
  if (r.span_places.size() == r.attempts.size() && !r.attempts.empty()) {
    std::vector<ReleasedSpans> placed;
    for (std::size_t k = 0; k < r.attempts.size(); ++k) {
      const ArchivedRollout::SpanPlace& place = r.span_places[k];
      if ((attempt != 0 && r.attempts[k].id != attempt) || place.state == snapshot::no_spans) continue;
      if (place.state == snapshot::not_kept) {  // as for one in memory: of every attempt, the spans there are
        if (filter.attempt_id == 0) continue;
        throw StoreError(StoreError::not_found,
                         log::concat("attempt ", attempt, " of rollout ", r.rollout.id, spans_not_kept));
      }
      placed.push_back({r.rollout.id, r.attempts[k].id, place.first_log_entry, place.last_log_entry, false});
    }
    try {
      if (std::optional<std::vector<Span>> spans = archived_spans(placed, filter)) return std::move(*spans);
    } catch (const StoreError&) {  // places past the log's end: the whole log says what it holds
    }
  }
  // Its record does not say where in the log its spans are (or the log was written anew since): the whole log, a
  // bounded stretch at a time.
  constexpr std::size_t stretch = 4096;
  try {
    for (std::size_t first = 0; first < end; first += stretch) {
      for (const SpanLogEntry& entry : archive->read(first, std::min(end, first + stretch) - 1)) {
        if (entry.rollout_id != r.rollout.id || (attempt != 0 && entry.attempt_id != attempt) ||
            entry.sequence_id <= filter.after_sequence_id)
          continue;
        Span span = decode_span_record(entry.rollout_id, entry.attempt_id, entry.sequence_id, entry.record);
        if (filter.name.empty() || span.name == filter.name) out.push_back(std::move(span));
      }
    }
  } catch (const std::exception& e) {
    throw StoreError(StoreError::not_found,
                     log::concat("rollout ", r.rollout.id,
                                 ": its spans live in the checkpoint, which did not read back: ", e.what()));
  }
  return out;
}

// The span counters of rollouts whose spans left memory, as the tables say: the logs may not hold those spans.
void MemoryStore::restore_span_counters(const Released& released) {
  for (const Released::SpansReleased& a : released.spans_released) {
    if (a.attempt <= attempt_base_ || a.attempt > attempt_count())
      throw DecodeError("store snapshot: an attempt out of place");
    const AttemptRecord& rec = attempt_at(a.attempt);
    if (rec.lost) continue;  // with its rollout, in a damaged segment: no counter left to keep
    const RolloutId rollout = rec.attempt.rollout_id;
    if (rollout == 0 || rollout_released(rollout))
      throw DecodeError("store snapshot: spans let go of by an attempt without its rollout");
    std::uint64_t& counter = rollout_at(rollout).last_sequence_id;
    counter = std::max(counter, a.last_sequence_id);
  }
}

// A whole import, after the span log: the attempts whose spans the store that saved let go of and kept nowhere
// (checkpoint.span_log = "none") answer "not kept" there and so here, whatever archive comes next, not as attempts
// that never had spans; those whose spans a version held before they went have them back from its log (no
// placeholders in the log: its entries stay numbered as the file's). Returns whether any spans went unkept.
bool MemoryStore::mark_unkept_spans(const Released& released) {
  auto unkept = [](AttemptRecord& rec) {
    if (!rec.lost && rec.spans.empty()) rec.spans_released = rec.spans_unkept = true;
  };
  // Format 3's tables do not say it of each attempt: none was kept if none ever went to an archive.
  const bool none_archived = released.present && released.archived_spans_end == 0;
  bool any = none_archived && released.rollout_base > 0;
  // Every attempt listed had spans: one that the log gives none of kept them nowhere it can read (a span log written
  // anew without them after these tables were taken, a damaged segment).
  for (const Released::SpansReleased& a : released.spans_released)
    if ((released.unkept_known ? a.unkept : none_archived) || attempt_at(a.attempt).spans.empty())
      unkept(attempt_at(a.attempt)), any = true;
  if (none_archived)  // the records it let go of, their spans first: in memory again, their spans not
    for (AttemptRecord& rec : attempts_)
      if (rec.attempt.rollout_id != 0 && rec.attempt.rollout_id <= released.rollout_base) unkept(rec);
  return any;
}

void MemoryStore::set_archive(std::shared_ptr<StoreArchive> archive) {
  std::lock_guard<std::mutex> lock(mutex_);
  archive_ = std::move(archive);
  if (spans_archived()) return;
  // From here on no archive holds the spans let go of (checkpoint.span_log = "none", or a span log written anew
  // without them): they stay not kept, whatever archive comes after.
  for (AttemptRecord& rec : attempts_)
    if (rec.spans_released) rec.spans_unkept = true;
  archived_spans_end_ = 0;
}

}  // namespace arclight::store
