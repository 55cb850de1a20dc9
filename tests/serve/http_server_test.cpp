// The HTTP server's guards, over real sockets: the token, the body limit, timeouts, JSON errors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "fakes.hpp"

namespace arclight::serve::testing {
namespace {

int connection_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  return fd;
}

// A connection that sends half a request line and then nothing.
int half_open_connection(int port) {
  const int fd = connection_to(port);
  BOOST_REQUIRE(::send(fd, "POST /v1/completions HTT", 24, 0) == 24);
  return fd;
}

// Reads until the server closes the connection (0; an abortive close, -2) or 3 s pass (-1); what came, in `got`.
long read_to_close(int fd, std::string* got = nullptr) {
  timeval limit{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  char buffer[512];
  long n;
  while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0)
    if (got) got->append(buffer, static_cast<std::size_t>(n));
  return n < 0 && errno == ECONNRESET ? -2 : n;
}

// How many times the head of the first answer in `answer` says Connection: close (a connection that ends after an
// answer says so once, and offers no Keep-Alive; one kept alive, never).
int says_close(const std::string& answer) {
  const std::string head = answer.substr(0, answer.find("\r\n\r\n") + 2);
  if (head.find("\r\nKeep-Alive:") != std::string::npos && head.find("\r\nConnection: close\r\n") != std::string::npos)
    return -1;
  int count = 0;
  for (std::size_t at = head.find("\r\nConnection: close\r\n"); at != std::string::npos;
       at = head.find("\r\nConnection: close\r\n", at + 1))
    ++count;
  return count;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

json error_of(const httplib::Result& result, int status) {
  BOOST_REQUIRE(result);
  BOOST_TEST(result->status == status);
  BOOST_TEST(result->get_header_value("Content-Type") == "application/json");
  const json body = json::parse(result->body);
  BOOST_TEST(body["error"]["message"].is_string());
  BOOST_TEST(body["error"]["type"].is_string());
  BOOST_TEST(body["error"].contains("param"));
  BOOST_TEST(body["error"].contains("code"));
  return body["error"];
}

}  // namespace

BOOST_AUTO_TEST_SUITE(http_server)

// Worker threads that cannot start (a user's process limit) make start() throw one clear error, the threads already
// started ended; before, the pool was made on the listening thread, and the exception ended the program there. In a
// child whose user's processes are limited (root's are not: as root, the child becomes nobody first).
BOOST_AUTO_TEST_CASE(worker_threads_that_cannot_start_are_an_error_of_start) {
  const pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    const rlimit few{64, 64};
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    if (::setrlimit(RLIMIT_NPROC, &few) != 0) ::_exit(3);
    HttpServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.bearer_token = token;
    options.worker_threads = 1000;
    try {
      HttpServer server(options);
      server.start();
    } catch (const Error& e) {
      ::_exit(std::string(e.what()).find("cannot start 1000 worker threads") != std::string::npos ? 0 : 4);
    }
    ::_exit(5);  // started: not refused
  }
  int status = 0;
  BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);  // 3: could not limit the processes; 4: another error; 5: not refused
}

// An agent's OPENAI_BASE_URL of a runner on ::1 was http://::1:PORT/v1 (its client: "Port could not be cast to
// integer"); one on 0.0.0.0 named an address nobody connects to.
BOOST_AUTO_TEST_CASE(urls_name_hosts_clients_can_reach) {
  BOOST_TEST(url_host("127.0.0.1") == "127.0.0.1");
  BOOST_TEST(url_host("node7") == "node7");
  BOOST_TEST(url_host("::1") == "[::1]");
  BOOST_TEST(url_host("[::1]") == "[::1]");
  char name[256] = {};
  BOOST_REQUIRE(::gethostname(name, sizeof name - 1) == 0);
  BOOST_TEST(url_host("0.0.0.0") == name);
  BOOST_TEST(url_host("::") == name);
  BOOST_TEST(url_host("0.0.0.0", true) == "127.0.0.1");  // agents beside the runner: nothing to resolve
  BOOST_TEST(url_host("::", true) == "[::1]");
  BOOST_TEST(url_host("::1", true) == "[::1]");
}

BOOST_AUTO_TEST_CASE(a_missing_or_wrong_token_is_401_and_the_right_one_passes) {
  Served served;
  httplib::Client anonymous("127.0.0.1", served.server.port());
  BOOST_TEST(error_of(anonymous.Get("/v1/models"), 401)["type"] == "authentication_error");
  anonymous.set_bearer_token_auth("secret-tokeN");
  error_of(anonymous.Get("/v1/models"), 401);
  anonymous.set_bearer_token_auth("secret-token-and-more");
  error_of(anonymous.Get("/v1/models"), 401);
  BOOST_TEST(served.client->Get("/v1/models")->status == 200);
}

