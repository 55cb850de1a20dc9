// The HTTP server over cpp-httplib (Debian's compiled library): its thread pool serves each connection on a worker
// thread; the token check runs before a body is read, bodies are read through a content reader, which bounds what
// the library inflates, and a body no route reads is refused unread.
#include "arclight/serve/http_server.hpp"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <regex>
#include <system_error>
#include <thread>
#include <utility>

#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/core/utf8.hpp"
#include "guarded_server.hpp"

namespace arclight::serve {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Compares in time independent of where the strings differ: the token is a secret.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char differ = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) differ |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return differ == 0;
}

struct BasicAuth {
  std::string user, password;
};

// The user and password of `Authorization: Basic base64(user:password)`; nullopt when the header is not that. Clients
// that keep credentials in a URL's user info (aiohttp, requests: http://user:<token>@host/) send it so.
std::optional<BasicAuth> basic_auth(const std::string& header) {
  if (header.rfind("Basic ", 0) != 0) return std::nullopt;
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string decoded;
  std::uint32_t bits = 0;
  int count = 0;
  for (std::size_t i = 6; i < header.size() && header[i] != '='; ++i) {
    const std::size_t value = alphabet.find(header[i]);
    if (value == std::string::npos) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(value);
    if ((count += 6) >= 8) decoded.push_back(static_cast<char>((bits >> (count -= 8)) & 0xFF));
  }
  const std::size_t colon = decoded.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return BasicAuth{decoded.substr(0, colon), decoded.substr(colon + 1)};
}

std::string status_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// The request bodies the library inflates before a handler sees them (cpp-httplib 0.11: gzip and deflate, and any
// encoding that names br).
bool inflated_by_library(const std::string& content_encoding) {
  return content_encoding == "gzip" || content_encoding == "deflate" ||
         content_encoding.find("br") != std::string::npos;
}

HttpRequest request_of(const httplib::Request& req) {
  HttpRequest out{req.method, req.path, {}, {}, {}, req.body, {}, {}};
  for (const auto& [key, value] : req.params) out.params.emplace(key, value);
  for (std::size_t i = 1; i < req.matches.size(); ++i) out.captures.push_back(req.matches[i].str());
  for (const auto& [name, value] : req.headers) {
    std::string key = lower(name);
    if (key == "content-encoding" && inflated_by_library(value)) continue;
    out.headers.emplace(std::move(key), value);
  }
  if (const auto basic = basic_auth(req.get_header_value("Authorization"))) out.basic_auth_user = basic->user;
  out.connection_gone = &GuardedServer::client_gone;
  return out;
}

void answer(httplib::Response& res, HttpResponse response) {
  res.status = response.status;
  for (const auto& [name, value] : response.headers) res.set_header(name.c_str(), value);
  if (!response.stream) {
    res.set_content(response.body, response.content_type.c_str());
    return;
  }
  auto stream = std::move(response.stream);
  res.set_chunked_content_provider(response.content_type, [stream](std::size_t, httplib::DataSink& sink) {
    try {
      stream([&sink](std::string_view piece) { return sink.is_writable() && sink.write(piece.data(), piece.size()); });
    } catch (const std::exception& e) {
      // Past the headers only the connection's end can tell the client; out of here it would end the process.
      log::warn("http: a streamed answer failed: ", e.what());
      return false;
    }
    sink.done();
    return true;
  });
}

void answer_json_error(httplib::Response& res, const HttpError& error) {
  res.status = error.status();
  res.set_content(error_body(error), "application/json");
}

// Reads a body through the library's decoder (which inflates it) keeping at most `limit` bytes of what comes out:
// the library bounds only the bytes that arrive, and a few kilobytes of gzip inflate to gigabytes. A body that does not
// come whole within `timeout` (the stream cuts the read off) is 408.
std::optional<HttpError> read_body(const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader, std::size_t limit,
                                   std::chrono::milliseconds timeout, std::string& body) {
  bool over = false;
  const auto keep = [&](const char* data, std::size_t size) {
    if (body.size() + size > limit) return !(over = true);
    body.append(data, size);
    return true;
  };
  if (req.is_multipart_form_data()) {  // read (bounded) to keep the connection in step, then refused
    const bool read = reader([](const httplib::MultipartFormData&) { return true; }, keep);
    if (read) return HttpError(415, "multipart bodies are not taken");
  } else if (reader(keep)) {
    return std::nullopt;
  }
  if (over || res.status == 413 || GuardedServer::body_too_large()) return HttpError(413, "request body too large");
  if (GuardedServer::body_too_slow())
    return HttpError(408, log::concat("the request's body did not come whole within ", timeout.count() / 1000.0, " s"),
                     "invalid_request_error");
  return HttpError(400, "a body that could not be read (cut short, or one that does not inflate)");
}

}  // namespace

