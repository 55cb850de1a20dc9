// The endpoint over the scripted engine, on a free port, for tests that use outside clients (curl): prints the port,
// serves until its standard input closes.
#include <iostream>

#include "fakes.hpp"

int main() {
  using namespace arclight::serve::testing;
  arclight::serve::HttpServerOptions options = test_options();
  options.max_body_bytes = 1024;
  Served served(options);
  served.generator.answer_text("Hello from the server");
  std::cout << served.server.port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