// As aiohttp and requests send the user info of http://user:<token>@host/: any user, the token as the password.
BOOST_AUTO_TEST_CASE(basic_auth_with_the_token_as_password_passes_and_any_other_is_401) {
  Served served;
  httplib::Client client("127.0.0.1", served.server.port());
  client.set_basic_auth("anyone", token.c_str());
  BOOST_TEST(client.Get("/v1/models")->status == 200);
  client.set_basic_auth("anyone", (token + "x").c_str());
  error_of(client.Get("/v1/models"), 401);
  client.set_basic_auth(token.c_str(), "");  // the token as the user name is not the password
  error_of(client.Get("/v1/models"), 401);
  httplib::Client garbage("127.0.0.1", served.server.port());
  garbage.set_default_headers({{"Authorization", "Basic !!!not-base64"}});
  error_of(garbage.Get("/v1/models"), 401);
}

BOOST_AUTO_TEST_CASE(a_body_over_the_limit_is_413_in_json) {
  Served served;
  const std::string big(65 << 10, 'x');
  const auto result = served.client->Post("/v1/completions", big, "application/json");
  BOOST_TEST(error_of(result, 413)["message"] == "request body too large");
  BOOST_TEST(served.generator.requests().empty());
}

// The library inflates gzip bodies itself and bounds only the bytes that arrive; the server bounds what comes out.
BOOST_AUTO_TEST_CASE(a_gzip_body_is_inflated_up_to_the_limit_and_a_zip_bomb_is_413) {
  HttpServer server(test_options());
  server.post("/echo", [](const HttpRequest& r) {
    return HttpResponse{200, "text/plain", std::to_string(r.body.size()) + " [" + r.header("content-encoding") + "]",
                        nullptr};
  });
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  client.set_bearer_token_auth(token.c_str());
  client.set_compress(true);  // gzip, Content-Encoding: gzip
  BOOST_TEST(client.Post("/echo", std::string(60 << 10, 'x'), "text/plain")->body == "61440 []");
  const auto bomb = client.Post("/echo", std::string(64 << 20, 'x'), "text/plain");  // some 64 KiB of gzip
  BOOST_TEST(error_of(bomb, 413)["message"] == "request body too large");
  client.set_compress(false);
  // (A gzip body cut short passes as what it holds: the library's decoder does not look for the stream's end.)
  const auto corrupt = client.Post("/echo", {{"Content-Encoding", "gzip"}}, "not gzip", "text/plain");
  BOOST_TEST(error_of(corrupt, 400)["message"].get<std::string>().find("could not be read") != std::string::npos);
  const auto multipart = client.Post("/echo", "--b\r\n\r\nx\r\n--b--\r\n", "multipart/form-data; boundary=b");
  BOOST_TEST(error_of(multipart, 415)["message"] == "multipart bodies are not taken");
  BOOST_TEST(client.Post("/echo", "still here", "text/plain")->body == "10 []");
}

// Only our POST routes read bodies, through the bound above: any other request that carries one (a POST no route
// takes, PUT, PATCH, DELETE) is answered before a byte of it is read, and its connection ends. The library read and
// inflated those itself, without bound: a 6.5 KB brotli body to PUT took a rank past a gigabyte.
BOOST_AUTO_TEST_CASE(a_body_no_route_reads_is_refused_before_it_is_read) {
  HttpServer server(test_options());
  server.post("/echo", [](const HttpRequest& r) { return HttpResponse{200, "text/plain", r.body, nullptr}; });
  server.start();
  for (const auto& [head, status] : std::vector<std::pair<std::string, std::string>>{
           {"PUT /echo", "405"}, {"DELETE /echo", "405"}, {"PATCH /echo", "405"}, {"POST /nowhere", "404"}}) {
    const int fd = connection_to(server.port());
    // The head promises a gzip body that never comes: an answer at all says the body was not waited for.
    const std::string request = head + " HTTP/1.1\r\nHost: here\r\nAuthorization: Bearer " + token +
                                "\r\nContent-Encoding: gzip\r\nContent-Length: 60000\r\n\r\n";
    BOOST_REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
    std::string answer;
    BOOST_TEST(read_to_close(fd, &answer) == 0, head << ": the connection was not closed");
    BOOST_TEST(answer.rfind("HTTP/1.1 " + status, 0) == 0, head << " answered: " << answer.substr(0, 40));
    BOOST_TEST(answer.find("application/json") != std::string::npos, head);
    BOOST_TEST(says_close(answer) == 1, head << " answered: " << answer);
    ::close(fd);
  }
  httplib::Client client("127.0.0.1", server.port());
  client.set_bearer_token_auth(token.c_str());
  client.set_compress(true);
  error_of(client.Put("/echo", std::string(32 << 20, 'x'), "text/plain"), 405);
  BOOST_TEST(error_of(client.Post("/nowhere", std::string(32 << 20, 'x'), "text/plain"), 404)["message"] ==
             "no route for POST /nowhere");
  BOOST_TEST(client.Post("/echo", "still here", "text/plain")->body == "still here");
}

