#pragma once
#include <cstddef>
#include <cstdint>

#include "arclight/core/bytes.hpp"
#include "arclight/store/types.hpp"

// The store's records in the compact binary form that both the checkpoint's snapshot and the wire
// protocol carry: one encoding, so that the two cannot drift apart. A checkpoint holds these bytes,
// so a change here is a change of the snapshot's format. Decoders throw DecodeError on truncated
// input and on an enum value out of range.
namespace arclight::store {

// An empty byte string: its length prefix alone.
inline constexpr std::size_t empty_bytes_size = sizeof(std::uint32_t);

// The least encoded size of each record (its strings empty): the sizes of its fields in the order
// the encoder writes them. A decoder refuses a count of records its input cannot hold with these.
// Enums take one byte each (their underlying type).
inline constexpr std::size_t min_rollout_config_bytes =  // timeout, unresponsive seconds, max attempts, retry bits
    sizeof(double) + sizeof(double) + sizeof(std::uint32_t) + sizeof(std::uint8_t);
inline constexpr std::size_t min_rollout_bytes =  // id, input, mode, resources, status, config, metadata, times, count
    sizeof(RolloutId) + empty_bytes_size + sizeof(Mode) + sizeof(ResourcesId) + sizeof(RolloutStatus) +
    min_rollout_config_bytes + empty_bytes_size + sizeof(double) + sizeof(double) + sizeof(std::uint32_t);
inline constexpr std::size_t min_attempt_bytes =  // id, rollout, sequence id, worker, status, start, end, heartbeat
    sizeof(AttemptId) + sizeof(RolloutId) + sizeof(std::uint32_t) + empty_bytes_size + sizeof(AttemptStatus) +
    sizeof(double) + sizeof(double) + sizeof(double);
inline constexpr std::size_t min_resources_bytes =  // id, name, version, create time, content
    sizeof(ResourcesId) + empty_bytes_size + sizeof(std::uint64_t) + sizeof(double) + empty_bytes_size;
inline constexpr std::size_t min_worker_liveness_bytes =  // id, status, last heartbeat time, heartbeats
    empty_bytes_size + sizeof(WorkerStatus) + sizeof(double) + sizeof(std::uint64_t);

// An enum takes one byte; its decoder refuses a byte that names none of its values.
template <class Enum>
void encode_enum(ByteWriter& out, Enum value) {
  out.u8(static_cast<std::uint8_t>(value));
}
Mode decode_mode(ByteReader& in);
RolloutStatus decode_rollout_status(ByteReader& in);
AttemptStatus decode_attempt_status(ByteReader& in);
WorkerStatus decode_worker_status(ByteReader& in);

void encode_rollout_config(ByteWriter& out, const RolloutConfig& config);
RolloutConfig decode_rollout_config(ByteReader& in);

void encode_rollout(ByteWriter& out, const Rollout& rollout);
Rollout decode_rollout(ByteReader& in);

void encode_attempt(ByteWriter& out, const Attempt& attempt);
Attempt decode_attempt(ByteReader& in);

void encode_resources(ByteWriter& out, const ResourcesVersion& resources);
ResourcesVersion decode_resources(ByteReader& in);

// A worker's id, status and heartbeats: what a checkpoint keeps of it. Not what it works on: a
// restored store requeues every open rollout. The wire protocol adds that after these bytes.
void encode_worker_liveness(ByteWriter& out, const Worker& worker);
// A worker with what encode_worker_liveness wrote, working on nothing.
Worker decode_worker_liveness(ByteReader& in);

}  // namespace arclight::store