std::string HttpRequest::header(const std::string& lower_case_name) const {
  const auto it = headers.find(lower_case_name);
  return it == headers.end() ? "" : it->second;
}

std::vector<std::string> HttpRequest::param_values(const std::string& key) const {
  std::vector<std::string> values;
  for (auto [it, end] = params.equal_range(key); it != end; ++it) values.push_back(it->second);
  return values;
}

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o) : options(std::move(o)), server(options) {}
  ~Impl() {
    if (!pool) return;  // start() made it but never listened
    pool->shutdown();
    delete pool;
  }

  HttpServerOptions options;
  GuardedServer server;
  std::thread listener;
  std::atomic<bool> listening_ended{false};
  std::atomic<int> socket{-1};
  int port = 0;
  httplib::TaskQueue* pool = nullptr;  // made by start() on its caller's thread; the library's listen takes it
  std::vector<std::pair<std::regex, HttpErrorFormatter>> formatters;
  std::vector<std::regex> post_routes;  // as the library matches them: regex_match on the path

  // The path as answers and logs show it: a secret in its first segment stays out of them.
  std::string path_shown(const std::string& path) const {
    if (!options.token_in_path || path.size() < 2) return path;
    const std::size_t end = std::min(path.find('/', 1), path.size());
    if (!same_secret(std::string_view(path).substr(1, end - 1), options.bearer_token)) return path;
    return "/<secret>" + path.substr(end);
  }

  // In the shape of the first formatter whose pattern matches the path, else OpenAI's.
  void answer_error(httplib::Response& res, const HttpRequest& request, const HttpError& error) const {
    for (const auto& [pattern, formatter] : formatters) {
      if (!std::regex_match(request.path, pattern)) continue;
      try {
        return answer(res, formatter(request, error));
      } catch (const std::exception& e) {
        log::warn("http: the error formatter of ", path_shown(request.path), " failed: ", e.what());
        break;
      }
    }
    answer_json_error(res, error);
  }

  void serve(const HttpHandler& handler, const HttpRequest& request, httplib::Response& res) const {
    try {
      answer(res, handler(request));
    } catch (const HttpError& e) {
      answer_error(res, request, e);
    } catch (const std::exception& e) {
      log::warn("http: ", request.method, " ", path_shown(request.path), ": ", e.what());
      answer_error(res, request, HttpError(500, std::string("internal error: ") + e.what(), "server_error"));
    }
  }

  httplib::Server::Handler wrap(HttpHandler handler) const {
    return [this, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
      serve(handler, request_of(req), res);
    };
  }

  httplib::Server::HandlerWithContentReader wrap_with_body(HttpHandler handler) const {
    return [this, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                                const httplib::ContentReader& reader) {
      HttpRequest request = request_of(req);
      // Neither length nor chunks: no body (RFC 9112, 6.3), where the library would read one until the client closed.
      const bool has_body = req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
      if (const auto error =
              has_body ? read_body(req, res, reader, options.max_body_bytes, options.body_timeout, request.body)
                       : std::nullopt) {
        GuardedServer::body_left_unread();  // what is left of it must not be read as the next request
        return answer_error(res, request, *error);
      }
      serve(handler, request, res);
    };
  }

  bool authenticated(const httplib::Request& req) const {
    const std::string given = req.get_header_value("Authorization");
    if (given.rfind("Bearer ", 0) == 0 && same_secret(given.substr(7), options.bearer_token)) return true;
    if (const auto basic = basic_auth(given); basic && same_secret(basic->password, options.bearer_token)) return true;
    if (!options.token_in_path || req.path.size() < 2) return false;
    const std::size_t end = req.path.find('/', 1);
    return end != std::string::npos && same_secret(std::string_view(req.path).substr(1, end - 1), options.bearer_token);
  }

  // A request whose body no route of ours would read: the library would read it itself, inflating a compressed one
  // without bound (a 6.5 KB brotli body became gigabytes). Only POST routes read bodies, through read_body.
  std::optional<HttpError> unrouted_body(const httplib::Request& req) const {
    if (req.method == "GET" || req.method == "HEAD") return std::nullopt;  // the library reads no body of theirs
    if (req.method != "POST")
      return HttpError(405, "method " + req.method + " not allowed (GET and POST are served)", "invalid_request_error");
    for (const std::regex& route : post_routes)
      if (std::regex_match(req.path, route)) return std::nullopt;
    return HttpError(404, "no route for POST " + path_shown(req.path), "not_found_error");
  }

  // A body whose end nothing marks: a Transfer-Encoding other than chunked alone (gzip, identity, "gzip, chunked",
  // which the library does not decode) and no length, which the library read until the client closed. RFC 9112, 6.3:
  // 400, and the connection closes.
  static std::optional<HttpError> unframed_body(const httplib::Request& req) {
    if (!req.has_header("Transfer-Encoding")) return std::nullopt;
    const std::string coding = req.get_header_value("Transfer-Encoding");
    if (lower(coding) == "chunked") return std::nullopt;
    return HttpError(400,
                     "Transfer-Encoding '" + printable(coding, 64) +
                         "' is not served: send the body with Content-Length or chunked alone",
                     "invalid_request_error");
  }

  // The answer to a request without the token.
  void refuse(httplib::Response& res) const {
    if (options.missing_token_status == 401)
      answer_json_error(res, HttpError(401, "missing or wrong bearer token (Authorization: Bearer <token>)",
                                       "authentication_error", "", "invalid_api_key"));
    else  // as if nothing were served here (FastAPI's answer, as Agent Lightning's server gives it), whatever the path:
          // a shape by path told what is served, and matching the error patterns, which hold the secret, timed it
      answer(res,
             HttpResponse{options.missing_token_status, "application/json", R"({"detail": "Not Found"})", nullptr});
  }

  void configure() {
    server.new_task_queue = [this] { return std::exchange(pool, nullptr); };
    server.set_payload_max_length(options.max_body_bytes);
    server.set_read_timeout(options.read_timeout);
    server.set_write_timeout(options.write_timeout);
    server.set_keep_alive_timeout(std::max<time_t>(1, options.idle_timeout.count() / 1000));
    server.set_keep_alive_max_count(100000);
    // An answer goes out as two writes (headers, body): with Nagle's algorithm the body would wait for the client's
    // delayed ACK, 40 ms on every request of a kept-alive connection (scripts/bench.sh agl).
    server.set_tcp_nodelay(true);
    server.set_socket_options([this](int fd) {
      const int yes = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      socket = fd;
    });
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!authenticated(req)) {
        refuse(res);
        return httplib::Server::HandlerResponse::Handled;
      }
      std::optional<HttpError> error = unrouted_body(req);
      if (!error) error = unframed_body(req);
      if (error) {
        GuardedServer::body_left_unread();
        answer_error(res, request_of(req), *error);
        return httplib::Server::HandlerResponse::Handled;
      }
      // The library reads no body of a GET or HEAD: one sent all the same (curl -X GET -d, requests.get(json=...))
      // was read as the next request on the connection, and the client's next call got a 400. Answered, and the
      // connection ends after the answer.
      if ((req.method == "GET" || req.method == "HEAD") &&
          (std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > 0 ||
           req.has_header("Transfer-Encoding")))
        GuardedServer::body_left_unread();
      GuardedServer::authenticated();  // its body may come now
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // The library says Connection: close on a connection's last request or where the client asked; a connection that
    // ends after this answer for another reason (no token, a body left unread, a read cut off) says so too.
    server.set_post_routing_handler([](const httplib::Request& req, httplib::Response& res) {
      if (GuardedServer::ends_connection_unannounced() && req.get_header_value("Connection") != "close") {
        res.headers.erase("Keep-Alive");  // the library's, set before this handler runs
        res.set_header("Connection", "close");
      }
    });
    // A client that asks before sending its body (curl: Expect: 100-continue) is told to go on only with the token;
    // the library asks this before the pre-routing handler.
    server.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (authenticated(req)) return 100;
      refuse(res);
      return res.status;
    });
    // The library's own answers (no route, a body too large, a bad request line) get a JSON body too.
    server.set_error_handler(
        httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty() || res.content_provider_) return httplib::Server::HandlerResponse::Unhandled;
          const std::string message = res.status == 404   ? "no route for " + req.method + " " + path_shown(req.path)
                                      : res.status == 413 ? "request body too large"
                                                          : log::concat("HTTP error ", res.status);
          answer_error(res, request_of(req), HttpError(res.status, message, status_type(res.status)));
          return httplib::Server::HandlerResponse::Handled;
        }));
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      answer_json_error(res, HttpError(500, "internal error", "server_error"));
    });
  }
};