// The library reads no body of a GET: one sent all the same (curl -X GET -d, requests.get(json=...)) was read as the
// next request on the connection, and that request got a 400. The GET is answered, and its connection ends.
BOOST_AUTO_TEST_CASE(a_body_sent_with_a_get_ends_its_connection_after_the_answer) {
  HttpServer server(test_options());
  server.get("/here", [](const HttpRequest&) { return HttpResponse{200, "text/plain", "here", nullptr}; });
  server.start();
  const std::string get = "GET /here HTTP/1.1\r\nHost: here\r\nAuthorization: Bearer " + token;
  for (const std::string& body_head : {std::string("\r\nContent-Length: 2\r\n\r\n{}"),
                                       std::string("\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")}) {
    const int fd = connection_to(server.port());
    const std::string requests = get + body_head + get + "\r\n\r\n";
    BOOST_REQUIRE(::send(fd, requests.data(), requests.size(), 0) == static_cast<ssize_t>(requests.size()));
    std::string answer;
    BOOST_TEST(read_to_close(fd, &answer) == 0, "the connection was not closed");
    BOOST_TEST(answer.rfind("HTTP/1.1 200", 0) == 0, answer.substr(0, 40));
    BOOST_TEST(answer.find("HTTP/1.1 400") == std::string::npos, answer);
    BOOST_TEST(says_close(answer) == 1, answer);
    ::close(fd);
  }
  // Without a body, the connection lives on: both answered, the first kept alive, the second closing as asked.
  const int fd = connection_to(server.port());
  const std::string two = get + "\r\n\r\n" + get + "\r\nConnection: close\r\n\r\n";
  BOOST_REQUIRE(::send(fd, two.data(), two.size(), 0) == static_cast<ssize_t>(two.size()));
  std::string answers;
  read_to_close(fd, &answers);
  const std::size_t second = answers.find("HTTP/1.1 200", 1);
  BOOST_REQUIRE_MESSAGE(second != std::string::npos, answers);
  BOOST_TEST(says_close(answers) == 0, answers);
  BOOST_TEST(says_close(answers.substr(second)) == 1, answers);
  ::close(fd);
}

// POST /size answers "body of N" with the size of the body it read; the server started.
void serve_body_sizes(HttpServer& server) {
  server.post("/size", [](const HttpRequest& r) {
    return HttpResponse{200, "text/plain", "body of " + std::to_string(r.body.size()), nullptr};
  });
  server.start();
}

// A POST with neither Content-Length nor Transfer-Encoding has no body (RFC 9112, 6.3; curl -X POST without -d): the
// library read such a body until the client closed, and the request waited out the read timeout (30 s) for a 400.
BOOST_AUTO_TEST_CASE(a_post_without_a_length_has_an_empty_body) {
  HttpServer server(test_options());
  serve_body_sizes(server);
  const std::string post = "POST /size HTTP/1.1\r\nHost: here\r\nAuthorization: Bearer " + token + "\r\n";
  const int fd = connection_to(server.port());
  const std::string two = post + "\r\n" + post + "Connection: close\r\n\r\n";
  BOOST_REQUIRE(::send(fd, two.data(), two.size(), 0) == static_cast<ssize_t>(two.size()));
  std::string answers;
  read_to_close(fd, &answers);
  const std::size_t first = answers.find("HTTP/1.1 200");
  BOOST_TEST(first == 0u, answers);
  BOOST_TEST(answers.find("HTTP/1.1 200", first + 1) != std::string::npos, answers);
  BOOST_TEST(answers.find("body of 0") != std::string::npos, answers);
  ::close(fd);
}

