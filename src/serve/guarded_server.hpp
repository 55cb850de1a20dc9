#pragma once
// cpp-httplib's server with the connection handling Debian's 0.11 lacks: its reads have a timeout each, which a
// client sending a byte now and then never meets, and no bound on a request's header bytes or on a chunked body; its
// stop() waits for every connection to end of itself. Here a request's line and headers come within a deadline and a
// byte budget until the token is checked, an authenticated request sends at most its body's limit and the headers'
// budget, a request that was not authenticated (refused, or one the library could not parse) or whose body was not
// read whole ends its connection (after a lingering close: the client still gets its answer), and close_connections()
// ends every connection at once.
// Only http_server.cpp uses it.
#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <set>

namespace arclight::serve {

struct ConnectionLimits {
  std::chrono::milliseconds read_timeout{5000};      // each read
  std::chrono::milliseconds write_timeout{5000};     // each write
  std::chrono::milliseconds idle_timeout{5000};      // a kept-alive connection waiting for its next request
  std::chrono::milliseconds request_timeout{10000};  // a request's line and headers, until its token is checked
  std::size_t header_bytes = 64 << 10;               // what a request sends before its token is checked
  std::size_t body_bytes = 8 << 20;                  // and after (on the wire: compressed, chunked)
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(ConnectionLimits limits) : limits_(limits) {}

  // Called on the thread serving a request: from the pre-routing handler once its token is right (it may send its
  // body); by a handler that left its body unread (a 413), whose connection then ends after the answer.
  static void authenticated();
  static void body_left_unread();

  // Shuts every open connection down: after stop(), no client (trickling, idle, or mid-request) keeps a worker
  // thread, and the listening thread's end, waiting.
  void close_connections();

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Waits for a kept-alive connection's next request: false after the idle timeout, or once the server stops.
  bool wait_for_request(socket_t sock) const;
  void linger(socket_t sock) const;

  const ConnectionLimits limits_;
  std::mutex mutex_;
  std::set<socket_t> open_;
};

}  // namespace arclight::serve
