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

}  // namespace arclight::store
