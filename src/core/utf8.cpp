#include "arclight/core/utf8.hpp"

#include <algorithm>
#include <cstdint>

namespace arclight {

std::size_t utf8_sequence_length(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(at);
  if (lead < 0x80) return 1;
  std::size_t n;
  std::uint32_t cp;
  if (lead >= 0xC2 && lead <= 0xDF)
    n = 2, cp = lead & 0x1F;
  else if (lead >= 0xE0 && lead <= 0xEF)
    n = 3, cp = lead & 0x0F;
  else if (lead >= 0xF0 && lead <= 0xF4)
    n = 4, cp = lead & 0x07;
  else
    return 0;
  if (at + n > text.size()) return 0;
  for (std::size_t i = 1; i < n; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(at + i) & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
  return overlong || surrogate || cp > 0x10FFFF ? 0 : n;
}

bool valid_utf8(std::string_view text) {
  for (std::size_t at = 0, n; at < text.size(); at += n)
    if ((n = utf8_sequence_length(text, at)) == 0) return false;
  return true;
}

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  for (std::size_t at = 0, n; at < text.size(); at += n) {
    const std::size_t valid = utf8_sequence_length(text, at);
    n = valid > 0 ? valid : 1;  // a byte that starts nothing well-formed stands alone
    if (at + n > max_bytes) break;
    const auto lead = static_cast<std::uint8_t>(text[at]);
    const bool c0_or_del = valid == 1 && ((lead < 0x20 && lead != '\t') || lead == 0x7f);
    const bool c1 = valid == 2 && lead == 0xC2 && static_cast<std::uint8_t>(text[at + 1]) < 0xA0;
    if (valid == 0 || c0_or_del || c1)
      out += '?';
    else
      out.append(text.substr(at, n));
  }
  return out;
}

}  // namespace arclight
