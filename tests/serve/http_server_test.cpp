// The HTTP server's guards, over real sockets: the token, the body limit, timeouts, JSON errors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include "fakes.hpp"

namespace arclight::serve::testing {
namespace {

// A connection that sends half a request line and then nothing.
int half_open_connection(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  BOOST_REQUIRE(::send(fd, "POST /v1/completions HTT", 24, 0) == 24);
  return fd;
}

// Reads until the server closes the connection (0) or 3 s pass (-1).
long read_to_close(int fd) {
  timeval limit{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  char buffer[512];
  long got;
  while ((got = ::recv(fd, buffer, sizeof buffer, 0)) > 0) {
  }
  return got;
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