// A Transfer-Encoding other than chunked alone marks no end of the body (RFC 9112, 6.3): the library read such a body
// until the client closed, a worker held meanwhile. 400 at once, and the connection ends; chunked still serves.
BOOST_AUTO_TEST_CASE(a_body_framed_by_no_length_and_no_chunks_is_refused_at_once) {
  HttpServer server(test_options());
  serve_body_sizes(server);
  const std::string post = "POST /size HTTP/1.1\r\nHost: here\r\nAuthorization: Bearer " + token + "\r\n";
  for (const std::string coding : {"gzip", "identity", "gzip, chunked"}) {
    const int fd = connection_to(server.port());
    const std::string request = post + "Transfer-Encoding: " + coding + "\r\n\r\nsome bytes, and no end";
    BOOST_REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
    std::string answer;  // the client keeps its end open: only the server's close ends this read
    BOOST_TEST(read_to_close(fd, &answer) == 0, coding << ": the connection was not closed");
    BOOST_TEST(answer.rfind("HTTP/1.1 400", 0) == 0, coding << ": " << answer.substr(0, 40));
    BOOST_TEST(answer.find("Transfer-Encoding '" + coding + "' is not served") != std::string::npos, answer);
    BOOST_TEST(says_close(answer) == 1, answer);
    ::close(fd);
  }
  const int fd = connection_to(server.port());
  const std::string chunked = post + "Transfer-Encoding: Chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
  BOOST_REQUIRE(::send(fd, chunked.data(), chunked.size(), 0) == static_cast<ssize_t>(chunked.size()));
  std::string answer;
  read_to_close(fd, &answer);
  BOOST_TEST(answer.find("body of 3") != std::string::npos, answer);
  ::close(fd);
}

// A body trickled a byte at a time, each within the read timeout, held a worker for as long as the client went on
// (8 MiB at a byte every 29 s): past body_timeout it is 408, and the connection ends.
BOOST_AUTO_TEST_CASE(a_body_that_does_not_come_whole_within_its_time_is_408) {
  HttpServerOptions options = test_options();
  options.body_timeout = std::chrono::milliseconds(1000);
  HttpServer server(options);
  serve_body_sizes(server);
  const int fd = connection_to(server.port());
  const std::string head =
      "POST /size HTTP/1.1\r\nHost: here\r\nAuthorization: Bearer " + token + "\r\nContent-Length: 100\r\n\r\n";
  BOOST_REQUIRE(::send(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size()));
  const auto start = std::chrono::steady_clock::now();
  pollfd answered{fd, POLLIN, 0};
  for (int i = 0; i < 100 && ::poll(&answered, 1, 100) == 0; ++i)  // a byte every 100 ms: the whole body in 10 s
    ::send(fd, "x", 1, MSG_NOSIGNAL);
  const double seconds = seconds_since(start);
  std::string answer;
  read_to_close(fd, &answer);
  BOOST_TEST(answer.rfind("HTTP/1.1 408", 0) == 0, answer.substr(0, 40));
  BOOST_TEST(answer.find("did not come whole within 1 s") != std::string::npos, answer);
  BOOST_TEST(says_close(answer) == 1, answer);
  BOOST_TEST(seconds < 5.0, "answered after " << seconds << " s");
  ::close(fd);
}

BOOST_AUTO_TEST_CASE(an_unknown_route_is_404_in_json) {
  Served served;
  BOOST_TEST(error_of(served.client->Get("/v1/engines"), 404)["message"] == "no route for GET /v1/engines");
}

BOOST_AUTO_TEST_CASE(a_handler_that_throws_answers_500_and_the_server_goes_on) {
  HttpServer server(test_options());
  server.get("/boom", [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("kaboom"); });
  server.get("/fine", [](const HttpRequest&) { return HttpResponse{200, "application/json", "{}", nullptr}; });
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  client.set_bearer_token_auth(token.c_str());
  BOOST_TEST(error_of(client.Get("/boom"), 500)["message"] == "internal error: kaboom");
  BOOST_TEST(client.Get("/fine")->status == 200);
}

