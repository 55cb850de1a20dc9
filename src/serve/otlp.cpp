#include "otlp.hpp"

#include <zlib.h>

#include <cmath>
#include <limits>
#include <optional>

#include "arclight/core/log.hpp"
#include "arclight/core/utf8.hpp"
#include "otlp_trace.pb.h"

namespace arclight::serve {
namespace {

constexpr std::size_t header_shown = 100;  // bytes of a header value an error message quotes
constexpr const char* rollout_key = "agentlightning.rollout_id";
constexpr const char* attempt_key = "agentlightning.attempt_id";
constexpr const char* sequence_key = "agentlightning.span_sequence_id";

std::string_view trimmed(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

const std::string& text(const std::string& bytes, const char* what) {
  if (!valid_utf8(bytes))
    throw OtlpError(std::string("Unable to parse OTLP traces payload: ") + what + " is not UTF-8");
  return bytes;
}

std::string hex(const std::string& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const unsigned char b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

// An id's hex, zeros in front up to `width` digits (an empty id is all zeros; a longer one is kept whole).
std::string id_hex(const std::string& bytes, std::size_t width) {
  std::string out = hex(bytes);
  if (out.size() < width) out.insert(0, width - out.size(), '0');
  return out;
}

// A double c in [1e3, 2^53) as m / 2^shift, m an integer of 53 bits.
std::pair<std::uint64_t, int> mantissa_of(double c) {
  int exponent;
  const double fraction = std::frexp(c, &exponent);
  return {static_cast<std::uint64_t>(std::ldexp(fraction, 53)), 53 - exponent};
}

// |c * 1e9 - ns| * 2^shift, exactly (shift is 18..43 for the times here, so ns << shift fits).
unsigned __int128 distance_to(double c, std::uint64_t ns) {
  const auto [m, shift] = mantissa_of(c);
  const unsigned __int128 a = static_cast<unsigned __int128>(m) * 1000000000u;
  const unsigned __int128 b = static_cast<unsigned __int128>(ns) << shift;
  return a > b ? a - b : b - a;
}

// ns / 1e9 rounded once, to even on a tie, as Python divides ints: the double nearest the exact quotient (the long
// double quotient, rounded again to double, can be one off).
double seconds_of(std::uint64_t ns) {
  const double near = static_cast<double>(static_cast<long double>(ns) / 1e9L);
  double best = near;
  for (const double c : {std::nextafter(near, 0.0), std::nextafter(near, 1e300)}) {
    const unsigned __int128 d = distance_to(c, ns), d_best = distance_to(best, ns);
    if (d < d_best || (d == d_best && mantissa_of(c).first % 2 == 0)) best = c;
  }
  return best;
}

// Agent Lightning's convert_timestamp: none for 0, seconds for nanoseconds (anything past 1e12), else as it is.
Json time_json(std::uint64_t value) {
  if (value == 0) return nullptr;
  return value > 1000000000000ull ? seconds_of(value) : static_cast<double>(value);
}

Json any_value(const otlp::AnyValue& value);

// Repeated KeyValue as a dict: a key that comes again keeps its place and takes the later value (as a Python dict).
Json attributes_json(const google::protobuf::RepeatedPtrField<otlp::KeyValue>& pairs) {
  Json out = Json::object();
  for (const otlp::KeyValue& pair : pairs) out[text(pair.key(), "an attribute key")] = any_value(pair.value());
  return out;
}

Json any_value(const otlp::AnyValue& value) {
  switch (value.value_case()) {
    case otlp::AnyValue::kStringValue: return text(value.string_value(), "a string value");
    case otlp::AnyValue::kBoolValue: return value.bool_value();
    case otlp::AnyValue::kIntValue: return value.int_value();
    case otlp::AnyValue::kDoubleValue: return value.double_value();
    case otlp::AnyValue::kBytesValue: return hex(value.bytes_value());
    case otlp::AnyValue::kKvlistValue: return attributes_json(value.kvlist_value().values());
    case otlp::AnyValue::kArrayValue: {
      Json out = Json::array();
      for (const otlp::AnyValue& v : value.array_value().values()) out.push_back(any_value(v));
      return out;
    }
    default: return nullptr;
  }
}

Json context_json(const std::string& trace_id, const std::string& span_id) {
  return {{"trace_id", id_hex(trace_id, 32)},
          {"span_id", id_hex(span_id, 16)},
          {"is_remote", false},
          {"trace_state", Json::object()}};
}

const char* status_code_name(int code) {
  switch (code) {
    case otlp::Status::STATUS_CODE_OK: return "OK";
    case otlp::Status::STATUS_CODE_ERROR: return "ERROR";
    default: return "UNSET";
  }
}

const Json* find(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// Python's str() of an attribute value: how Agent Lightning turns an id attribute into the id.
std::string python_str(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  return value.dump();
}

// Python's int() of a decimal string: blanks around, a sign, digits with single underscores between them.
std::optional<std::int64_t> parse_decimal(std::string_view text) {
  text = trimmed(text);
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.front() == '_' || text.back() == '_') return std::nullopt;
  std::uint64_t magnitude = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_') {
      if (text[i - 1] == '_') return std::nullopt;
      continue;
    }
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    if (magnitude > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) return std::nullopt;
    magnitude = magnitude * 10 + static_cast<std::uint64_t>(text[i] - '0');
  }
  if (magnitude > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
  return negative ? -static_cast<std::int64_t>(magnitude) : static_cast<std::int64_t>(magnitude);
}

// The span's sequence id as given; none where it is absent, not an integer, or negative (the store issues one).
std::optional<std::int64_t> given_sequence_id(const Json* value) {
  std::optional<std::int64_t> id;
  if (value && value->is_number_integer()) id = value->get<std::int64_t>();
  if (value && value->is_string()) id = parse_decimal(value->get<std::string>());
  if (id && *id < 0) return std::nullopt;
  return id;
}

// The rest of what must decode as text (protobuf's string fields), though no span keeps it.
void check_unkept_text(const otlp::ScopeSpans& scope) {
  text(scope.scope().name(), "a scope name");
  text(scope.scope().version(), "a scope version");
  text(scope.schema_url(), "a schema_url");
  attributes_json(scope.scope().attributes());
  for (const otlp::Span& span : scope.spans()) {
    text(span.trace_state(), "a trace_state");
    for (const otlp::Span::Link& link : span.links()) text(link.trace_state(), "a trace_state");
  }
}

Json events_json(const otlp::Span& span) {
  Json out = Json::array();
  for (const otlp::Span::Event& e : span.events())
    out.push_back({{"name", text(e.name(), "an event name")},
                   {"attributes", attributes_json(e.attributes())},
                   {"timestamp", time_json(e.time_unix_nano())}});
  return out;
}

Json links_json(const otlp::Span& span) {
  Json out = Json::array();
  for (const otlp::Span::Link& link : span.links()) {
    Json attributes = attributes_json(link.attributes());
    out.push_back({{"context", context_json(link.trace_id(), link.span_id())},
                   {"attributes", attributes.empty() ? Json() : std::move(attributes)}});
  }
  return out;
}

// One span, or none when neither it nor its resource names the rollout and the attempt.
std::optional<Json> span_json(const otlp::Span& span, const Json& resource) {
  Json attributes = attributes_json(span.attributes());
  const Json& resource_attributes = resource.at("attributes");
  auto id_attribute = [&](const char* key) {
    const Json* value = find(attributes, key);
    return value ? value : find(resource_attributes, key);
  };
  const Json* rollout = id_attribute(rollout_key);
  const Json* attempt = id_attribute(attempt_key);
  if (!rollout || !attempt) return std::nullopt;  // before the rest is built: dropped spans cost nothing more
  const std::optional<std::int64_t> sequence_id = given_sequence_id(id_attribute(sequence_key));
  const std::string& message = text(span.status().message(), "a status message");
  Json out = Json::object();
  out["rollout_id"] = python_str(*rollout);
  out["attempt_id"] = python_str(*attempt);
  if (sequence_id) out["sequence_id"] = *sequence_id;
  out["trace_id"] = id_hex(span.trace_id(), 32);
  out["span_id"] = id_hex(span.span_id(), 16);
  out["parent_id"] = span.parent_span_id().empty() ? Json() : Json(id_hex(span.parent_span_id(), 16));
  out["name"] = text(span.name(), "a span name");
  out["status"] = {{"status_code", status_code_name(span.status().code())},
                   {"description", message.empty() ? Json() : Json(message)}};
  out["attributes"] = std::move(attributes);
  out["events"] = events_json(span);
  out["links"] = links_json(span);
  out["start_time"] = time_json(span.start_time_unix_nano());
  out["end_time"] = time_json(span.end_time_unix_nano());
  out["context"] = context_json(span.trace_id(), span.span_id());
  out["parent"] = nullptr;
  out["resource"] = resource;
  return out;
}

// Protobuf's wire format, read only as far as counting needs (bounds checked; false for bytes that are not fields).
class WireFields {
 public:
  explicit WireFields(std::string_view bytes) : rest_(bytes) {}
  // The next field: its number, and its bytes where it is length-delimited (empty otherwise).
  bool next(std::uint64_t& number, bool& delimited, std::string_view& payload) {
    std::uint64_t key = 0;
    if (!varint(key)) return false;
    number = key >> 3;
    delimited = (key & 7) == 2;
    payload = {};
    std::uint64_t length = 0;
    switch (key & 7) {
      case 0: return varint(length);
      case 1: return skip(8);
      case 5: return skip(4);
      case 2:
        if (!varint(length) || length > rest_.size()) return false;
        payload = rest_.substr(0, length);
        return skip(length);
      default: return false;  // groups: not in OTLP's messages
    }
  }
  bool done() const { return rest_.empty(); }

 private:
  bool varint(std::uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64 && !rest_.empty(); shift += 7) {
      const auto byte = static_cast<unsigned char>(rest_.front());
      rest_.remove_prefix(1);
      value |= std::uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return true;
    }
    return false;
  }
  bool skip(std::uint64_t n) {
    if (n > rest_.size()) return false;
    rest_.remove_prefix(n);
    return true;
  }
  std::string_view rest_;
};

// The messages of OTLP's trace export that hold repeated messages, and their message fields: what an export's size on
// the wire says nothing of (an empty element is 2 bytes there and hundreds in memory once parsed and made JSON).
enum class Wire {
  request,
  resource_spans,
  resource,
  scope_spans,
  scope,
  span,
  event,
  link,
  key_value,
  any_value,
  array_value,
  key_value_list,
  other
};
Wire wire_child(Wire parent, std::uint64_t field) {
  switch (parent) {
    case Wire::request: return field == 1 ? Wire::resource_spans : Wire::other;
    case Wire::resource_spans: return field == 1 ? Wire::resource : field == 2 ? Wire::scope_spans : Wire::other;
    case Wire::resource: return field == 1 ? Wire::key_value : Wire::other;
    case Wire::scope_spans: return field == 1 ? Wire::scope : field == 2 ? Wire::span : Wire::other;
    case Wire::scope: return field == 3 ? Wire::key_value : Wire::other;
    case Wire::span:
      return field == 9 ? Wire::key_value : field == 11 ? Wire::event : field == 13 ? Wire::link : Wire::other;
    case Wire::event: return field == 3 ? Wire::key_value : Wire::other;
    case Wire::link: return field == 4 ? Wire::key_value : Wire::other;
    case Wire::key_value: return field == 2 ? Wire::any_value : Wire::other;
    case Wire::any_value: return field == 5 ? Wire::array_value : field == 6 ? Wire::key_value_list : Wire::other;
    case Wire::array_value: return field == 1 ? Wire::any_value : Wire::other;
    case Wire::key_value_list: return field == 1 ? Wire::key_value : Wire::other;
    case Wire::other: return Wire::other;
  }
  return Wire::other;
}

// What an export holds, counted on the wire before it is parsed.
struct WireCount {
  std::size_t spans = 0;
  std::size_t elements = 0;  // every message inside the request: spans, attributes, values, events, links, ...
};

// Counts the messages of `bytes`, a message of kind `kind`, into `count`, stopping once either count passes its most;
// false for bytes that are not a stream of fields down to the last message (a group, which protobuf's parser would
// skip and no OTLP exporter sends, among them: counting would stop there and the parse go on), or nested deeper than
// protobuf's parser goes.
bool count_on_the_wire(std::string_view bytes, Wire kind, const OtlpOptions& options, WireCount& count, int depth = 0) {
  constexpr int deepest = 100;  // protobuf's default recursion limit
  if (depth > deepest) return false;
  WireFields fields(bytes);
  std::uint64_t number = 0;
  bool delimited = false;
  std::string_view payload;
  while (!fields.done() && count.spans <= options.max_spans && count.elements <= options.max_elements) {
    if (!fields.next(number, delimited, payload)) return false;
    const Wire child = delimited ? wire_child(kind, number) : Wire::other;
    if (child == Wire::other) continue;
    ++count.elements;
    if (child == Wire::span) ++count.spans;
    if (!count_on_the_wire(payload, child, options, count, depth + 1)) return false;
  }
  return true;
}

std::vector<Json> spans_of(const otlp::ExportTraceServiceRequest& request, const OtlpOptions& options) {
  std::vector<Json> out;
  std::size_t repeated_resource_bytes = 0;
  std::size_t dropped = 0;
  for (const otlp::ResourceSpans& group : request.resource_spans()) {
    const Json resource = {{"attributes", attributes_json(group.resource().attributes())},
                           {"schema_url", text(group.schema_url(), "a schema_url")}};
    const std::size_t resource_bytes = group.resource().ByteSizeLong() + group.schema_url().size();  // both copied
    for (const otlp::ScopeSpans& scope : group.scope_spans()) {
      check_unkept_text(scope);
      // Each span carries a copy of its resource: bounded, so that a large resource over many tiny spans cannot
      // multiply into gigabytes.
      repeated_resource_bytes += resource_bytes * static_cast<std::size_t>(scope.spans_size());
      if (repeated_resource_bytes > options.max_inflated_bytes)
        throw OtlpError(
            log::concat("the spans' resources, repeated in each span, pass ", options.max_inflated_bytes, " bytes"));
      for (const otlp::Span& span : scope.spans()) {
        std::optional<Json> json = span_json(span, resource);
        dropped += !json;
        if (json) out.push_back(std::move(*json));
      }
    }
  }
  if (dropped)
    log::warn("otlp: ", dropped, " spans without ", rollout_key, " and ", attempt_key,
              " in their attributes or their resource's were dropped");
  return out;
}

}  // namespace

std::string gzip_inflate(std::string_view bytes, std::size_t max_bytes) {
  if (bytes.empty()) return "";  // as Python's gzip.decompress
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("zlib: inflateInit2 failed");
  struct End {
    z_stream& z;
    ~End() { inflateEnd(&z); }
  } end{z};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  std::string out;
  char buffer[64 << 10];
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    const int status = inflate(&z, Z_NO_FLUSH);
    const std::size_t got = sizeof buffer - z.avail_out;
    if (out.size() + got > max_bytes)
      throw OtlpError(log::concat("the gzip body inflates past ", max_bytes, " bytes"), 413);
    out.append(buffer, got);
    if (status == Z_STREAM_END) {
      if (z.avail_in == 0) return out;
      inflateReset(&z);  // another member follows (or bytes that are not one: the next inflate says so)
      continue;
    }
    if ((status != Z_OK && status != Z_BUF_ERROR) || (got == 0 && z.avail_in == 0))
      throw OtlpError("the body is not gzip, or is cut short (Content-Encoding: gzip)");
  }
}

