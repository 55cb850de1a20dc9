// MemoryStore's state for checkpoints: export and import.
#include <algorithm>

#include "arclight/core/bytes.hpp"
#include "arclight/core/log.hpp"
#include "arclight/store/memory_store.hpp"

namespace arclight::store {
namespace {
constexpr std::uint32_t tables_magic = 0x54534c41;  // "ALST"
constexpr std::uint32_t tables_format = 1;

template <class Enum>
Enum read_enum(ByteReader& in, int count, const char* what) {
  const std::uint8_t v = in.u8();
  if (v >= count) throw DecodeError(std::string("store tables: bad ") + what + " " + std::to_string(v));
  return static_cast<Enum>(v);
}
}  // namespace

std::string MemoryStore::export_tables() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  ByteWriter w(out);
  w.u32(tables_magic);
  w.u32(tables_format);
  w.u64(rollouts_.size());
  for (const RolloutRecord& rec : rollouts_) {
    const Rollout& r = rec.rollout;
    w.u64(r.id);
    w.bytes(r.input);
    w.u8(static_cast<std::uint8_t>(r.mode));
    w.u64(r.resources_id);
    w.u8(static_cast<std::uint8_t>(r.status));
    w.f64(r.config.timeout_seconds);
    w.f64(r.config.unresponsive_seconds);
    w.u32(r.config.max_attempts);
    w.u8(r.config.retry_condition);
    w.bytes(r.metadata);
    w.f64(r.start_time);
    w.f64(r.end_time);
    w.u32(r.attempt_count);
  }
  w.u64(attempts_.size());
  for (const AttemptRecord& rec : attempts_) {
    const Attempt& a = rec.attempt;
    w.u64(a.id);
    w.u64(a.rollout_id);
    w.u32(a.sequence_id);
    w.bytes(a.worker_id);
    w.u8(static_cast<std::uint8_t>(a.status));
    w.f64(a.start_time);
    w.f64(a.end_time);
    w.f64(a.last_heartbeat_time);
  }
  std::vector<const Worker*> workers;
  for (const auto& [id, worker] : workers_) workers.push_back(&worker);
  std::sort(workers.begin(), workers.end(), [](const Worker* a, const Worker* b) { return a->id < b->id; });
  w.u64(workers.size());
  for (const Worker* worker : workers) {
    w.bytes(worker->id);
    w.u8(static_cast<std::uint8_t>(worker->status));
    w.f64(worker->last_heartbeat_time);
    w.u64(worker->heartbeats);
  }
  w.u64(resources_.size());
  for (const ResourcesVersion& v : resources_) {
    w.bytes(v.name);
    w.u64(v.version);
    w.f64(v.create_time);
    w.bytes(v.content);
  }
  return out;
}

std::string MemoryStore::export_span_log() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  out.reserve(stats_.span_bytes);
  ByteWriter w(out);
  for (const auto& [attempt_id, index] : span_log_) {
    const AttemptRecord& rec = attempts_[attempt_id - 1];
    const StoredSpan& span = rec.spans[index];
    w.u64(rec.attempt.rollout_id);
    w.u64(attempt_id);
    w.u64(span.sequence_id);
    w.bytes(span.record);
  }
  return out;
}