// Past its headers a streamed answer that throws can only end its connection: out of the library's worker it ended
// the process (a token outside the tokenizer's vocabulary did, in a stream of the OpenAI endpoint).
BOOST_AUTO_TEST_CASE(a_stream_that_throws_ends_its_answer_and_the_server_goes_on) {
  HttpServer server(test_options());
  server.get("/stream", [](const HttpRequest&) {
    HttpResponse r{200, "text/event-stream", "", nullptr};
    r.stream = [](const StreamWriter& write) {
      write("data: 1\n\n");
      throw std::out_of_range("token id 151890 is not in the vocabulary");
    };
    return r;
  });
  server.get("/fine", [](const HttpRequest&) { return HttpResponse{200, "application/json", "{}", nullptr}; });
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  client.set_bearer_token_auth(token.c_str());
  client.Get("/stream");  // cut short: no result to check but that the process lives
  BOOST_TEST(client.Get("/fine")->status == 200);
}

BOOST_AUTO_TEST_CASE(route_captures_and_lower_case_headers_reach_the_handler) {
  HttpServer server(test_options());
  server.post("/items/([0-9]+)", [](const HttpRequest& r) {
    return HttpResponse{200, "text/plain", r.captures.at(0) + " " + r.header("x-thing") + " " + r.body, nullptr};
  });
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  client.set_bearer_token_auth(token.c_str());
  const auto result = client.Post("/items/42", {{"X-Thing", "yes"}}, "body", "text/plain");
  BOOST_TEST(result->body == "42 yes body");
}

// Two worker threads, both taken by silent clients: a real request still gets through once the read timeout
// has dropped them, and the silent ones see their connection closed.
BOOST_AUTO_TEST_CASE(half_open_connections_time_out_and_free_their_workers) {
  HttpServerOptions options = test_options();
  options.worker_threads = 2;
  options.read_timeout = std::chrono::milliseconds(300);
  Served served(options);
  const int a = half_open_connection(served.server.port());
  const int b = half_open_connection(served.server.port());
  const auto start = std::chrono::steady_clock::now();
  BOOST_TEST(served.client->Get("/v1/models")->status == 200);
  const auto waited = std::chrono::steady_clock::now() - start;
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() < 3000);
  BOOST_TEST(read_to_close(a) == 0);
  BOOST_TEST(read_to_close(b) == 0);
  ::close(a);
  ::close(b);
}

// A client that never sends its token may not hold a worker thread by sending a header line now and then, each
// within the read timeout: its request's line and headers have request_timeout in all.
BOOST_AUTO_TEST_CASE(a_client_trickling_its_headers_is_cut_off_at_the_request_timeout) {
  HttpServerOptions options = test_options();
  options.worker_threads = 1;
  options.read_timeout = std::chrono::milliseconds(2000);
  options.request_timeout = std::chrono::milliseconds(500);
  Served served(options);
  const int fd = connection_to(served.server.port());
  const auto start = std::chrono::steady_clock::now();
  bool cut_off = false;
  std::string line = "GET /v1/models HTTP/1.1\r\n";
  // Cut at 0.5 s, then read for 2 s more before the close (the lingering close), which the next send meets
  while (!cut_off && seconds_since(start) < 8) {
    cut_off = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL) < 0;
    line = "X-Trickle: a\r\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  BOOST_TEST(cut_off, "the server still reads the trickle after " << seconds_since(start) << " s");
  BOOST_TEST(seconds_since(start) < 6);
  BOOST_TEST(served.client->Get("/v1/models")->status == 200);  // the one worker is free again
  ::close(fd);
}

// Header lines without end, before the token: the connection ends after 64 KiB, not after the client's last byte.
BOOST_AUTO_TEST_CASE(endless_headers_before_the_token_end_the_connection_unanswered) {
  Served served;
  const int fd = connection_to(served.server.port());
  std::string request = "GET /v1/models HTTP/1.1\r\n";
  for (int i = 0; i < 20000; ++i) request += "X-Header-" + std::to_string(i) + ": some value\r\n";
  request += "\r\n";  // about 580 KB
  timeval limit{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);  // the kernel's buffers may take it all
  std::string answer;
  BOOST_TEST(read_to_close(fd, &answer) != -1, "the connection stays open");
  BOOST_TEST(answer.find("401") == std::string::npos,
             "the server read them all and answered: " << answer.substr(0, 40));
  ::close(fd);
}

// A request the library cannot parse, without a token: answered 400, and its connection ends (a client sending such
// requests now and then held a worker thread for good).
BOOST_AUTO_TEST_CASE(a_malformed_request_without_a_token_ends_its_connection) {
  Served served;
  const int fd = connection_to(served.server.port());
  BOOST_REQUIRE(::send(fd, "X\r\n\r\n", 5, 0) == 5);
  std::string answer;
  BOOST_TEST(read_to_close(fd, &answer) == 0, "the connection stays open");
  BOOST_TEST(answer.rfind("HTTP/1.1 400", 0) == 0);
  ::close(fd);
}

