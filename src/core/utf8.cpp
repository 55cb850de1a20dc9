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

namespace {
// Characters that make a viewer show a line other than it is: the line and paragraph separators (U+2028, U+2029:
// a new line to some), and the bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to
// U+2069), which reorder what follows them (Trojan Source, CVE-2021-42574).
bool reorders_or_breaks(std::string_view c) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(c[i]); };
  if (c.size() == 2) return byte(0) == 0xD8 && byte(1) == 0x9C;
  if (c.size() != 3 || byte(0) != 0xE2) return false;
  if (byte(1) == 0x80) return byte(2) == 0x8E || byte(2) == 0x8F || (byte(2) >= 0xA8 && byte(2) <= 0xAE);
  return byte(1) == 0x81 && byte(2) >= 0xA6 && byte(2) <= 0xA9;
}
}  // namespace

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
    if (valid == 0 || c0_or_del || c1 || reorders_or_breaks(text.substr(at, valid)))
      out += '?';
    else
      out.append(text.substr(at, n));
  }
  return out;
}

}  // namespace arclight
