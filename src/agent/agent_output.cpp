#include "agent_output.hpp"

#include <algorithm>

#include "arclight/core/utf8.hpp"

namespace arclight::agent {
namespace {

// Where the escape sequence that begins at `at` (an ESC) ends, its last byte (ECMA-48): ESC [ parameters
// intermediates final (CSI: colours, cursor moves); ESC ] P ^ _ up to BEL or ESC \ (a title, a hyperlink); ESC
// intermediates final (ESC ( B of `tput sgr0`). An ESC before a byte that begins none of these goes alone.
std::size_t escape_end(std::string_view line, std::size_t at) {
  const auto byte = [&](std::size_t i) { return i < line.size() ? static_cast<unsigned char>(line[i]) : 0; };
  std::size_t end = at + 1;
  const unsigned char kind = byte(end);
  if (kind == '[') {
    do ++end;
    while (end < line.size() && !(byte(end) >= 0x40 && byte(end) <= 0x7e));
  } else if (kind == ']' || kind == 'P' || kind == '^' || kind == '_') {
    while (++end < line.size() && byte(end) != 0x07 && !(byte(end) == 0x1b && byte(end + 1) == '\\')) {
    }
    if (byte(end) == 0x1b) ++end;  // the string terminator's second byte
  } else if (kind >= 0x20 && kind <= 0x7e) {
    while (end < line.size() && byte(end) >= 0x20 && byte(end) <= 0x2f) ++end;
  } else {
    return at;
  }
  return std::min(end, line.size());
}

}  // namespace

std::size_t shown_from(std::string_view line) {
  const auto last_text = line.find_last_not_of('\r');
  if (last_text == std::string_view::npos) return 0;
  const auto at = line.rfind('\r', last_text);
  return at == std::string_view::npos ? 0 : at + 1;
}

std::string printable(std::string_view line) {
  line.remove_prefix(shown_from(line));
  while (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF, CRCRLF (through a pty)
  std::string shown;
  shown.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b')
      i = escape_end(line, i);
    else
      shown += line[i];
  }
  return arclight::printable(shown);
}

std::size_t piece_end(std::string_view pending) {
  std::size_t cut = pending.size();
  if (const auto esc = pending.rfind('\x1b'); esc != std::string_view::npos && pending.size() - esc < 256) cut = esc;
  std::size_t lead = cut;  // the start of the last character before the cut
  while (lead > 0 && cut - lead < 3 && (static_cast<unsigned char>(pending[lead - 1]) & 0xc0) == 0x80) --lead;
  if (lead > 0) {
    const auto c = static_cast<unsigned char>(pending[lead - 1]);
    const std::size_t length = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (length > 1 && cut - (lead - 1) < length) cut = lead - 1;  // a character not whole yet
  }
  return cut == 0 ? pending.size() : cut;
}

}  // namespace arclight::agent
