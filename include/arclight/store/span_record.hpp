#pragma once
#include <string>
#include <string_view>

#include "arclight/core/bytes.hpp"
#include "arclight/store/types.hpp"

namespace arclight::store {

// A span's own fields (all but rollout, attempt and sequence ids) in the compact
// binary form that the store keeps and the wire protocol carries.
void encode_span_body(ByteWriter& out, const Span& span);
// Reads what encode_span_body wrote into `span`; throws DecodeError on malformed input.
void decode_span_body(ByteReader& in, Span& span);
// Checks one encoded span body without copying it and returns its bytes; throws
// DecodeError on malformed input. Lets the store keep a span as it came off the wire.
std::string_view take_span_body(ByteReader& in);
// The span id of an encoded span body ("" when it has none); throws DecodeError on malformed input.
std::string_view span_id_of_body(std::string_view body);
// A span from its ids and its encoded body.
Span decode_span_record(RolloutId rollout_id, AttemptId attempt_id, std::uint64_t sequence_id, std::string_view body);

// A span already in record form, as the wire carries it.
struct SpanRecordView {
  RolloutId rollout_id = 0;
  AttemptId attempt_id = 0;
  std::uint64_t sequence_id = 0;  // 0: the store issues one
  std::string_view body;          // encode_span_body's bytes
};

}  // namespace arclight::store
