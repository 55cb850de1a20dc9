#include "arclight/store/memory_store.hpp"

#include <algorithm>
#include <chrono>

#include "arclight/core/log.hpp"
#include "arclight/store/span_record.hpp"
#include "store_errors.hpp"

namespace arclight::store {
namespace {

constexpr const char* released_record =
    " has ended and left rank 0's memory for the checkpoint: it takes no more changes";

std::string record_of(const Span& span) {
  std::string record;
  ByteWriter out(record);
  encode_span_body(out, span);
  return record;
}

}  // namespace

MemoryStore::MemoryStore(const Clock& clock, RolloutConfig default_config)
    : clock_(clock), default_config_(default_config) {
  if (default_config_.max_attempts < 1)
    throw StoreError(StoreError::invalid_argument, "max_attempts must be at least 1");
}

// ---- records ------------------------------------------------------------------

MemoryStore::RolloutRecord& MemoryStore::rollout_record(RolloutId id) {
  if (id == 0 || id > rollout_count()) throw missing(log::concat("no rollout ", id));
  if (rollout_released(id)) throw refused(log::concat("rollout ", id, released_record));
  if (rollout_at(id).lost) throw missing(log::concat("rollout ", id, lost_with_damage));
  return rollout_at(id);
}

MemoryStore::AttemptRecord& MemoryStore::attempt_record(RolloutRecord& rollout, AttemptId id) {
  if (id == latest_attempt) {
    if (rollout.attempts.empty()) throw missing(name_of(rollout.rollout) + " has no attempt");
    return attempt_at(rollout.attempts.back());
  }
  // A rollout in memory has its attempts in memory.
  if (id <= attempt_base_ || id > attempt_count() || attempt_at(id).attempt.rollout_id != rollout.rollout.id)
    throw missing(log::concat("no attempt ", id, " of ", name_of(rollout.rollout)));
  return attempt_at(id);
}

void MemoryStore::check_new_rollout(const NewRollout& in) const {
  if ((in.config ? *in.config : default_config_).max_attempts < 1)
    throw StoreError(StoreError::invalid_argument, "max_attempts must be at least 1");
  if (in.resources_id > resources_.size())
    throw missing(log::concat("no resources ", in.resources_id, " for a new rollout"));
}

MemoryStore::RolloutRecord& MemoryStore::create_rollout(NewRollout&& in, RolloutStatus status, double now) {
  check_new_rollout(in);
  RolloutConfig config = in.config.value_or(default_config_);
  RolloutRecord& rec = rollouts_.emplace_back();
  Rollout& r = rec.rollout;
  r.id = rollout_count();
  r.input = std::move(in.input);
  r.mode = in.mode;
  r.resources_id = in.resources_id;
  r.config = config;
  r.metadata = std::move(in.metadata);
  r.start_time = now;
  r.status = status;
  ++stats_.rollouts[static_cast<int>(status)];
  if (status == RolloutStatus::queuing) queue_.emplace_back(r.id, rec.queue_ticket = 1);
  return rec;
}

MemoryStore::AttemptRecord& MemoryStore::create_attempt(RolloutRecord& rollout, const std::string& worker_id,
                                                        double now) {
  AttemptRecord& rec = attempts_.emplace_back();
  Attempt& a = rec.attempt;
  a.id = attempt_count();
  a.rollout_id = rollout.rollout.id;
  a.sequence_id = ++rollout.rollout.attempt_count;
  a.worker_id = worker_id;
  a.status = AttemptStatus::preparing;
  a.start_time = a.last_heartbeat_time = now;
  ++stats_.attempts[static_cast<int>(a.status)];
  rollout.attempts.push_back(a.id);
  watched_.insert(a.id);
  if (rollout.rollout.status != RolloutStatus::preparing) set_rollout_status(rollout, RolloutStatus::preparing, now);
  if (!worker_id.empty()) take_worker(worker_record(worker_id, now), a, now);
  return rec;
}

void MemoryStore::take_worker(Worker& w, const Attempt& a, double now) {
  w.status = WorkerStatus::busy;
  w.current_rollout = a.rollout_id;
  w.current_attempt = a.id;
  w.last_busy_time = now;
}

Worker& MemoryStore::worker_record(const std::string& id, double now) {
  auto [it, inserted] = workers_.try_emplace(id);
  Worker& w = it->second;
  if (inserted) w.id = id;
  w.last_heartbeat_time = now;
  ++w.heartbeats;
  if (w.status == WorkerStatus::unknown) w.status = w.current_rollout ? WorkerStatus::busy : WorkerStatus::idle;
  return w;
}

// As Agent Lightning: a worker whose attempt timed out or went unresponsive is unknown until it is heard from again.
void MemoryStore::release_worker(const Attempt& a, double now) {
  auto it = workers_.find(a.worker_id);
  if (it == workers_.end() || it->second.current_attempt != a.id) return;
  Worker& w = it->second;
  w.current_rollout = 0;
  w.current_attempt = 0;
  const bool lost_track = a.status == AttemptStatus::timeout || a.status == AttemptStatus::unresponsive;
  w.status = lost_track ? WorkerStatus::unknown : WorkerStatus::idle;
  w.last_idle_time = now;
}

// ---- state machine ----------------------------------------------------------------

void MemoryStore::set_rollout_status(RolloutRecord& rec, RolloutStatus status, double now) {
  Rollout& r = rec.rollout;
  --stats_.rollouts[static_cast<int>(r.status)];
  ++stats_.rollouts[static_cast<int>(status)];
  r.status = status;
  if (status == RolloutStatus::queuing || status == RolloutStatus::requeuing)
    queue_.emplace_back(r.id, ++rec.queue_ticket);
  if (is_final(status)) {
    r.end_time = now;
    rec.history_entry = history_base_ + history_.size();
    history_.push_back(HistoryEntry{HistoryEntry::rollout, r.id});
    for (AttemptId id : rec.attempts) {
      // Attempts of an ended rollout are no longer watched, and their workers are free.
      if (watched_.erase(id)) release_worker(attempt_at(id).attempt, now);
    }
    rollout_ended_.notify_all();
  }
}

void MemoryStore::set_attempt_status(AttemptRecord& rec, AttemptStatus status, double now) {
  Attempt& a = rec.attempt;
  --stats_.attempts[static_cast<int>(a.status)];
  ++stats_.attempts[static_cast<int>(status)];
  a.status = status;
  if (is_final(status)) {
    a.end_time = now;
    watched_.erase(a.id);
  }
  if (is_final(status) || status == AttemptStatus::unresponsive) release_worker(a, now);
}

void MemoryStore::transition_attempt(AttemptRecord& rec, AttemptStatus to, double now) {
  Attempt& a = rec.attempt;
  const AttemptStatus from = a.status;
  if (from == to) return;
  if (is_final(from) || to == AttemptStatus::preparing)
    throw refused(log::concat(name_of(a), ": cannot go from ", to_string(from), " to ", to_string(to)));
  set_attempt_status(rec, to, now);

  RolloutRecord& rollout = rollout_at(a.rollout_id);  // in memory, with its attempts
  Rollout& r = rollout.rollout;
  if (rollout.attempts.back() != a.id || is_final(r.status)) return;  // only the latest attempt moves its rollout
  switch (to) {
    case AttemptStatus::running:
      // The latest attempt alive again after the watchdog requeued its rollout (a span, a report of running, before
      // another worker took it): the rollout runs again, as Agent Lightning's heartbeat has it; left requeuing, it
      // was run a second time, and this attempt's result did not count.
      if (r.status == RolloutStatus::preparing || r.status == RolloutStatus::requeuing)
        set_rollout_status(rollout, RolloutStatus::running, now);
      break;
    case AttemptStatus::succeeded: set_rollout_status(rollout, RolloutStatus::succeeded, now); break;
    case AttemptStatus::failed:
    case AttemptStatus::timeout:
    case AttemptStatus::unresponsive:
      if (r.status == RolloutStatus::preparing || r.status == RolloutStatus::running) {
        bool retry = r.config.retries_on(to) && a.sequence_id < r.config.max_attempts;
        set_rollout_status(rollout, retry ? RolloutStatus::requeuing : RolloutStatus::failed, now);
      }
      break;
    case AttemptStatus::preparing: break;
  }
}

// ---- the queue ------------------------------------------------------------------------

std::vector<Rollout> MemoryStore::enqueue(std::vector<NewRollout> rollouts) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = clock_.now();
  std::vector<Rollout> out;
  out.reserve(rollouts.size());
  for (const NewRollout& in : rollouts) check_new_rollout(in);  // all or none
  for (NewRollout& in : rollouts) out.push_back(create_rollout(std::move(in), RolloutStatus::queuing, now).rollout);
  return out;
}

