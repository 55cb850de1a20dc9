#include "guarded_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace arclight::serve {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t header_bytes = 64 << 10;  // what a request sends before its token is checked

// poll(2) for `events` until `deadline`; false when it passed (or the socket failed).
bool wait_until(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// Whether bytes (or the end) are waiting on the socket now: one poll(2) that does not wait.
bool readable_now(int fd) {
  pollfd p{fd, POLLIN, 0};
  int n;
  do n = ::poll(&p, 1, 0);
  while (n < 0 && errno == EINTR);
  return n > 0;
}

std::string address_text(const sockaddr_storage& address, int& port) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (address.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(address);
    ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  return text;
}

// One connection's bytes, buffered (the library reads a request's line and headers a byte at a time), counted and
// timed per request.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, const HttpServerOptions& options) : fd_(fd), options_(options) {}

  // A new request begins: its budget and its deadline start again, its token unchecked. `last`: the connection ends
  // after it whatever it holds (the library's answer says Connection: close).
  void begin_request(bool last) {
    received_ = 0;
    authenticated_ = unread_ = body_too_slow_ = body_too_large_ = false;
    last_ = last;
    request_deadline_ = Clock::now() + options_.request_timeout;
  }
  void authenticate() {
    authenticated_ = true;
    body_deadline_ = Clock::now() + options_.body_timeout;
  }
  void leave_unread() { unread_ = true; }
  // After a request not authenticated (the library answers a request it cannot parse, 400 or 414, before the token is
  // looked at), one cut off at its deadline or budget, or one whose body was left unread: the next bytes would be read
  // as a request of their own.
  bool ends_connection() const { return !authenticated_ || cut_off_ || unread_; }
  // Ends it where the library, told nothing of it, answers as if the connection lived on.
  bool ends_connection_unannounced() const { return ends_connection() && !last_; }
  // The body did not come whole within body_timeout (a client that trickles it held a worker for as long as it sent).
  bool body_too_slow() const { return body_too_slow_; }
  // The connection brought more bytes than the request may hold: its headers, its body and the body's chunk framing.
  bool body_too_large() const { return body_too_large_; }
  bool buffered() const { return begin_ < end_; }
  // The client closed its end: the connection reads its end (a next request's bytes are no end), or hung up.
  bool peer_gone() const {
    if (buffered()) return false;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
    char byte;
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }

  bool is_readable() const override { return buffered() || wait_readable(); }

  bool is_writable() const override {
    if (!wait_until(fd_, POLLOUT, Clock::now() + options_.write_timeout)) return false;
    char byte;  // a client gone: the peek reads the end of its stream
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (!buffered()) {
      if (!wait_readable()) return -1;
      ssize_t n;
      do n = ::recv(fd_, buffer_, sizeof buffer_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n < 0 ? -1 : 0;
      received_ += static_cast<std::size_t>(n);
      // A body's bytes are bounded as they come out of the library's decoder; this bounds what reaches it, and leaves
      // room for a chunked body's framing: its size again (5 bytes and more a chunk: 6-byte chunks and longer pass).
      if (received_ > (authenticated_ ? header_bytes + 2 * options_.max_body_bytes : header_bytes)) {
        body_too_large_ = authenticated_;
        return cut_off();
      }
      begin_ = 0;
      end_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_until(fd_, POLLOUT, Clock::now() + options_.write_timeout)) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) ip = address_text(address, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) ip = address_text(address, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  // Each read waits read_timeout at most, and no later than the request's deadline (its line and headers) or, after
  // the token is checked, its body's; past it, the request is cut off.
  bool wait_readable() const {
    const auto each = Clock::now() + options_.read_timeout;
    const auto deadline = authenticated_ ? body_deadline_ : request_deadline_;
    if (wait_until(fd_, POLLIN, std::min(each, deadline))) return true;
    cut_off_ = true;
    body_too_slow_ = authenticated_ && deadline <= each;
    return false;
  }

  ssize_t cut_off() {
    cut_off_ = true;
    return -1;
  }

  const int fd_;
  const HttpServerOptions& options_;
  char buffer_[4096];
  std::size_t begin_ = 0, end_ = 0;
  std::size_t received_ = 0;
  bool authenticated_ = false, unread_ = false, last_ = false;
  mutable bool cut_off_ = false, body_too_slow_ = false;  // is_readable (const in the library's interface) cuts off too
  bool body_too_large_ = false;
  Clock::time_point request_deadline_{}, body_deadline_{};
};

thread_local ConnectionStream* reading = nullptr;  // the connection this worker thread serves
thread_local bool refusing = false;                // on the accepting thread: the pool has no room for the connection

}  // namespace

// The library's thread pool, with a bound on the connections that wait for a worker: past it, a new connection is
// answered 503 by the accepting thread and closed. The library's queue grew without end, and a rank out of file
// descriptors cannot write its checkpoint.
// A kept-alive connection between requests yields its worker to a connection that waits for one and that no idle
// worker will take (yield_to_waiting): a thread held per idle connection starved the rest (an agent's client keeps
// two connections per thread).
class BoundedPool final : public httplib::TaskQueue {
 public:
  // Throws std::system_error, the threads started ended, where one cannot start.
  BoundedPool(std::size_t threads, std::size_t max_waiting) : max_waiting_(max_waiting), idle_(threads) {
    try {
      for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
    } catch (...) {
      shutdown();
      throw;
    }
  }

  void enqueue(std::function<void()> serve_connection) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Idle workers take theirs at once: they count as room (else a burst, or a bound of 0, met idle workers with
      // 503).
      if (waiting_.size() < max_waiting_ + idle_) {
        waiting_.push_back(std::move(serve_connection));
        wake_.notify_one();
        return;
      }
    }
    refusing = true;  // GuardedServer::process_and_close_socket answers 503 and closes
    serve_connection();
    refusing = false;
  }

  // On a worker between a kept-alive connection's requests: true when a connection waits that neither an idle worker
  // nor another yielding one will take; the caller then ends its connection.
  bool yield_to_waiting() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (yielded || waiting_.size() <= idle_ + yielding_) return yielded;
    ++yielding_;
    yielded = true;
    return true;
  }
  // The caller keeps its connection after all (a request came as it was about to end it).
  void withdraw_yield() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (yielded) --yielding_, yielded = false;
  }

  // Serves what waits, then ends the threads.
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shut_down_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return shut_down_ || !waiting_.empty(); });
      if (waiting_.empty()) return;
      std::function<void()> serve_connection = std::move(waiting_.front());
      waiting_.pop_front();
      --idle_;
      lock.unlock();
      serve_connection();
      lock.lock();
      if (yielded) --yielding_, yielded = false;
      ++idle_;
    }
  }

  const std::size_t max_waiting_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> waiting_;
  std::size_t idle_;  // workers not serving a connection (counted from the start: a thread not yet waiting is free)
  std::size_t yielding_ = 0;  // workers ending a connection to take a waiting one
  static thread_local bool yielded;
  bool shut_down_ = false;
};

