// Rank 0's store API over a MemoryStore on a free port, for tests with outside clients (Python's standard library):
// prints the port, serves until its standard input closes. The token also works as the URL's first path segment.
// Usage: store_api_test_server TOKEN
#include <iostream>

#include "arclight/core/clock.hpp"
#include "arclight/serve/store_routes.hpp"
#include "arclight/store/memory_store.hpp"

int main(int argc, char** argv) {
  using namespace arclight;
  if (argc != 2) {
    std::cerr << "usage: store_api_test_server TOKEN\n";
    return 2;
  }
  SystemClock clock;
  store::RolloutConfig config;
  config.max_attempts = 2;
  config.retry_condition = store::bit(store::AttemptStatus::failed);
  store::MemoryStore store(clock, config);
  serve::HttpServerOptions options;
  options.bearer_token = argv[1];
  options.token_in_path = true;
  options.missing_token_status = 404;
  serve::HttpServer server(options);
  serve::add_store_routes(server, store);
  server.start();
  std::cout << server.port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