std::vector<AttemptedRollout> MemoryStore::dequeue(const std::string& worker_id, std::size_t max_count) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = clock_.now();
  std::vector<AttemptedRollout> out;
  if (!worker_id.empty()) worker_record(worker_id, now).last_dequeue_time = now;
  while (out.size() < max_count && !queue_.empty()) {
    auto [id, ticket] = queue_.front();
    queue_.pop_front();
    if (rollout_released(id)) continue;  // ended long ago: a stale entry
    RolloutRecord& rec = rollout_at(id);
    const RolloutStatus s = rec.rollout.status;
    if (rec.queue_ticket != ticket || (s != RolloutStatus::queuing && s != RolloutStatus::requeuing)) continue;
    AttemptRecord& attempt = create_attempt(rec, worker_id, now);
    out.push_back({rec.rollout, attempt.attempt});
  }
  if (out.empty() && !worker_id.empty()) {  // Agent Lightning's rule: a worker that finds no work is idle
    Worker& w = workers_.at(worker_id);
    if (w.status != WorkerStatus::idle) w.status = WorkerStatus::idle, w.last_idle_time = now;
  }
  return out;
}

AttemptedRollout MemoryStore::start_rollout(NewRollout rollout, const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = clock_.now();
  RolloutRecord& rec = create_rollout(std::move(rollout), RolloutStatus::preparing, now);
  AttemptRecord& attempt = create_attempt(rec, worker_id, now);
  return {rec.rollout, attempt.attempt};
}

