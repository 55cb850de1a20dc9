#pragma once
// What the answer readers of the endpoint share (serve-private): the reasoning tags of Qwen3 and DeepSeek R1, and
// where a tail that may be the start of a tag begins (a stream holds it back until the text after it tells).
#include <algorithm>
#include <string_view>

namespace arclight::serve {

constexpr std::string_view think_open = "<think>";
constexpr std::string_view think_close = "</think>";

// Where a tail that may be the start of `tag` begins; the text's end where there is none.
inline std::size_t held_tail(std::string_view text, std::string_view tag) {
  for (std::size_t keep = std::min(text.size(), tag.size() - 1); keep > 0; --keep)
    if (text.substr(text.size() - keep) == tag.substr(0, keep)) return text.size() - keep;
  return text.size();
}

}  // namespace arclight::serve