// A chunked body is bounded by what it carries, not by its framing: one of the limit's size in 4-byte chunks (the
// framing alone past the 64 KiB the headers may take) is served (it was cut short: 400), one a byte over it is 413, and
// one in 1-byte chunks, its framing five times its size, is 413 too (it was 400).
BOOST_AUTO_TEST_CASE(a_chunked_body_is_bounded_by_what_it_carries) {
  HttpServerOptions options = test_options();
  HttpServer server(options);
  serve_body_sizes(server);
  httplib::Client client("127.0.0.1", server.port());
  client.set_bearer_token_auth(token.c_str());
  const auto chunked = [&](std::size_t size, std::size_t chunk) {
    return client.Post(
        "/size",
        [size, chunk](std::size_t offset, httplib::DataSink& sink) {
          if (offset >= size) {
            sink.done();
            return true;
          }
          const std::string piece(std::min(chunk, size - offset), 'x');
          return sink.write(piece.data(), piece.size());
        },
        "text/plain");
  };
  const std::size_t limit = options.max_body_bytes;
  const auto whole = chunked(limit, 4);
  BOOST_REQUIRE_MESSAGE(whole, "no answer: " << httplib::to_string(whole.error()));
  BOOST_TEST(whole->body == "body of " + std::to_string(limit));
  const auto over = chunked(limit + 1, 4);
  BOOST_REQUIRE_MESSAGE(over, "no answer: " << httplib::to_string(over.error()));
  BOOST_TEST(over->status == 413);
  const auto framed = chunked(limit, 1);
  BOOST_REQUIRE_MESSAGE(framed, "no answer: " << httplib::to_string(framed.error()));
  BOOST_TEST(framed->status == 413);
}

// A body far over the limit is answered 413, which the client reads (the rest of its body is read and dropped before
// the connection closes, not left to reset it).
BOOST_AUTO_TEST_CASE(a_body_far_over_the_limit_is_answered_413_not_reset) {
  Served served;
  const auto result = served.client->Post("/v1/completions", std::string(4 << 20, 'x'), "application/json");
  BOOST_REQUIRE_MESSAGE(result, "no answer: " << httplib::to_string(result.error()));
  BOOST_TEST(result->status == 413);
  BOOST_TEST(served.client->Get("/v1/models")->status == 200);
}

// A client that asks before sending its body (Expect: 100-continue, as curl does) hears "go on" only with the token.
BOOST_AUTO_TEST_CASE(expect_100_continue_is_answered_401_without_the_token) {
  Served served;
  const int fd = connection_to(served.server.port());
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: here\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
      "Expect: 100-continue\r\n\r\n";
  BOOST_REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  std::string answer;
  read_to_close(fd, &answer);
  BOOST_TEST(answer.rfind("HTTP/1.1 401", 0) == 0, "answered: " << answer.substr(0, 30));
  ::close(fd);
}

// No answer is cut into byte ranges: a Range header gets the whole answer (the library would send a 206 of the ranges,
// for a 401 too).
BOOST_AUTO_TEST_CASE(a_range_header_gets_the_whole_answer) {
  Served served;
  const auto whole = served.client->Get("/v1/models");
  const auto ranged = served.client->Get("/v1/models", {{"Range", "bytes=0-3,0-3,0-3"}});
  BOOST_REQUIRE(ranged);
  BOOST_TEST(ranged->status == 200);
  BOOST_TEST(ranged->body == whole->body);
  httplib::Client anonymous("127.0.0.1", served.server.port());
  error_of(anonymous.Get("/v1/models", {{"Range", "bytes=0-3"}}), 401);
}

// A path with no route goes through the error formatters' patterns, and std::regex recurses once per character of it:
// a path of some 30,000 characters overflowed a worker thread's stack (rank 0's end; before the token was checked,
// for anyone who can connect). Debian's compiled cpp-httplib bounds the request's target at 8,192 bytes, far below
// that: the longest path is answered, a longer one is 414 (this fails if a library without that bound comes in).
BOOST_AUTO_TEST_CASE(the_longest_path_goes_through_the_error_patterns_and_a_longer_one_is_414) {
  HttpServerOptions options = test_options();
  options.token_in_path = true;
  options.missing_token_status = 404;
  HttpServer server(options);
  server.format_errors("(/[^/]+)?/v1/agl(/.*)?", [](const HttpRequest&, const HttpError& error) {
    return HttpResponse{error.status(), "application/json", "{\"detail\":\"formatted\"}", nullptr};
  });
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  const std::string prefix = "/" + token + "/v1/agl/";
  const auto longest = client.Get(prefix + std::string(8150 - prefix.size(), 'a'));
  BOOST_REQUIRE(longest);
  BOOST_TEST(longest->status == 404);
  BOOST_TEST(longest->body == "{\"detail\":\"formatted\"}");
  httplib::Client again("127.0.0.1", server.port());
  const auto longer = again.Get("/wrong/v1/agl/" + std::string(40000, 'a'));
  BOOST_REQUIRE(longer);
  BOOST_TEST(longer->status == 414);
}

