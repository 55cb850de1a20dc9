// The OpenAI request parser on any bytes: a typed request or HttpError 400, nothing else (no other exception, no
// crash, no undefined behaviour).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "openai_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    arclight::serve::parse_chat_request(body);
  } catch (const arclight::serve::HttpError& e) {
    if (e.status() != 400) __builtin_trap();
  }
  try {
    arclight::serve::parse_completion_request(body);
  } catch (const arclight::serve::HttpError& e) {
    if (e.status() != 400) __builtin_trap();
  }
  return 0;
}
