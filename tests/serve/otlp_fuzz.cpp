// The OTLP trace decoder on any bytes: spans or OtlpError, nothing else (no other exception, no crash, no undefined
// behaviour), and every span it gives is JSON that dumps (valid UTF-8) with the ids it promises. The first byte picks
// the headers; in one variant the harness gzips the rest first, so that the protobuf decoder is reached through the
// inflater too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "otlp.hpp"

using namespace arclight::serve;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const char* const content_types[] = {"application/x-protobuf", "application/x-protobuf; charset=utf-8",
                                              "application/json"};
  const std::uint8_t choice = data[0];
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string_view encoding = "";
  switch (choice % 4) {
    case 1: encoding = "gzip"; break;  // the bytes as they are: the inflater on anything
    case 2:
      body = gzip_compress(body);
      encoding = "gzip";
      break;
    case 3: encoding = "identity"; break;
  }
  OtlpOptions options;
  options.max_inflated_bytes = 1 << 20;
  try {
    for (const Json& span : decode_otlp_traces(body, content_types[(choice / 4) % 3], encoding, options)) {
      if (!span.at("rollout_id").is_string() || !span.at("attempt_id").is_string()) __builtin_trap();
      if (span.contains("sequence_id") && span["sequence_id"].get<std::int64_t>() < 0) __builtin_trap();
      span.dump();  // throws for text that is not UTF-8
    }
  } catch (const OtlpError&) {
  }
  return 0;
}
