#pragma once
// JSON from outside (a request's body, a model's tool call, a chat's messages, a model directory's tokenizer files),
// parsed with a bound on its nesting: nlohmann's parser is iterative, but dump, copy and comparison recurse once per
// level, and a 200 KB body nested 100,000 deep overflowed a thread's stack. `Json` is the caller's nlohmann::json or
// ordered_json (this header includes no JSON library).
#include <string_view>

namespace arclight::text {

inline constexpr int max_json_depth = 256;

// The value, or a discarded one for text that is not JSON or nests deeper than max_json_depth.
template <class Json>
Json parse_json(std::string_view text) {
  struct TooDeep {};
  try {
    return Json::parse(
        text.begin(), text.end(),
        [](int depth, typename Json::parse_event_t, Json&) {
          if (depth > max_json_depth) throw TooDeep{};
          return true;
        },
        false);
  } catch (const TooDeep&) {
    return Json(Json::value_t::discarded);
  }
}

}  // namespace arclight::text
