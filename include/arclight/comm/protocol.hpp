#pragma once
// The control plane's wire protocol: compact, versioned, little-endian binary.
// No MPI here: the codec and the request handler are plain functions, so the
// fuzzer and the tests drive them directly.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arclight/core/bytes.hpp"
#include "arclight/store/memory_store.hpp"
#include "arclight/store/record_codec.hpp"

namespace arclight::comm::wire {

// Frame: magic u16 "AL", version u8, type u8 (top bit: reply), request id u32, body length u32, body.
inline constexpr std::uint16_t magic = 0x4C41;
inline constexpr std::uint8_t version = 1;
inline constexpr std::size_t header_size = 12;
inline constexpr std::size_t max_body = 1u << 30;

enum class Type : std::uint8_t {
  error = 0,
  enqueue,
  dequeue,
  start_rollout,
  start_attempt,
  add_spans,
  add_span,
  update_attempt,
  update_rollout,
  query_rollouts,
  query_attempts,
  get_latest_attempt,
  query_spans,
  add_resources,
  update_resources,
  get_resources,
  get_latest_resources,
  wait_for_rollouts,
  heartbeat,
  query_workers,
  statistics,
  reset,  // tests only: the server replaces its store with a fresh one, when it was built to allow it
  bye,    // a client is done; no reply
  update_attempts,
  pending,  // a reply only: the server holds the request (rank 0 restoring its store); the client waits anew
  next_sequence_id,
  end_attempts,
  get_many_resources,
  list_resources,
  end_
};

struct Header {
  Type type = Type::error;
  bool reply = false;
  std::uint32_t request_id = 0;
  std::uint32_t body_length = 0;
};

// Checks a frame's length, magic, version and type; throws DecodeError on any mismatch.
Header decode_header(std::string_view message);
std::string_view body_of(std::string_view message);

// Error replies carry a code and a message. Code 0: the request was malformed.
inline constexpr std::uint8_t malformed = 0;
inline constexpr std::uint8_t internal = 255;
std::string encode_error(std::uint32_t request_id, std::uint8_t code, std::string_view message);

// ---- values ----------------------------------------------------------------------------
void put(ByteWriter& w, std::uint64_t v);
void put(ByteWriter& w, std::uint32_t v);
void put(ByteWriter& w, double v);
void put(ByteWriter& w, const std::string& v);
void put(ByteWriter& w, const store::RolloutConfig& v);
void put(ByteWriter& w, const store::NewRollout& v);
void put(ByteWriter& w, const store::Rollout& v);
void put(ByteWriter& w, const store::Attempt& v);
void put(ByteWriter& w, const store::AttemptedRollout& v);
void put(ByteWriter& w, const store::Span& v);
void put(ByteWriter& w, const store::AttemptUpdate& v);
void put(ByteWriter& w, const store::AttemptReport& v);
void put(ByteWriter& w, const store::ReportOutcome& v);
void put(ByteWriter& w, const store::AttemptsEnded& v);
void put(ByteWriter& w, const store::RolloutUpdate& v);
void put(ByteWriter& w, const store::RolloutFilter& v);
void put(ByteWriter& w, const store::SpanFilter& v);
void put(ByteWriter& w, const store::AttemptFilter& v);
void put(ByteWriter& w, const store::Paging& v);
void put(ByteWriter& w, const store::ResourcesVersion& v);
void put(ByteWriter& w, const store::Worker& v);
void put(ByteWriter& w, const store::Statistics& v);

void get(ByteReader& r, std::uint64_t& v);
void get(ByteReader& r, std::uint32_t& v);
void get(ByteReader& r, double& v);
void get(ByteReader& r, std::string& v);
void get(ByteReader& r, store::RolloutConfig& v);
void get(ByteReader& r, store::NewRollout& v);
void get(ByteReader& r, store::Rollout& v);
void get(ByteReader& r, store::Attempt& v);
void get(ByteReader& r, store::AttemptedRollout& v);
void get(ByteReader& r, store::Span& v);
void get(ByteReader& r, store::AttemptUpdate& v);
void get(ByteReader& r, store::AttemptReport& v);
void get(ByteReader& r, store::ReportOutcome& v);
void get(ByteReader& r, store::AttemptsEnded& v);
void get(ByteReader& r, store::RolloutUpdate& v);
void get(ByteReader& r, store::RolloutFilter& v);
void get(ByteReader& r, store::SpanFilter& v);
void get(ByteReader& r, store::AttemptFilter& v);
void get(ByteReader& r, store::Paging& v);
void get(ByteReader& r, store::ResourcesVersion& v);
void get(ByteReader& r, store::Worker& v);
void get(ByteReader& r, store::Statistics& v);

// The fewest bytes one encoded T takes, so that a count of them the body cannot hold is refused
// before anything is allocated: the store's records' least sizes, one byte for the rest.
template <class T>
inline constexpr std::size_t min_encoded_bytes = 1;
template <>
inline constexpr std::size_t min_encoded_bytes<std::uint64_t> = sizeof(std::uint64_t);
template <>
inline constexpr std::size_t min_encoded_bytes<store::Rollout> = store::min_rollout_bytes;
template <>
inline constexpr std::size_t min_encoded_bytes<store::Attempt> = store::min_attempt_bytes;
template <>
inline constexpr std::size_t min_encoded_bytes<store::AttemptedRollout> =
    store::min_rollout_bytes + store::min_attempt_bytes;
// What a checkpoint keeps of a worker, then the rollout and the attempt it works on, and its three times.
template <>
inline constexpr std::size_t min_encoded_bytes<store::Worker> = store::min_worker_liveness_bytes +
                                                                2 * sizeof(std::uint64_t) + 3 * sizeof(double);

template <class T>
void put(ByteWriter& w, const std::vector<T>& values) {
  w.u32(static_cast<std::uint32_t>(values.size()));
  for (const T& v : values) put(w, v);
}
template <class T>
void get(ByteReader& r, std::vector<T>& values) {
  std::uint32_t n = r.count(min_encoded_bytes<T>);
  values.clear();
  values.reserve(std::min<std::uint32_t>(n, 1024));  // a corrupt count must not reserve gigabytes
  for (std::uint32_t i = 0; i < n; ++i) get(r, values.emplace_back());
}
template <class T>
void put(ByteWriter& w, const store::Page<T>& page) {
  w.u64(page.total);
  put(w, page.items);
}
template <class T>
void get(ByteReader& r, store::Page<T>& page) {
  page.total = r.u64();
  get(r, page.items);
}

// A whole message: header, then each value in order, written over `out` (reusing its capacity).
template <class... Values>
void encode_into(std::string& out, Type type, bool reply, std::uint32_t request_id, const Values&... values) {
  out.clear();
  ByteWriter w(out);
  w.u16(magic);
  w.u8(version);
  w.u8(static_cast<std::uint8_t>(type) | (reply ? 0x80 : 0));
  w.u32(request_id);
  w.u32(0);
  (put(w, values), ...);
  // The length field (and MPI's int count) would wrap: a message this large is refused, the client told why.
  if (out.size() - header_size > max_body)
    throw store::StoreError(store::StoreError::invalid_argument,
                            "a store message of " + std::to_string(out.size() - header_size) +
                                " bytes passes the control plane's 1 GiB: ask for less at once (a limit)");
  w.patch_u32(8, static_cast<std::uint32_t>(out.size() - header_size));
}

template <class... Values>
std::string encode(Type type, bool reply, std::uint32_t request_id, const Values&... values) {
  std::string out;
  encode_into(out, type, reply, request_id, values...);
  return out;
}

// Serves one request against the store and returns the reply (an error reply for
// anything malformed or refused; never throws). Returns nullopt for a message
// that takes no reply (bye). wait_for_rollouts is answered with what has ended
// now; servers that wait park the request instead (see StoreServer).
std::optional<std::string> handle_request(store::MemoryStore& store, std::string_view request);

}  // namespace arclight::comm::wire
