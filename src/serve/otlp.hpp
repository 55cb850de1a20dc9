#pragma once
// OTLP/HTTP trace ingest as Agent Lightning v0.3's store does it (`utils/otlp.py`: handle_otlp_export,
// spans_from_proto; ../shared/agl-v0.3-interfaces.md 1.5): POST /v1/traces takes a protobuf ExportTraceServiceRequest,
// gzip or not, and its spans become AGL span JSON objects for the store. Private to serve: the store API's routes
// wire it; nothing outside the module sees protobuf or JSON.
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "arclight/serve/http_server.hpp"
#include "store_json.hpp"

namespace arclight::serve {

inline constexpr std::string_view otlp_content_type = "application/x-protobuf";

struct OtlpOptions {
  // The route's path, a regular expression as HttpServer's routes are (a prefix before it, if the store API has one).
  std::string path = "/v1/traces";
  // The paths whose errors are answered in OTLP's shape: the route's, with any first segment in place of the secret
  // (a pattern holding the secret, matched against requests not yet authenticated, would time it).
  std::string error_path = "(?:/[^/]+)?/v1/traces";
  // The most a body may inflate to in the decoder, and the most the spans' copies of their resource may add up to:
  // past either, 400, so a zip bomb or a large resource repeated over many tiny spans costs nothing. (Through
  // HttpServer, a body sent with Content-Encoding exactly "gzip" is inflated by the server itself, within its
  // max_body_bytes: past that, 413.)
  std::size_t max_inflated_bytes = 16 << 20;
  // The most spans one export may hold, counted on the wire before it is parsed: an empty span is 2 bytes there and a
  // few hundred in memory, so 8 MiB of them parsed to a gigabyte. OpenTelemetry's exporters send 512 at a time.
  std::size_t max_spans = 65536;
  // The most messages of any kind one export may hold (spans, attributes and their values, events, links, the values
  // of arrays and lists), counted likewise: an attribute costs what a span does. An exporter's batch of 512 spans may
  // carry 500 attributes each (an attribute and its value: 2), and exporters do not split a batch that is refused.
  std::size_t max_elements = 1 << 19;
};

// A request that is not an OTLP/HTTP protobuf trace export: answered 400 with a google.rpc.Status; a gzip body that
// inflates past the bound 413, as one the server's decoder inflates (Content-Encoding gzip in lower case) is.
class OtlpError : public std::invalid_argument {
 public:
  explicit OtlpError(const std::string& what, int status = 400) : std::invalid_argument(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// The spans of one export, in the order they came, each an AGL Span (the keys of `Span`, in its field order):
// rollout_id, attempt_id, sequence_id, trace_id and span_id (hex, 32 and 16 digits), parent_id (hex or null), name,
// status {status_code: UNSET|OK|ERROR, description: message or null}, attributes, events [{name, attributes,
// timestamp}], links [{context, attributes or null}], start_time and end_time (seconds; a zero time is null),
// context {trace_id, span_id, is_remote: false, trace_state: {}}, parent (null), resource {attributes, schema_url}.
// Attribute values: str, bool, int, float, lists and objects of them; bytes as hex; an empty value null.
// rollout_id and attempt_id come from the span's attributes agentlightning.rollout_id / agentlightning.attempt_id,
// else from its resource's; a span without both is left out. sequence_id likewise from
// agentlightning.span_sequence_id (an int, or a decimal string); where it is missing, not a number or negative the
// key is absent: the store issues one from the rollout's counter.
// `content_type` must be application/x-protobuf (parameters aside); `content_encoding` gzip or none. An empty body is
// an empty export. Throws OtlpError for anything else, and for a body that does not decode or holds text that is
// not UTF-8.
std::vector<Json> decode_otlp_traces(std::string_view body, std::string_view content_type,
                                     std::string_view content_encoding, const OtlpOptions& options = {});

// The bodies of the answers: an empty ExportTraceServiceResponse (200) and a google.rpc.Status with the message (an
// error; its code is left 0, as Agent Lightning leaves it).
std::string otlp_export_response();
std::string otlp_error_status(const std::string& message);

// Whether an Accept-Encoding header asks for gzip (as Agent Lightning reads it: a gzip token, any q).
bool accepts_gzip(std::string_view accept_encoding);
std::string gzip_compress(std::string_view bytes);
// Inflates a gzip stream (one member or several after each other); throws OtlpError past `max_bytes` or for bytes
// that are not gzip.
std::string gzip_inflate(std::string_view bytes, std::size_t max_bytes);

// POST /v1/traces: decodes, hands the spans (when there are any) to `ingest`, answers 200 with an empty
// ExportTraceServiceResponse. Errors on that path, whatever their cause (a wrong Content-Type, a body that does not
// decode or inflate, one too large, an exception from `ingest`), are answered as a google.rpc.Status protobuf with
// their HTTP status; answers are gzipped where the client accepts gzip. Added before the server starts.
void add_otlp_route(HttpServer& server, std::function<void(std::vector<Json>)> ingest, OtlpOptions options = {});

}  // namespace arclight::serve
