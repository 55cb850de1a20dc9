// POST /v1/traces on a free port for tests that use outside clients (the OpenTelemetry JS SDK): prints the port, writes
// each span it decodes as one JSON line to the file named by its second argument, serves until its standard input
// closes. Usage: otlp_test_server TOKEN SPANS_FILE
#include <fstream>
#include <iostream>
#include <mutex>

#include "otlp.hpp"

int main(int argc, char** argv) {
  using namespace arclight::serve;
  if (argc != 3) {
    std::cerr << "usage: otlp_test_server TOKEN SPANS_FILE\n";
    return 2;
  }
  HttpServerOptions options;
  options.bearer_token = argv[1];
  HttpServer server(options);
  std::mutex mutex;
  std::ofstream spans(argv[2]);
  add_otlp_route(server, [&](std::vector<Json> decoded) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const Json& span : decoded) spans << span.dump() << '\n';
    spans.flush();
  });
  server.start();
  std::cout << server.port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
