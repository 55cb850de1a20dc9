// POST /v1/traces on a free port for tests that use outside clients (the OpenTelemetry JS SDK): prints the port, writes
// each span it decodes as one JSON line to SPANS_FILE and, to STORED_FILE, what the store API answers for it once
// stored (its store::Span through the span record's encoding and back), serves until its standard input closes.
// Usage: otlp_test_server TOKEN SPANS_FILE STORED_FILE
#include <fstream>
#include <iostream>
#include <mutex>

#include "arclight/store/span_record.hpp"
#include "otlp.hpp"
#include "store_json.hpp"

int main(int argc, char** argv) {
  using namespace arclight::serve;
  if (argc != 4) {
    std::cerr << "usage: otlp_test_server TOKEN SPANS_FILE STORED_FILE\n";
    return 2;
  }
  HttpServerOptions options;
  options.bearer_token = argv[1];
  HttpServer server(options);
  std::mutex mutex;
  std::ofstream spans(argv[2]), stored(argv[3]);
  add_otlp_route(server, [&](std::vector<Json> decoded) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const Json& span : decoded) {
      spans << span.dump() << '\n';
      const arclight::store::Span taken = span_from_json(span);
      std::string record;
      arclight::ByteWriter out(record);
      arclight::store::encode_span_body(out, taken);
      stored << span_json(
                    arclight::store::decode_span_record(taken.rollout_id, taken.attempt_id, taken.sequence_id, record))
                    .dump()
             << '\n';
    }
    spans.flush();
    stored.flush();
  });
  server.start();
  std::cout << server.port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