std::vector<RolloutId> MemoryStore::import_state(std::string_view tables, std::string_view span_log) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!rollouts_.empty() || !attempts_.empty() || !resources_.empty())
    throw StoreError(StoreError::invalid_argument, "import_state needs an empty store");
  ByteReader in(tables);
  if (in.u32() != tables_magic || in.u32() != tables_format) throw DecodeError("store tables: unknown format");
  const std::uint64_t rollouts = in.u64();
  for (std::uint64_t i = 0; i < rollouts; ++i) {
    RolloutRecord& rec = rollouts_.emplace_back();
    Rollout& r = rec.rollout;
    r.id = in.u64();
    if (r.id != i + 1) throw DecodeError("store tables: rollout ids are not dense");
    r.input = std::string(in.bytes());
    r.mode = read_enum<Mode>(in, 3, "mode");
    r.resources_id = in.u64();
    r.status = read_enum<RolloutStatus>(in, rollout_status_count, "rollout status");
    r.config.timeout_seconds = in.f64();
    r.config.unresponsive_seconds = in.f64();
    r.config.max_attempts = in.u32();
    r.config.retry_condition = in.u8();
    r.metadata = std::string(in.bytes());
    r.start_time = in.f64();
    r.end_time = in.f64();
    r.attempt_count = in.u32();
    ++stats_.rollouts[static_cast<int>(r.status)];
  }
  const std::uint64_t attempts = in.u64();
  for (std::uint64_t i = 0; i < attempts; ++i) {
    AttemptRecord& rec = attempts_.emplace_back();
    Attempt& a = rec.attempt;
    a.id = in.u64();
    a.rollout_id = in.u64();
    if (a.id != i + 1 || a.rollout_id == 0 || a.rollout_id > rollouts_.size())
      throw DecodeError("store tables: an attempt out of place");
    a.sequence_id = in.u32();
    a.worker_id = std::string(in.bytes());
    a.status = read_enum<AttemptStatus>(in, attempt_status_count, "attempt status");
    a.start_time = in.f64();
    a.end_time = in.f64();
    a.last_heartbeat_time = in.f64();
    rollouts_[a.rollout_id - 1].attempts.push_back(a.id);
    ++stats_.attempts[static_cast<int>(a.status)];
  }
  const std::uint64_t workers = in.u64();
  for (std::uint64_t i = 0; i < workers; ++i) {
    Worker w;
    w.id = std::string(in.bytes());
    read_enum<WorkerStatus>(in, 3, "worker status");
    w.status = WorkerStatus::unknown;  // a worker of the run that saved: not heard from since
    w.last_heartbeat_time = in.f64();
    w.heartbeats = in.u64();
    workers_[w.id] = w;
  }
  const std::uint64_t resources = in.u64();
  for (std::uint64_t i = 0; i < resources; ++i) {
    ResourcesVersion& v = resources_.emplace_back();
    v.id = resources_.size();
    v.name = std::string(in.bytes());
    v.version = in.u64();
    v.create_time = in.f64();
    v.content = std::string(in.bytes());
    resources_by_name_[v.name].push_back(v.id);
    ++stats_.resources;
  }
  if (in.remaining() != 0) throw DecodeError("store tables: trailing bytes");

  ByteReader log(span_log);
  while (log.remaining() > 0) {
    const RolloutId rollout_id = log.u64();
    const AttemptId attempt_id = log.u64();
    const std::uint64_t sequence_id = log.u64();
    const std::string_view record = log.bytes();
    if (attempt_id == 0 || attempt_id > attempts_.size() || attempts_[attempt_id - 1].attempt.rollout_id != rollout_id)
      throw DecodeError("span log: a span of an unknown attempt");
    AttemptRecord& rec = attempts_[attempt_id - 1];
    StoredSpan& stored = rec.spans.emplace_back();
    stored.sequence_id = sequence_id;
    stored.record = std::string(record);
    rec.last_sequence_id = std::max(rec.last_sequence_id, sequence_id);
    span_log_.emplace_back(attempt_id, static_cast<std::uint32_t>(rec.spans.size() - 1));
    ++stats_.spans;
    stats_.span_bytes += sizeof(StoredSpan) + stored.record.capacity();
  }

  // What had not ended goes back to the queue; its runner's attempt is over.
  const double now = clock_.now();
  std::vector<RolloutId> requeued;
  for (RolloutRecord& rec : rollouts_) {
    if (is_final(rec.rollout.status)) continue;
    if (!rec.attempts.empty()) {
      AttemptRecord& latest = attempts_[rec.attempts.back() - 1];
      if (!is_final(latest.attempt.status)) set_attempt_status(latest, AttemptStatus::unresponsive, now);
    }
    set_rollout_status(rec, RolloutStatus::requeuing, now);
    requeued.push_back(rec.rollout.id);
  }
  if (!requeued.empty()) log::debug("store restored: ", requeued.size(), " rollouts requeued");
  return requeued;
}

}  // namespace arclight::store