AttemptedRollout MemoryStore::start_attempt(RolloutId rollout_id, const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = clock_.now();
  RolloutRecord& rec = rollout_record(rollout_id);
  if (is_final(rec.rollout.status))
    throw refused(name_of(rec.rollout) + " is " + std::string(to_string(rec.rollout.status)) + ": no new attempt");
  AttemptRecord& attempt = create_attempt(rec, worker_id, now);
  return {rec.rollout, attempt.attempt};
}

// ---- spans and updates ---------------------------------------------------------------

MemoryStore::AttemptRecord& MemoryStore::span_target(RolloutId rollout_id, AttemptId attempt_id,
                                                     std::uint64_t sequence_id, double now) {
  // The rollout's counter takes the largest id given, and the next span without one the id after it: one near 2^64
  // would wrap it to 0, which says "refused". Ids a JSON number holds exactly are plenty.
  if (sequence_id > max_sequence_id)
    throw StoreError(StoreError::invalid_argument, log::concat("sequence_id ", sequence_id, " is past 2^53"));
  RolloutRecord& rollout = rollout_record(rollout_id);
  AttemptRecord& rec = attempt_record(rollout, attempt_id);
  Attempt& a = rec.attempt;
  if (is_final(rollout.rollout.status))
    throw refused(name_of(rollout.rollout) + " is " + std::string(to_string(rollout.rollout.status)) +
                  ": span refused");
  if (is_final(a.status)) throw refused(name_of(a) + " is " + std::string(to_string(a.status)) + ": span refused");
  note_alive(rec, now);  // first span, or revival
  return rec;
}

// A sign of life (a span, a report of running): the attempt runs, its heartbeat is now, and a revived attempt takes
// its worker back (whose heartbeats keep it alive from then on).
void MemoryStore::note_alive(AttemptRecord& rec, double now) {
  Attempt& a = rec.attempt;
  if (a.status != AttemptStatus::running) transition_attempt(rec, AttemptStatus::running, now);
  a.last_heartbeat_time = now;
  if (!a.worker_id.empty()) {
    Worker& w = worker_record(a.worker_id, now);
    if (w.current_attempt == 0) take_worker(w, a, now);
  }
}

