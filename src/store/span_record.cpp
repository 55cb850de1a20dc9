#include "arclight/store/span_record.hpp"

namespace arclight::store {
namespace {
enum AttributeType : std::uint8_t { type_string = 0, type_number = 1, type_bool = 2, type_tokens = 3, type_floats = 4 };
// Set in the status byte when the span's extra JSON follows its attributes: a span without one (all of arclight's
// own) is encoded as before the field existed, and an older arclight refuses a body with one as a bad status.
constexpr std::uint8_t has_extra_json = 0x80;

std::uint8_t status_byte(ByteReader& in, bool& extra) {
  const std::uint8_t byte = in.u8();
  extra = (byte & has_extra_json) != 0;
  const std::uint8_t status = byte & ~has_extra_json;
  if (status > static_cast<std::uint8_t>(SpanStatus::error)) throw DecodeError("bad span status");
  return status;
}

std::string_view extra_json_of(ByteReader& in) {
  const std::string_view json = in.bytes();
  if (json.empty()) throw DecodeError("a span flags an extra JSON and holds none");
  return json;
}

template <class T>
void put_array(ByteWriter& out, const std::vector<T>& values) {
  out.u32(static_cast<std::uint32_t>(values.size()));
  if (!values.empty()) out.raw(values.data(), values.size() * sizeof(T));
}

template <class T>
std::vector<T> get_array(ByteReader& in) {
  std::uint32_t n = in.count(sizeof(T));
  std::vector<T> values(n);
  std::string_view bytes = in.raw(n * sizeof(T));
  if (n > 0) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}
}  // namespace

void encode_span_body(ByteWriter& out, const Span& span) {
  out.bytes(span.trace_id);
  out.bytes(span.span_id);
  out.bytes(span.parent_id);
  out.bytes(span.name);
  out.u8(static_cast<std::uint8_t>(static_cast<std::uint8_t>(span.status) |
                                   (span.extra_json.empty() ? 0 : has_extra_json)));
  out.f64(span.start_time);
  out.f64(span.end_time);
  out.u32(static_cast<std::uint32_t>(span.attributes.size()));
  for (const Attribute& a : span.attributes) {
    out.bytes(a.key);
    switch (a.value.index()) {
      case 0:
        out.u8(type_string);
        out.bytes(std::get<std::string>(a.value));
        break;
      case 1:
        out.u8(type_number);
        out.f64(std::get<double>(a.value));
        break;
      case 2:
        out.u8(type_bool);
        out.boolean(std::get<bool>(a.value));
        break;
      case 3:
        out.u8(type_tokens);
        put_array(out, std::get<TokenIds>(a.value));
        break;
      case 4:
        out.u8(type_floats);
        put_array(out, std::get<Floats>(a.value));
        break;
    }
  }
  if (!span.extra_json.empty()) out.bytes(span.extra_json);
}

std::string_view take_span_body(ByteReader& in) {
  const std::size_t start = in.position();
  for (int i = 0; i < 4; ++i) in.bytes();  // trace, span and parent ids, name
  bool extra = false;
  status_byte(in, extra);
  in.f64();
  in.f64();
  std::uint32_t n = in.count(6);
  for (std::uint32_t i = 0; i < n; ++i) {
    in.bytes();
    switch (in.u8()) {
      case type_string: in.bytes(); break;
      case type_number: in.f64(); break;
      case type_bool: in.boolean(); break;
      case type_tokens: in.raw(std::size_t(in.count(sizeof(std::int32_t))) * sizeof(std::int32_t)); break;
      case type_floats: in.raw(std::size_t(in.count(sizeof(float))) * sizeof(float)); break;
      default: throw DecodeError("bad attribute type");
    }
  }
  if (extra) extra_json_of(in);
  return in.consumed_since(start);
}

std::string_view span_id_of_body(std::string_view body) {
  ByteReader in(body);
  in.bytes();  // the trace id
  return in.bytes();
}

void decode_span_body(ByteReader& in, Span& span) {
  span.trace_id = in.bytes();
  span.span_id = in.bytes();
  span.parent_id = in.bytes();
  span.name = in.bytes();
  bool extra = false;
  span.status = static_cast<SpanStatus>(status_byte(in, extra));
  span.start_time = in.f64();
  span.end_time = in.f64();
  std::uint32_t n = in.count(6);  // a key's length (4) + type (1) + at least 1 value byte
  span.attributes.clear();
  span.attributes.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    Attribute a;
    a.key = in.bytes();
    switch (in.u8()) {
      case type_string: a.value = std::string(in.bytes()); break;
      case type_number: a.value = in.f64(); break;
      case type_bool: a.value = in.boolean(); break;
      case type_tokens: a.value = get_array<std::int32_t>(in); break;
      case type_floats: a.value = get_array<float>(in); break;
      default: throw DecodeError("bad attribute type");
    }
    span.attributes.push_back(std::move(a));
  }
  span.extra_json = extra ? extra_json_of(in) : std::string_view();
}

Span decode_span_record(RolloutId rollout_id, AttemptId attempt_id, std::uint64_t sequence_id, std::string_view body) {
  Span span;
  span.rollout_id = rollout_id;
  span.attempt_id = attempt_id;
  span.sequence_id = sequence_id;
  ByteReader in(body);
  decode_span_body(in, span);
  return span;
}

}  // namespace arclight::store