std::string gzip_compress(std::string_view bytes) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
  std::string out(deflateBound(&z, static_cast<uLong>(bytes.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (status != Z_STREAM_END) throw std::runtime_error("zlib: deflate did not finish");
  return out;
}

bool accepts_gzip(std::string_view accept_encoding) {
  while (!accept_encoding.empty()) {
    const std::size_t comma = accept_encoding.find(',');
    const std::string_view token = accept_encoding.substr(0, comma);
    if (lower(trimmed(token.substr(0, token.find(';')))) == "gzip") return true;
    if (comma == std::string_view::npos) break;
    accept_encoding.remove_prefix(comma + 1);
  }
  return false;
}

std::vector<Json> decode_otlp_traces(std::string_view body, std::string_view content_type,
                                     std::string_view content_encoding, const OtlpOptions& options) {
  const std::string_view media_type = trimmed(content_type.substr(0, content_type.find(';')));
  if (lower(media_type) != otlp_content_type)
    throw OtlpError("Unsupported Content-Type '" + printable(media_type, header_shown) +
                    "', expected 'application/x-protobuf'");
  const std::string encoding = lower(trimmed(content_encoding));
  std::string inflated;
  if (encoding == "gzip") {
    inflated = gzip_inflate(body, options.max_inflated_bytes);
    body = inflated;
  } else if (!encoding.empty() && encoding != "identity") {
    throw OtlpError("Unsupported Content-Encoding '" + printable(content_encoding, header_shown) +
                    "', expected gzip or none");
  }
  if (body.empty()) return {};
  WireCount count;
  if (!count_on_the_wire(body, Wire::request, options, count))
    throw OtlpError("Unable to parse OTLP traces payload: not an ExportTraceServiceRequest");
  if (count.spans > options.max_spans)
    throw OtlpError(log::concat("an export of more than ", options.max_spans, " spans: send them in batches"));
  if (count.elements > options.max_elements)
    throw OtlpError(log::concat("an export of more than ", options.max_elements,
                                " messages (spans, attributes, values, events, links): send smaller batches"));
  otlp::ExportTraceServiceRequest request;
  if (body.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !request.ParseFromArray(body.data(), static_cast<int>(body.size())))
    throw OtlpError("Unable to parse OTLP traces payload: not an ExportTraceServiceRequest");
  return spans_of(request, options);
}

std::string otlp_export_response() { return otlp::ExportTraceServiceResponse().SerializeAsString(); }

std::string otlp_error_status(const std::string& message) {
  otlp::RpcStatus status;
  status.set_message(valid_utf8(message) ? message : printable(message));
  return status.SerializeAsString();
}

}  // namespace arclight::serve