std::uint64_t MemoryStore::store_record(AttemptRecord& rec, std::uint64_t sequence_id, std::string record) {
  // Agent Lightning's clients and OTLP exporters send a span again when an answer is lost: one (rollout, attempt,
  // span id) is kept once, as their store does. Spans without an id (the built-in runners') are never compared.
  if (const std::string_view span_id = span_id_of_body(record); !span_id.empty())
    if (!rec.span_ids.emplace(span_id).second) return 0;
  std::uint64_t& counter = rollout_at(rec.attempt.rollout_id).last_sequence_id;
  counter = sequence_id == 0 ? counter + 1 : std::max(counter, sequence_id);
  const std::uint64_t kept = sequence_id == 0 ? counter : sequence_id;
  keep_span(rec, kept, std::move(record));
  return kept;
}

void MemoryStore::keep_span(AttemptRecord& rec, std::uint64_t sequence_id, std::string record) {
  StoredSpan& stored = rec.spans.emplace_back();
  stored.sequence_id = sequence_id;
  stored.record = std::move(record);
  stored.record.shrink_to_fit();
  const std::size_t entry = span_log_base_ + span_log_.size();
  if (rec.spans.size() == 1) rec.first_log_entry = entry;
  rec.last_log_entry = entry;
  span_log_.emplace_back(rec.attempt.id, static_cast<std::uint32_t>(rec.spans.size() - 1));
  ++stats_.spans;
  stats_.span_bytes += sizeof(StoredSpan) + stored.record.capacity();
}

template <class Add>
std::vector<std::uint64_t> MemoryStore::add_each(std::size_t count, const Add& add) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = clock_.now();
  std::vector<std::uint64_t> ids;
  ids.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    try {
      ids.push_back(add(i, now));
    } catch (const StoreError& e) {
      log::debug("span refused: ", e.what());
      ids.push_back(0);
    }
  }
  return ids;
}

std::uint64_t MemoryStore::add_span(Span span) {
  std::lock_guard<std::mutex> lock(mutex_);
  return store_record(span_target(span.rollout_id, span.attempt_id, span.sequence_id, clock_.now()), span.sequence_id,
                      record_of(span));
}

std::uint64_t MemoryStore::next_sequence_id(RolloutId rollout_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++rollout_record(rollout_id).last_sequence_id;
}

std::vector<std::uint64_t> MemoryStore::add_spans(std::vector<Span> spans) {
  return add_each(spans.size(), [&](std::size_t i, double now) {
    return store_record(span_target(spans[i].rollout_id, spans[i].attempt_id, spans[i].sequence_id, now),
                        spans[i].sequence_id, record_of(spans[i]));
  });
}

std::uint64_t MemoryStore::add_span_record(const SpanRecordView& span) {
  std::lock_guard<std::mutex> lock(mutex_);
  return store_record(span_target(span.rollout_id, span.attempt_id, span.sequence_id, clock_.now()), span.sequence_id,
                      std::string(span.body));
}

std::vector<std::uint64_t> MemoryStore::add_span_records(const std::vector<SpanRecordView>& spans) {
  return add_each(spans.size(), [&](std::size_t i, double now) {
    return store_record(span_target(spans[i].rollout_id, spans[i].attempt_id, spans[i].sequence_id, now),
                        spans[i].sequence_id, std::string(spans[i].body));
  });
}

Attempt MemoryStore::update_attempt(RolloutId rollout_id, AttemptId attempt_id, const AttemptUpdate& update) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = clock_.now();
  RolloutRecord& rollout = rollout_record(rollout_id);
  AttemptRecord& rec = attempt_record(rollout, attempt_id);
  if (is_final(rollout.rollout.status))
    throw refused(name_of(rollout.rollout) + " is " + std::string(to_string(rollout.rollout.status)) +
                  ": its attempts take no more updates");
  // An attempt reported running is alive, as after a span: the runners' task interface sends that as its heartbeat
  // (it was running already, and the watchdog failed an agent that reported every 10 s in a 45 s tool call).
  if (update.status == AttemptStatus::running)
    note_alive(rec, now);
  else if (update.status)
    transition_attempt(rec, *update.status, now);
  if (update.worker_id) rec.attempt.worker_id = *update.worker_id;
  if (update.last_heartbeat_time) rec.attempt.last_heartbeat_time = *update.last_heartbeat_time;
  return rec.attempt;
}

