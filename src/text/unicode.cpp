#include "unicode.hpp"

#include <stdexcept>

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

namespace arclight::text {
namespace {

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the others for 256, 257, ... in order.
struct ByteLevelAlphabet {
  std::array<std::uint32_t, 256> char_of_byte{};
  std::array<std::int16_t, 512> byte_of_char{};  // every character of the alphabet is below 512; -1: not one
  ByteLevelAlphabet() {
    byte_of_char.fill(-1);
    std::uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      char_of_byte[b] = printable ? b : next++;
      byte_of_char[char_of_byte[b]] = static_cast<std::int16_t>(b);
    }
  }
};
const ByteLevelAlphabet& alphabet() {
  static const ByteLevelAlphabet a;
  return a;
}

void append_nfc(std::string& out, std::string_view valid_utf8) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU NFC normalizer: ") + u_errorName(status));
  icu::StringByteSink<std::string> sink(&out);
  nfc->normalizeUTF8(0, icu::StringPiece(valid_utf8.data(), static_cast<std::int32_t>(valid_utf8.size())), sink,
                     nullptr, status);
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU NFC normalization: ") + u_errorName(status));
}

}  // namespace

std::string to_nfc(std::string_view text) {
  // Below U+0300 (lead bytes under 0xCC) every character is NFC-stable whatever follows: nothing to do.
  bool may_change = false;
  for (char c : text) may_change |= static_cast<std::uint8_t>(c) >= 0xCC;
  if (!may_change) return std::string(text);
  std::string out;
  out.reserve(text.size());
  std::size_t run = 0, at = 0;
  while (at < text.size()) {
    const std::size_t n = utf8_sequence_length(text, at);
    if (n > 0) {
      at += n;
      continue;
    }
    append_nfc(out, text.substr(run, at - run));
    out += text[at];  // an invalid byte, kept
    run = ++at;
  }
  append_nfc(out, text.substr(run));
  return out;
}

std::optional<std::string> bytes_of_byte_level(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (std::size_t at = 0; at < token.size();) {
    const std::size_t n = utf8_sequence_length(token, at);
    if (n == 0 || n > 2) return std::nullopt;  // the alphabet is below U+0800: one or two bytes each
    const auto b0 = static_cast<std::uint8_t>(token[at]);
    const std::uint32_t cp = n == 1 ? b0 : ((b0 & 0x1F) << 6) | (static_cast<std::uint8_t>(token[at + 1]) & 0x3F);
    if (cp >= 512 || alphabet().byte_of_char[cp] < 0) return std::nullopt;
    bytes += static_cast<char>(alphabet().byte_of_char[cp]);
    at += n;
  }
  return bytes;
}

std::string byte_level_char(std::uint8_t byte) {
  std::string out;
  append_utf8(out, alphabet().char_of_byte[byte]);
  return out;
}

namespace {
constexpr std::string_view white_space[] = {"\t",     "\n",     "\v",     "\f",     "\r",     " ",      "\u0085",
                                            "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004",
                                            "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a", "\u2028",
                                            "\u2029", "\u202f", "\u205f", "\u3000"};
}  // namespace

std::size_t white_space_at(std::string_view text, std::size_t at) {
  for (std::string_view s : white_space)
    if (text.substr(at).substr(0, s.size()) == s) return s.size();
  return 0;
}

// A whole UTF-8 sequence that ends at `end` starts on a character: no lead byte is a continuation byte.
std::size_t white_space_before(std::string_view text, std::size_t end) {
  for (std::string_view s : white_space)
    if (end >= s.size() && text.substr(end - s.size(), s.size()) == s) return s.size();
  return 0;
}

std::string replaced_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  std::size_t done = 0;
  for (std::size_t at = text.find(from); at != std::string_view::npos; at = text.find(from, done)) {
    out.append(text, done, at - done).append(to);
    done = at + from.size();
  }
  return out.append(text, done);
}

}  // namespace arclight::text