thread_local bool BoundedPool::yielded = false;

namespace {

// The answer to a connection the pool has no room for, sent without waiting (the accepting thread sends it).
void refuse_busy(socket_t sock) {
  static const std::string body =
      R"({"error":{"message":"the server is busy: too many connections wait","type":"server_error","param":null,)"
      R"("code":null}})";
  static const std::string answer =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
  ::send(sock, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(sock, SHUT_WR);
  // The request already here is read and dropped: closed with unread bytes, the connection would be reset, and the
  // client might lose its answer. (Not waited for: the accepting thread sends this.)
  char dropped[16 << 10];
  for (int i = 0; i < 4 && ::recv(sock, dropped, sizeof dropped, MSG_DONTWAIT) > 0; ++i) {
  }
  ::close(sock);
}

// No route here answers a byte range: the library would cut any answer, a 401's JSON included, into the ranges a
// Range header asks for (thousands of them from 8 KB of header, before the token is checked).
void serve_whole_answers(httplib::Request& req) { req.ranges.clear(); }

}  // namespace

void GuardedServer::authenticated() {
  if (reading) reading->authenticate();
}

void GuardedServer::body_left_unread() {
  if (reading) reading->leave_unread();
}

httplib::TaskQueue* GuardedServer::new_pool(std::size_t threads, std::size_t max_waiting) {
  pool_ = new BoundedPool(threads, max_waiting);
  return pool_;
}

bool GuardedServer::client_gone() { return reading && reading->peer_gone(); }

bool GuardedServer::body_too_slow() { return reading && reading->body_too_slow(); }

bool GuardedServer::body_too_large() { return reading && reading->body_too_large(); }

bool GuardedServer::ends_connection_unannounced() { return reading && reading->ends_connection_unannounced(); }

void GuardedServer::close_connections() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const socket_t sock : open_) ::shutdown(sock, SHUT_RDWR);
}

bool GuardedServer::wait_for_request(socket_t sock, bool kept_alive) const {
  // In slices, to see the server stop (a connection that came in as it stopped was never shut down) and connections
  // that wait for a worker. A kept-alive connection idle for 200 ms yields to one; a request that came meanwhile
  // withdraws that (ending a connection as its client sends is a request lost, to a client that does not retry).
  const auto start = Clock::now(), deadline = start + options_.idle_timeout;
  while (svr_sock_ != INVALID_SOCKET) {
    const auto slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(100));
    if (wait_until(sock, POLLIN, slice)) return true;
    if (Clock::now() >= deadline) return false;
    if (kept_alive && Clock::now() - start >= std::chrono::milliseconds(200) && pool_->yield_to_waiting()) {
      if (!readable_now(sock)) return false;
      pool_->withdraw_yield();
      return true;
    }
  }
  return false;
}

// A lingering close: the answer's end goes out (FIN) while what the client still sends (a body not read) is read and
// dropped for up to two seconds. Closed with those bytes unread, the connection would be reset, and the client might
// never read its answer (a 413, a 401).
void GuardedServer::linger(socket_t sock) const {
  ::shutdown(sock, SHUT_WR);
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  char dropped[16 << 10];
  while (svr_sock_ != INVALID_SOCKET && wait_until(sock, POLLIN, deadline)) {
    const ssize_t n = ::recv(sock, dropped, sizeof dropped, 0);
    if (n == 0 || (n < 0 && errno != EINTR)) return;
  }
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  if (refusing) {
    refuse_busy(sock);
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_.insert(sock);
  }
  ConnectionStream stream(sock, options_);
  reading = &stream;
  bool served = false, ended_early = false;
  // Registered before the server's state is read: close_connections() after stop() reaches it, or it sees the stop.
  for (std::size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    if (!stream.buffered() && !wait_for_request(sock, left < keep_alive_max_count_)) break;
    bool connection_closed = false;
    // While connections wait for a worker, an answer ends its connection, saying so (Connection: close): the client
    // connects again, nothing lost.
    const bool last = left == 1 || (left < keep_alive_max_count_ && pool_->yield_to_waiting());
    stream.begin_request(last);
    served = process_request(stream, last, connection_closed, serve_whole_answers);
    // Connection: close or not, bytes of it may still come (a body not read): they are read and dropped first.
    if ((ended_early = !served || stream.ends_connection()) || connection_closed || last) break;
  }
  reading = nullptr;
  if (ended_early) linger(sock);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_.erase(sock);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return served;
}

}  // namespace arclight::serve
