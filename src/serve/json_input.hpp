#pragma once
// JSON from outside (a request's body, a model's tool call), parsed with a bound on its nesting: nlohmann's parser is
// iterative, but dump, copy and comparison recurse once per level, and a 200 KB body nested 100,000 deep overflowed a
// server thread's stack (the job's end). Private to the serve module.
#include <nlohmann/json.hpp>

#include <string_view>

namespace arclight::serve {

inline constexpr int max_json_depth = 256;

// The value, or a discarded one for text that is not JSON or nests deeper than max_json_depth.
template <class Json = nlohmann::json>
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

}  // namespace arclight::serve
