#include "arclight/store/record_codec.hpp"

#include <string>

namespace arclight::store {
namespace {

// One byte that must name one of the enum's `count` values: a corrupt byte is refused here, not
// carried into the store as a status no switch knows.
template <class Enum>
Enum decode_enum(ByteReader& in, int count, const char* what) {
  const std::uint8_t v = in.u8();
  if (v < count) return static_cast<Enum>(v);
  throw DecodeError(std::string("bad ") + what + " " + std::to_string(v) + " (0 to " + std::to_string(count - 1) + ")");
}

}  // namespace

Mode decode_mode(ByteReader& in) { return decode_enum<Mode>(in, mode_count, "mode"); }
RolloutStatus decode_rollout_status(ByteReader& in) {
  return decode_enum<RolloutStatus>(in, rollout_status_count, "rollout status");
}
AttemptStatus decode_attempt_status(ByteReader& in) {
  return decode_enum<AttemptStatus>(in, attempt_status_count, "attempt status");
}
WorkerStatus decode_worker_status(ByteReader& in) {
  return decode_enum<WorkerStatus>(in, worker_status_count, "worker status");
}

void encode_rollout_config(ByteWriter& out, const RolloutConfig& config) {
  out.f64(config.timeout_seconds);
  out.f64(config.unresponsive_seconds);
  out.u32(config.max_attempts);
  out.u8(config.retry_condition);
}

RolloutConfig decode_rollout_config(ByteReader& in) {
  RolloutConfig config;
  config.timeout_seconds = in.f64();
  config.unresponsive_seconds = in.f64();
  config.max_attempts = in.u32();
  config.retry_condition = in.u8();
  return config;
}

void encode_rollout(ByteWriter& out, const Rollout& rollout) {
  out.u64(rollout.id);
  out.bytes(rollout.input);
  encode_enum(out, rollout.mode);
  out.u64(rollout.resources_id);
  encode_enum(out, rollout.status);
  encode_rollout_config(out, rollout.config);
  out.bytes(rollout.metadata);
  out.f64(rollout.start_time);
  out.f64(rollout.end_time);
  out.u32(rollout.attempt_count);
}

Rollout decode_rollout(ByteReader& in) {
  Rollout rollout;
  rollout.id = in.u64();
  rollout.input = in.bytes();
  rollout.mode = decode_mode(in);
  rollout.resources_id = in.u64();
  rollout.status = decode_rollout_status(in);
  rollout.config = decode_rollout_config(in);
  rollout.metadata = in.bytes();
  rollout.start_time = in.f64();
  rollout.end_time = in.f64();
  rollout.attempt_count = in.u32();
  return rollout;
}

void encode_attempt(ByteWriter& out, const Attempt& attempt) {
  out.u64(attempt.id);
  out.u64(attempt.rollout_id);
  out.u32(attempt.sequence_id);
  out.bytes(attempt.worker_id);
  encode_enum(out, attempt.status);
  out.f64(attempt.start_time);
  out.f64(attempt.end_time);
  out.f64(attempt.last_heartbeat_time);
}

Attempt decode_attempt(ByteReader& in) {
  Attempt attempt;
  attempt.id = in.u64();
  attempt.rollout_id = in.u64();
  attempt.sequence_id = in.u32();
  attempt.worker_id = in.bytes();
  attempt.status = decode_attempt_status(in);
  attempt.start_time = in.f64();
  attempt.end_time = in.f64();
  attempt.last_heartbeat_time = in.f64();
  return attempt;
}

void encode_resources(ByteWriter& out, const ResourcesVersion& resources) {
  out.u64(resources.id);
  out.bytes(resources.name);
  out.u64(resources.version);
  out.f64(resources.create_time);
  out.bytes(resources.content);
}

ResourcesVersion decode_resources(ByteReader& in) {
  ResourcesVersion resources;
  resources.id = in.u64();
  resources.name = in.bytes();
  resources.version = in.u64();
  resources.create_time = in.f64();
  resources.content = in.bytes();
  return resources;
}

void encode_worker_liveness(ByteWriter& out, const Worker& worker) {
  out.bytes(worker.id);
  encode_enum(out, worker.status);
  out.f64(worker.last_heartbeat_time);
  out.u64(worker.heartbeats);
}

Worker decode_worker_liveness(ByteReader& in) {
  Worker worker;
  worker.id = in.bytes();
  worker.status = decode_worker_status(in);
  worker.last_heartbeat_time = in.f64();
  worker.heartbeats = in.u64();
  return worker;
}

}  // namespace arclight::store
