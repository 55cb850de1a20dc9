#pragma once
// An HTTP server for JSON routes: every request needs the token (a bearer token, or basic auth's password, else 401;
// or the path's first segment where options allow), bodies are bounded (413), a silent or half-open connection
// times out (each read has its deadline; a request's line and headers come within request_timeout and 64 KiB until
// its token is checked, so a client trickling bytes or sending endless headers holds a worker thread no longer; a
// request refused for its token ends its connection), and errors are JSON in OpenAI's shape. Handlers run on a pool
// of worker threads; a handler's exception is a 500 JSON answer, never the server's end. stop() ends every
// connection. The HTTP library stays inside.
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace arclight::serve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;              // 0: any free port (HttpServer::port() tells which)
  std::string bearer_token;  // required: empty is refused at start
  // The token may also come as the path's first segment (/<token>/...: Agent Lightning's client keeps a base URL's
  // path as a prefix); routes that take it so match it themselves (token_prefix_pattern).
  bool token_in_path = false;
  int missing_token_status = 401;  // 404 hides that anything is served here
  std::size_t max_body_bytes = 8 << 20;
  std::chrono::milliseconds read_timeout{5000};      // per read of a request: a silent client is dropped after it
  std::chrono::milliseconds write_timeout{5000};     // per write of an answer: a client that stops reading
  std::chrono::milliseconds idle_timeout{5000};      // a kept-alive connection with no request
  std::chrono::milliseconds request_timeout{10000};  // a request's line and headers, until its token is checked
  std::chrono::milliseconds body_timeout{60000};     // a request's whole body, once its token is checked: else 408
  int worker_threads = 64;                           // connections served at once (the endpoint wants hundreds)
  // Connections that wait for a worker thread; one more is answered 503 and closed at once, so that no client, with
  // or without the token, makes the rank hold file descriptors and memory without bound.
  int max_waiting_connections = 256;
};

struct HttpRequest {
  std::string method;
  std::string path;
  std::vector<std::string> captures;           // the route pattern's groups, in order ("" for one that did not match)
  std::map<std::string, std::string> headers;  // names in lower case
  std::multimap<std::string, std::string> params;  // the query string's, decoded; a repeated key repeats
  // Decoded: the server inflates a body sent with Content-Encoding gzip, deflate or br (bounded by max_body_bytes:
  // past it, 413; one that does not inflate, 400; one cut short passes as what it holds) and then leaves that header
  // out of `headers`.
  std::string body;
  // The user name of Basic authentication (what a client sent before its password, the token), "" without it: runner
  // ranks give each agent process its own (its worker id), so a request says which process sent it.
  std::string basic_auth_user;
  // True once the client has closed its connection (or half-closed it; HTTP clients do not), for a handler that waits
  // (a long poll) to stop early and hand out nothing. Ask it on the thread the handler runs on. Always false for a
  // request that came over no connection (tests), whose connection_gone is empty.
  bool client_gone() const { return connection_gone && connection_gone(); }
  std::function<bool()> connection_gone;
  std::string header(const std::string& lower_case_name) const;  // "" when absent
  std::vector<std::string> param_values(const std::string& key) const;
};

// Writes one piece of a streamed answer; false once the client is gone.
using StreamWriter = std::function<bool(std::string_view)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // When set, the answer is streamed (chunked) instead: the function writes its pieces, then returns.
  std::function<void(const StreamWriter&)> stream;
  std::map<std::string, std::string> headers = {};  // more headers of the answer (Content-Encoding, ...)
};

// An error a handler throws to answer with it: OpenAI's shape {"error": {message, type, param, code}}.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message, std::string type = "invalid_request_error", std::string param = "",
            std::string code = "");
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string type_, param_, code_;
};

// The host part of a URL that reaches a server listening on `host`: an IPv6 address in brackets; where it listens on
// every address (0.0.0.0, ::), this host's name, or loopback for clients on this host (no name to resolve).
std::string url_host(const std::string& host, bool clients_on_this_host = false);

// OpenAI's error body; an empty param or code is null.
std::string error_body(const HttpError& error);

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// Writes an error answer in a protocol's own shape.
using HttpErrorFormatter = std::function<HttpResponse(const HttpRequest&, const HttpError&)>;

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // `pattern` is a regular expression matched against the whole path; its groups become HttpRequest::captures.
  // Routes are added before start().
  void get(const std::string& pattern, HttpHandler handler);
  void post(const std::string& pattern, HttpHandler handler);
  // Errors on paths that match `pattern` (a handler's HttpError or exception, and the server's own: a body too large
  // or that does not decode) are answered by `formatter` instead of in OpenAI's shape. Added before start().
  void format_errors(const std::string& pattern, HttpErrorFormatter formatter);

  // Binds the port (once; throws Error when it cannot) and returns it, for routes added after that need to name it.
  int bind();
  // Binds, unless bind() did, and serves on threads of its own.
  void start();
  void stop();  // waits for the listening thread; idempotent
  int port() const;
  const HttpServerOptions& options() const;
  // A route pattern's optional first segment, the token, where options().token_in_path (else "").
  std::string token_prefix_pattern() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arclight::serve
