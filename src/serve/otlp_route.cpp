// POST /v1/traces over the decoder of otlp.cpp (apart, so that the decoder's fuzzer builds without the HTTP server).
#include "otlp.hpp"

namespace arclight::serve {

void add_otlp_route(HttpServer& server, std::function<void(std::vector<Json>)> ingest, OtlpOptions options) {
  // As Agent Lightning answers: protobuf, gzipped when the client takes gzip.
  auto reply = [](const HttpRequest& request, int status, std::string body) {
    HttpResponse response{status, std::string(otlp_content_type), std::move(body), nullptr, {}};
    if (accepts_gzip(request.header("accept-encoding"))) {
      response.body = gzip_compress(response.body);
      response.headers["Content-Encoding"] = "gzip";
    }
    return response;
  };
  server.post(options.path, [ingest = std::move(ingest), options, reply](const HttpRequest& request) {
    std::vector<Json> spans;
    try {
      spans =
          decode_otlp_traces(request.body, request.header("content-type"), request.header("content-encoding"), options);
    } catch (const OtlpError& e) {
      throw HttpError(e.status(), e.what());
    }
    if (!spans.empty()) ingest(std::move(spans));
    return reply(request, 200, otlp_export_response());
  });
  server.format_errors(options.error_path, [reply](const HttpRequest& request, const HttpError& error) {
    return reply(request, error.status(), otlp_error_status(error.what()));
  });
}

}  // namespace arclight::serve