HttpServer::HttpServer(HttpServerOptions options) {
  if (options.bearer_token.empty()) throw UsageError("http server: a bearer token is required");
  if (options.worker_threads < 1 || options.max_waiting_connections < 0)
    throw UsageError("http server: worker_threads must be at least 1 and max_waiting_connections not negative");
  impl_ = std::make_unique<Impl>(std::move(options));
  impl_->configure();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::get(const std::string& pattern, HttpHandler handler) {
  impl_->server.Get(pattern, impl_->wrap(std::move(handler)));
}

void HttpServer::post(const std::string& pattern, HttpHandler handler) {
  impl_->post_routes.emplace_back(pattern);
  impl_->server.Post(pattern, impl_->wrap_with_body(std::move(handler)));
}

void HttpServer::format_errors(const std::string& pattern, HttpErrorFormatter formatter) {
  impl_->formatters.emplace_back(std::regex(pattern), std::move(formatter));
}

int HttpServer::bind() {
  if (impl_->port > 0) return impl_->port;
  const HttpServerOptions& o = impl_->options;
  const int port =
      o.port == 0 ? impl_->server.bind_to_any_port(o.host) : (impl_->server.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) throw Error(log::concat("http server: cannot listen on ", o.host, ":", o.port));
  // The library listens with a backlog of 5: hundreds of clients connecting at once would see dropped SYNs and
  // retry after a second. Listening again on the bound socket raises the backlog.
  ::listen(impl_->socket, SOMAXCONN);
  impl_->port = port;
  return port;
}

void HttpServer::start() {
  bind();
  // Here, not on the listening thread where the library would make it: threads that cannot start (a limit on a
  // user's processes) are an error of start(), not an exception that ends the program on a thread of its own.
  const auto threads = static_cast<std::size_t>(impl_->options.worker_threads);
  try {
    impl_->pool = impl_->server.new_pool(threads, static_cast<std::size_t>(impl_->options.max_waiting_connections));
  } catch (const std::system_error& e) {
    throw Error(log::concat("http server on ", impl_->options.host, ":", impl_->port, ": cannot start ", threads,
                            " worker threads: ", e.what()));
  }
  impl_->listener = std::thread([this] {
    impl_->server.listen_after_bind();
    impl_->listening_ended = true;
  });
  // The library's stop() does nothing before its loop has begun, and stop()'s join would then wait for ever (a
  // constructor that fails right after start(), say): start() returns once the loop runs.
  while (!impl_->server.is_running() && !impl_->listening_ended)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  log::debug("http: listening on ", impl_->options.host, ":", impl_->port);
}

void HttpServer::stop() {
  if (!impl_->listener.joinable()) return;
  impl_->server.stop();
  impl_->server.close_connections();  // no client keeps the pool's threads, and so the join, waiting
  impl_->listener.join();
}

int HttpServer::port() const { return impl_->port; }

const HttpServerOptions& HttpServer::options() const { return impl_->options; }

std::string HttpServer::token_prefix_pattern() const {
  // The token is the job's hex secret in practice; anything else is matched literally.
  std::string quoted;
  for (char c : impl_->options.bearer_token) {
    if (!std::isalnum(static_cast<unsigned char>(c))) quoted += '\\';
    quoted += c;
  }
  return impl_->options.token_in_path ? "(?:/" + quoted + ")?" : "";
}

std::string url_host(const std::string& host, bool clients_on_this_host) {
  if (clients_on_this_host && host == "0.0.0.0") return "127.0.0.1";
  if (clients_on_this_host && host == "::") return "[::1]";
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    return gethostname(name, sizeof name - 1) == 0 ? name : "127.0.0.1";
  }
  return host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
}

}  // namespace arclight::serve
