// MemoryStore's queries: what is in memory, under the lock, and what the store let go of, read
// back from its archive without it.
#include <algorithm>
#include <unordered_map>

#include "arclight/core/log.hpp"
#include "arclight/store/memory_store.hpp"
#include "arclight/store/span_record.hpp"
#include "store_errors.hpp"

namespace arclight::store {
namespace {

template <class T>
Page<T> page_of(std::vector<T>&& all, Paging paging) {
  Page<T> page;
  page.total = all.size();
  std::size_t begin = std::min(paging.offset, all.size());
  std::size_t end = begin + std::min(paging.limit, all.size() - begin);
  page.items.assign(std::make_move_iterator(all.begin() + begin), std::make_move_iterator(all.begin() + end));
  return page;
}

}  // namespace

// ---- queries --------------------------------------------------------------------------

Page<Rollout> MemoryStore::query_rollouts(const RolloutFilter& filter, Paging paging) {
  auto matches = [&](const Rollout& r) {
    return (filter.statuses == 0 || (filter.statuses & bit(r.status))) && (!filter.mode || *filter.mode == r.mode);
  };
  std::vector<Rollout> all;
  std::vector<std::optional<Rollout>> named(filter.ids.size());  // by id: in memory, or read back below
  std::vector<RolloutId> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (filter.ids.empty()) {
      for (const RolloutRecord& rec : rollouts_)
        if (!rec.lost && matches(rec.rollout)) all.push_back(rec.rollout);
      return page_of(std::move(all), paging);
    }
    for (std::size_t i = 0; i < filter.ids.size(); ++i) {
      const RolloutId id = filter.ids[i];
      if (rollout_released(id))
        released.push_back(id);
      else if (id != 0 && id <= rollout_count() && !rollout_at(id).lost)
        named[i] = rollout_at(id).rollout;
    }
  }
  std::unordered_map<RolloutId, ArchivedRollout> read = read_back(released);
  for (std::size_t i = 0; i < filter.ids.size(); ++i) {  // in the order asked for; a lost one is left out
    if (auto it = read.find(filter.ids[i]); it != read.end()) named[i] = it->second.rollout;
    if (named[i] && matches(*named[i])) all.push_back(std::move(*named[i]));
  }
  return page_of(std::move(all), paging);
}

Page<Attempt> MemoryStore::query_attempts(const AttemptFilter& filter, Paging paging) {
  auto matches = [&](const Attempt& a) {
    return (filter.statuses == 0 || (filter.statuses & bit(a.status))) &&
           (filter.worker_id.empty() || filter.worker_id == a.worker_id);
  };
  std::vector<Attempt> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (filter.rollout_id == 0) {  // those of rollouts in memory (some of a rollout let go of may be left)
      for (const AttemptRecord& rec : attempts_)
        if (!rec.lost && !rollout_released(rec.attempt.rollout_id) && matches(rec.attempt)) all.push_back(rec.attempt);
      return page_of(std::move(all), paging);
    }
    if (!rollout_released(filter.rollout_id)) {
      for (AttemptId id : rollout_record(filter.rollout_id).attempts)
        if (matches(attempt_at(id).attempt)) all.push_back(attempt_at(id).attempt);
      return page_of(std::move(all), paging);
    }
  }
  for (Attempt& a : read_back_one(filter.rollout_id).attempts)
    if (matches(a)) all.push_back(std::move(a));
  return page_of(std::move(all), paging);
}

Attempt MemoryStore::get_latest_attempt(RolloutId rollout_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!rollout_released(rollout_id)) return attempt_record(rollout_record(rollout_id), latest_attempt).attempt;
  }
  ArchivedRollout r = read_back_one(rollout_id);
  if (r.attempts.empty()) throw missing(name_of(r.rollout) + " has no attempt");
  return r.attempts.back();
}

Page<Span> MemoryStore::query_spans(const SpanFilter& filter, Paging paging) {
  std::vector<Span> all;
  std::vector<ReleasedSpans> released;  // copies: the records may go once the lock is let go of
  bool record_released = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    record_released = rollout_released(filter.rollout_id);
    if (!record_released) {
      RolloutRecord& rollout = rollout_record(filter.rollout_id);
      std::vector<const AttemptRecord*> attempts;
      if (filter.attempt_id == 0) {
        for (AttemptId id : rollout.attempts) attempts.push_back(&attempt_at(id));
      } else if (!(filter.attempt_id == latest_attempt && rollout.attempts.empty())) {
        attempts.push_back(&attempt_record(rollout, filter.attempt_id));
      }
      for (const AttemptRecord* rec : attempts) {
        if (rec->spans_released)
          released.push_back(
              {rec->attempt.rollout_id, rec->attempt.id, rec->first_log_entry, rec->last_log_entry, rec->spans_unkept});
        for (const StoredSpan& stored : rec->spans) {
          if (stored.sequence_id <= filter.after_sequence_id) continue;
          Span span = decode_span_record(rec->attempt.rollout_id, rec->attempt.id, stored.sequence_id, stored.record);
          if (filter.name.empty() || span.name == filter.name) all.push_back(std::move(span));
        }
      }
    }
  }
  if (record_released) {
    all = read_back_spans(read_back_one(filter.rollout_id), filter);
  } else {
    std::optional<std::vector<Span>> spans = archived_spans(released, filter);
    if (!spans)
      throw missing(log::concat("rollout ", filter.rollout_id, ": its spans are not where the store put them"));
    for (Span& span : *spans) all.push_back(std::move(span));
  }
  // In the rollout's order: ids given by clients need not come in order, nor do attempts' spans.
  std::stable_sort(all.begin(), all.end(), [](const Span& a, const Span& b) { return a.sequence_id < b.sequence_id; });
  return page_of(std::move(all), paging);
}

std::optional<std::vector<Span>> MemoryStore::archived_spans(const std::vector<ReleasedSpans>& released,
                                                             const SpanFilter& filter) {
  std::vector<Span> out;
  if (released.empty()) return out;
  const std::shared_ptr<StoreArchive> archive = this->archive();
  for (const ReleasedSpans& rec : released) {
    const std::string name = log::concat("attempt ", rec.attempt_id, " of rollout ", rec.rollout_id);
    if (rec.unkept || !archive ||
        !archive->holds_spans()) {           // not kept: a query of the rollout gets the spans there are, one
      if (filter.attempt_id == 0) continue;  // of this attempt an error
      throw missing(name + spans_not_kept);
    }
    try {
      const std::vector<SpanLogEntry> entries = archive->read(rec.first_log_entry, rec.last_log_entry);
      if (entries.empty() || entries.front().attempt_id != rec.attempt_id ||
          entries.back().attempt_id != rec.attempt_id)
        return std::nullopt;
      for (const SpanLogEntry& entry : entries) {
        if (entry.attempt_id != rec.attempt_id || entry.sequence_id <= filter.after_sequence_id) continue;
        Span span = decode_span_record(entry.rollout_id, entry.attempt_id, entry.sequence_id, entry.record);
        if (filter.name.empty() || span.name == filter.name) out.push_back(std::move(span));
      }
    } catch (const std::exception& e) {  // a file gone or damaged since: an answer, not the end of rank 0
      throw missing(name + ": its spans live in the checkpoint, which did not read back: " + e.what());
    }
  }
  return out;
}

}  // namespace arclight::store