// A handler that waits (a long poll) learns when its client has closed the connection; a client still there, even one
// that already sent its next request, is not taken for gone.
BOOST_AUTO_TEST_CASE(a_waiting_handler_sees_its_client_leave) {
  HttpServer server(test_options());
  std::atomic<double> gone_after{-1};
  server.get("/wait", [&](const HttpRequest& request) {
    const double seconds = std::stod(request.param_values("seconds").at(0));
    const auto start = std::chrono::steady_clock::now();
    for (; seconds_since(start) < seconds; std::this_thread::sleep_for(std::chrono::milliseconds(10)))
      if (request.client_gone()) {
        gone_after = seconds_since(start);
        return HttpResponse{200, "text/plain", "gone", nullptr};
      }
    return HttpResponse{200, "text/plain", "here", nullptr};
  });
  server.start();
  const std::string wait_request =
      "GET /wait?seconds=0.5 HTTP/1.1\r\nHost: here\r\nAuthorization: Bearer " + token + "\r\n\r\n";
  const int pipelined = connection_to(server.port());
  std::string last = wait_request;
  last.insert(last.find("\r\n\r\n"), "\r\nConnection: close");
  const std::string two = wait_request + last;
  BOOST_REQUIRE(::send(pipelined, two.data(), two.size(), 0) == static_cast<ssize_t>(two.size()));
  std::string answers;
  BOOST_TEST(read_to_close(pipelined, &answers) == 0);
  BOOST_TEST(answers.find("here") != answers.rfind("here"), answers);  // two answers, each "here"
  BOOST_TEST(answers.find("gone") == std::string::npos);
  BOOST_TEST(gone_after < 0);
  ::close(pipelined);

  const int leaving = connection_to(server.port());
  std::string request = wait_request;
  request.replace(request.find("0.5"), 3, "5.0");
  BOOST_REQUIRE(::send(leaving, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::close(leaving);
  const auto start = std::chrono::steady_clock::now();
  while (gone_after < 0 && seconds_since(start) < 6) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BOOST_TEST(gone_after >= 0, "the handler waited its 5 s out");
  BOOST_TEST(gone_after < 1.0);
}

// Connections past the workers and the waiting room are answered 503 at once and closed (the queue grew without
// bound: descriptors and memory for anyone who can connect); once the crowd has gone, requests are served again.
BOOST_AUTO_TEST_CASE(connections_past_the_waiting_room_are_answered_503_at_once) {
  HttpServerOptions options = test_options();
  options.worker_threads = 2;
  options.max_waiting_connections = 2;
  options.idle_timeout = options.request_timeout = std::chrono::milliseconds(60000);
  Served served(options);
  std::vector<int> crowd;
  for (int i = 0; i < 4; ++i) {  // two taken by the workers, two waiting
    crowd.push_back(connection_to(served.server.port()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto start = std::chrono::steady_clock::now();
  const int one_more = connection_to(served.server.port());
  std::string answer;
  BOOST_TEST(read_to_close(one_more, &answer) == 0, "the connection stays open");
  BOOST_TEST(answer.rfind("HTTP/1.1 503", 0) == 0, "answered: " << answer.substr(0, 40));
  BOOST_TEST(answer.find("too many connections wait") != std::string::npos);
  BOOST_TEST(seconds_since(start) < 2);
  ::close(one_more);
  for (const int fd : crowd) ::close(fd);
  int status = 0;
  for (const auto gone = std::chrono::steady_clock::now(); status != 200 && seconds_since(gone) < 3;
       std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    // The workers see the crowd's ends within a poll.
    if (const auto result = served.client->Get("/v1/models")) status = result->status;
  BOOST_TEST(status == 200);
}

// A kept-alive connection between requests held its worker until the idle timeout: an agent's client keeps two
// connections a thread, more connections than workers stalled every request past them for 30 s, and the runner
// killed healthy agents as hung. It yields its worker to a waiting connection; one that never sent a request keeps it.
BOOST_AUTO_TEST_CASE(kept_alive_connections_between_requests_yield_their_workers_to_waiting_ones) {
  HttpServerOptions options = test_options();
  options.worker_threads = 2;
  options.idle_timeout = options.request_timeout = std::chrono::milliseconds(60000);
  Served served(options);
  std::vector<std::unique_ptr<httplib::Client>> kept;
  for (int i = 0; i < 2; ++i) {  // each holds a worker, idle after its answer
    kept.push_back(std::make_unique<httplib::Client>("127.0.0.1", served.server.port()));
    kept.back()->set_bearer_token_auth(token.c_str());
    kept.back()->set_keep_alive(true);
    const auto result = kept.back()->Get("/v1/models");
    BOOST_REQUIRE((result && result->status == 200));
  }
  const auto start = std::chrono::steady_clock::now();
  httplib::Client third("127.0.0.1", served.server.port());
  third.set_bearer_token_auth(token.c_str());
  third.set_read_timeout(std::chrono::seconds(20));
  const auto result = third.Get("/v1/models");
  BOOST_TEST((result && result->status == 200));
  BOOST_TEST(seconds_since(start) < 10, "served in " << seconds_since(start) << " s, not at the idle timeout (60 s)");
  for (auto& client : kept) {  // a client whose connection yielded connects again
    const auto again = client->Get("/v1/models");
    BOOST_TEST((again && again->status == 200));
  }
}

// Idle workers are room: with no waiting room at all, a connection that finds a worker free is served.
BOOST_AUTO_TEST_CASE(a_free_worker_serves_without_a_waiting_room) {
  HttpServerOptions options = test_options();
  options.worker_threads = 2;
  options.max_waiting_connections = 0;
  Served served(options);
  for (int i = 0; i < 3; ++i) {
    const auto result = served.client->Get("/v1/models");
    BOOST_TEST((result && result->status == 200));
  }
}

// A request refused for its token: answered 401, then its connection ends (a body it sent is never read as a request).
BOOST_AUTO_TEST_CASE(a_request_refused_for_its_token_ends_its_connection) {
  Served served;
  // The client asking for the close, or not: the answer says it once either way.
  for (const std::string connection : {"keep-alive", "close"}) {
    const int fd = connection_to(served.server.port());
    const std::string request = "GET /v1/models HTTP/1.1\r\nHost: here\r\nConnection: " + connection + "\r\n\r\n";
    BOOST_REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
    std::string answer;
    BOOST_TEST(read_to_close(fd, &answer) == 0, "the connection stays open");
    BOOST_TEST(answer.rfind("HTTP/1.1 401", 0) == 0);
    BOOST_TEST(says_close(answer) == 1, connection << ": " << answer);
    ::close(fd);
  }
}

// stop() with clients still connected (one mid-request, one idle between requests, one that never sent a byte) ends
// their connections and returns, without waiting for their timeouts.
BOOST_AUTO_TEST_CASE(stop_ends_open_connections_at_once) {
  HttpServerOptions options = test_options();
  options.read_timeout = options.idle_timeout = options.request_timeout = std::chrono::milliseconds(60000);
  auto served = std::make_unique<Served>(options);
  const int mid_request = half_open_connection(served->server.port());
  const int silent = connection_to(served->server.port());
  BOOST_TEST(served->client->Get("/v1/models")->status == 200);  // its connection stays, kept alive
  std::this_thread::sleep_for(std::chrono::milliseconds(200));   // every connection taken by a worker
  const auto start = std::chrono::steady_clock::now();
  served->server.stop();
  BOOST_TEST(seconds_since(start) < 5);
  BOOST_TEST(read_to_close(mid_request) == 0);
  BOOST_TEST(read_to_close(silent) == 0);
  ::close(mid_request);
  ::close(silent);
}

// A server stopped as soon as it started (a runner whose set-up fails right after) stops: the stop comes after the
// listening loop has begun, where the library would otherwise miss it and the join wait for ever.
BOOST_AUTO_TEST_CASE(a_server_stopped_right_after_it_started_stops) {
  for (int i = 0; i < 200; ++i) {
    HttpServer server(test_options());
    server.start();
    server.stop();
  }
}

BOOST_AUTO_TEST_CASE(a_server_without_a_token_is_refused) {
  BOOST_CHECK_THROW(HttpServer(HttpServerOptions{}), UsageError);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace arclight::serve::testing