Rollout MemoryStore::update_rollout(RolloutId rollout_id, const RolloutUpdate& update) {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = clock_.now();
  RolloutRecord& rec = rollout_record(rollout_id);
  Rollout& r = rec.rollout;
  if (is_final(r.status))
    throw refused(name_of(r) + " is " + std::string(to_string(r.status)) + ": it takes no more updates");
  // Validate everything before changing anything.
  if (update.status && *update.status != r.status && *update.status != RolloutStatus::cancelled &&
      *update.status != RolloutStatus::failed)
    throw refused(name_of(r) + ": cannot be set from " + std::string(to_string(r.status)) + " to " +
                  std::string(to_string(*update.status)) + " (only cancelled or failed; attempts move the rest)");
  if (update.config && update.config->max_attempts < 1)
    throw StoreError(StoreError::invalid_argument, "max_attempts must be at least 1");
  if (update.resources_id && *update.resources_id > resources_.size())
    throw missing(log::concat("no resources ", *update.resources_id));
  if (update.mode) r.mode = *update.mode;
  if (update.resources_id) r.resources_id = *update.resources_id;
  if (update.config) r.config = *update.config;
  if (update.metadata) r.metadata = *update.metadata;
  if (update.status && *update.status != r.status) set_rollout_status(rec, *update.status, now);
  return r;
}

// ---- resources ------------------------------------------------------------------------

ResourcesVersion MemoryStore::add_resources(const std::string& name, std::string content) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (name.empty()) throw StoreError(StoreError::invalid_argument, "resources need a name");
  auto [it, inserted] = resources_by_name_.try_emplace(name);
  if (!inserted) throw refused("resources '" + name + "' exist already; update_resources adds a version");
  ResourcesVersion& v = resources_.emplace_back();
  v.id = resources_.size();
  history_.push_back(HistoryEntry{HistoryEntry::resources, v.id});
  v.name = name;
  v.version = 1;
  v.create_time = clock_.now();
  v.content = std::move(content);
  it->second.push_back(v.id);
  ++stats_.resources;
  return v;
}

ResourcesVersion MemoryStore::update_resources(const std::string& name, std::string content) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = resources_by_name_.find(name);
  if (it == resources_by_name_.end()) throw missing("no resources '" + name + "'; add_resources creates them");
  ResourcesVersion& v = resources_.emplace_back();
  v.id = resources_.size();
  history_.push_back(HistoryEntry{HistoryEntry::resources, v.id});
  v.name = name;
  v.version = resources_[it->second.back() - 1].version + 1;  // the name's earlier versions may have been lost
  v.create_time = clock_.now();
  v.content = std::move(content);
  it->second.push_back(v.id);
  ++stats_.resources;
  // The version before, no longer the latest: its content goes at the next release if a checkpoint holds it.
  const ResourcesVersion& before = resources_[it->second[it->second.size() - 2] - 1];
  if (content_archived(before)) contents_held_.push_back(before.id);
  return v;
}

ResourcesVersion MemoryStore::get_resources(ResourcesId id) { return get_resources(std::vector{id}).front(); }

std::vector<ResourcesVersion> MemoryStore::get_resources(const std::vector<ResourcesId>& ids) {
  std::vector<ResourcesVersion> out(ids.size());
  std::unordered_set<ResourcesId> archived;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const ResourcesId id = ids[i];
      if (id == 0 || id > resources_.size()) throw missing(log::concat("no resources ", id));
      if (resources_[id - 1].name.empty()) throw missing(log::concat("resources ", id, lost_with_damage));
      if (content_in_memory(resources_[id - 1]))
        out[i] = resources_[id - 1];
      else
        archived.insert(id);
    }
  }
  if (archived.empty()) return out;
  const std::unordered_map<ResourcesId, ResourcesVersion> read = read_back_resources(std::move(archived));
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (const auto it = read.find(ids[i]); it != read.end()) out[i] = it->second;
  return out;
}

std::vector<ResourcesVersion> MemoryStore::list_resources() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ResourcesVersion> out;
  out.reserve(resources_.size());
  for (const ResourcesVersion& v : resources_)
    if (!v.name.empty()) out.push_back(ResourcesVersion{v.id, v.name, v.version, v.create_time, {}});
  return out;
}

ResourcesVersion MemoryStore::get_latest_resources(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (name.empty()) {
    auto latest = std::find_if(resources_.rbegin(), resources_.rend(), [](const auto& v) { return !v.name.empty(); });
    if (latest == resources_.rend()) throw missing("no resources yet");
    return *latest;
  }
  auto it = resources_by_name_.find(name);
  if (it == resources_by_name_.end()) throw missing("no resources '" + name + "'");
  return resources_[it->second.back() - 1];
}

