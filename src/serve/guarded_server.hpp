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

#include <mutex>
#include <set>

#include "arclight/serve/http_server.hpp"

namespace arclight::serve {

class BoundedPool;

class GuardedServer : public httplib::Server {
 public:
  // Its timeouts and body limit are the options'.
  explicit GuardedServer(const HttpServerOptions& options) : options_(options) {}

  // Called on the thread serving a request: from the pre-routing handler once its token is right (it may send its
  // body); by a handler that left its body unread (a 413), whose connection then ends after the answer.
  static void authenticated();
  static void body_left_unread();
  // On the thread serving a request: whether its client has closed (or half-closed) the connection.
  static bool client_gone();
  // On the thread serving a request: whether its body's read was cut off at body_timeout.
  static bool body_too_slow();
  // On the thread serving a request: whether its read was cut off for the bytes it brought (body and framing).
  static bool body_too_large();
  // On the thread serving a request: whether its connection ends after the answer (no token, a body left unread, a
  // read cut off) where the library would answer as if it lived on (not the connection's last request).
  static bool ends_connection_unannounced();

  // The task queue the library serves connections from: `threads` workers, at most `max_waiting` connections
  // waiting for one (past it, a connection is answered 503 and closed); a kept-alive connection between requests
  // yields its worker to one that waits.
  httplib::TaskQueue* new_pool(std::size_t threads, std::size_t max_waiting);

  // Shuts every open connection down: after stop(), no client (trickling, idle, or mid-request) keeps a worker
  // thread, and the listening thread's end, waiting.
  void close_connections();

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Waits for a connection's next request: false after the idle timeout, once the server stops, or (`kept_alive`:
  // a request was served on it) when it yields its worker to a waiting connection.
  bool wait_for_request(socket_t sock, bool kept_alive) const;
  void linger(socket_t sock) const;

  const HttpServerOptions options_;
  BoundedPool* pool_ = nullptr;  // the library's, made by new_pool when it listens; it outlives every connection
  std::mutex mutex_;
  std::set<socket_t> open_;
};

}  // namespace arclight::serve
