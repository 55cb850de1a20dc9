// OpenAI's error shape, apart from the server so that the request parser's fuzzer builds without the HTTP library.
#include <nlohmann/json.hpp>

#include "arclight/serve/http_server.hpp"

namespace arclight::serve {

HttpError::HttpError(int status, const std::string& message, std::string type, std::string param, std::string code)
    : std::runtime_error(message),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

std::string error_body(const HttpError& error) {
  const auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  nlohmann::json body = {{"error",
                          {{"message", error.what()},
                           {"type", error.type()},
                           {"param", or_null(error.param())},
                           {"code", or_null(error.code())}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace arclight::serve
