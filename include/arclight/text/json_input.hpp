#pragma once
// JSON from outside (a request's body, a model's tool call, a chat's messages, a model directory's tokenizer files),
// parsed with a bound on its nesting: nlohmann's parser is iterative, but dump, copy and comparison recurse once per
// level, and a 200 KB body nested 100,000 deep overflowed a thread's stack. `Json` is the caller's nlohmann::json or
// ordered_json (this header includes no JSON library).
#include <string_view>

namespace arclight::text {

inline constexpr int max_json_depth = 256;

// Whether `text`'s brackets, outside its strings, nest deeper than max_json_depth (text that is not JSON may pass:
// the parse refuses it).
inline bool nests_too_deep(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_json_depth) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

// The value, or a discarded one for text that is not JSON or nests deeper than max_json_depth. The depth is checked
// apart: nlohmann's parser, given a callback, looks over the whole enclosing container at every object's end, and
// 480 KB of `[{}, {}, ...]` took 19 s (a body of megabytes, hours of a server's thread).
template <class Json>
Json parse_json(std::string_view text) {
  if (nests_too_deep(text)) return Json(Json::value_t::discarded);
  return Json::parse(text.begin(), text.end(), nullptr, false);
}

}  // namespace arclight::text