// ---- waiting, workers, statistics --------------------------------------------------

std::vector<Rollout> MemoryStore::wait_for_rollouts(const std::vector<RolloutId>& ids, double timeout_seconds) {
  std::size_t lost = 0;
  return wait_for_rollouts(ids, timeout_seconds, lost);
}

std::vector<Rollout> MemoryStore::wait_for_rollouts(const std::vector<RolloutId>& ids, double timeout_seconds,
                                                    std::size_t& lost) {
  lost = 0;
  std::vector<std::optional<Rollout>> ended(ids.size());
  std::vector<bool> was_released(ids.size());
  std::vector<RolloutId> released;  // ended long ago: read back below
  {
    std::unique_lock<std::mutex> lock(mutex_);
    for (RolloutId id : ids)
      if (!rollout_released(id)) rollout_record(id);  // every id must exist
    auto has_ended = [&](RolloutId id) { return rollout_released(id) || is_final(rollout_at(id).rollout.status); };
    rollout_ended_.wait_for(lock, std::chrono::duration<double>(std::max(0.0, timeout_seconds)),
                            [&] { return std::all_of(ids.begin(), ids.end(), has_ended); });
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (rollout_released(ids[i]))
        released.push_back(ids[i]), was_released[i] = true;
      else if (is_final(rollout_at(ids[i]).rollout.status))
        ended[i] = rollout_at(ids[i]).rollout;
  }
  const std::unordered_map<RolloutId, ArchivedRollout> read = read_back(released);
  std::vector<Rollout> out;  // as asked for
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ended[i])
      out.push_back(std::move(*ended[i]));
    else if (auto it = read.find(ids[i]); it != read.end())
      out.push_back(it->second.rollout);
    else if (was_released[i])  // lost with a damaged segment: left out
      ++lost;
  return out;
}

Worker MemoryStore::heartbeat(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (worker_id.empty()) throw StoreError(StoreError::invalid_argument, "a heartbeat needs a worker id");
  const double now = clock_.now();
  Worker& w = worker_record(worker_id, now);
  if (w.current_attempt && !attempt_released(w.current_attempt))
    attempt_at(w.current_attempt).attempt.last_heartbeat_time = now;
  return w;
}

std::vector<Worker> MemoryStore::query_workers() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Worker> out;
  for (const auto& [id, w] : workers_) out.push_back(w);
  std::sort(out.begin(), out.end(), [](const Worker& a, const Worker& b) { return a.id < b.id; });
  return out;
}

Statistics MemoryStore::statistics() {
  std::lock_guard<std::mutex> lock(mutex_);
  Statistics s = stats_;
  s.workers = workers_.size();
  s.queue_length =
      s.rollouts[static_cast<int>(RolloutStatus::queuing)] + s.rollouts[static_cast<int>(RolloutStatus::requeuing)];
  return s;
}

std::size_t MemoryStore::check_health() {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = clock_.now();
  std::vector<AttemptId> watched(watched_.begin(), watched_.end());
  std::sort(watched.begin(), watched.end());  // oldest first: a deterministic order
  std::size_t changed = 0;
  for (AttemptId id : watched) {
    AttemptRecord& rec = attempt_at(id);  // watched: its rollout has not ended, so both are in memory
    const Attempt& a = rec.attempt;
    const RolloutConfig& config = rollout_at(a.rollout_id).rollout.config;
    if (config.timeout_seconds > 0 && now - a.start_time > config.timeout_seconds) {
      transition_attempt(rec, AttemptStatus::timeout, now);
      ++changed;
    } else if (config.unresponsive_seconds > 0 && a.status != AttemptStatus::unresponsive &&
               now - a.last_heartbeat_time > config.unresponsive_seconds) {
      transition_attempt(rec, AttemptStatus::unresponsive, now);
      ++changed;
    }
  }
  if (default_config_.unresponsive_seconds > 0)
    for (auto& [id, w] : workers_)
      if (now - w.last_heartbeat_time > default_config_.unresponsive_seconds) w.status = WorkerStatus::unknown;
  return changed;
}

}  // namespace arclight::store
