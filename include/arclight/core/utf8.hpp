#pragma once
// UTF-8 as outside text brings it (a tokenizer's input, an OTLP span, an agent's output, a file name), and that text
// made safe to show in a log line or an error message.
#include <cstddef>
#include <string>
#include <string_view>

namespace arclight {

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at text[at]; 0 where none does (a stray
// continuation byte, an overlong form, a surrogate, past U+10FFFF, a sequence cut short).
std::size_t utf8_sequence_length(std::string_view text, std::size_t at);

bool valid_utf8(std::string_view text);

// `text` for a log line or an error message: each C0 control but tab, DEL, each C1 control (U+0080 to U+009F, of
// which U+009B is a terminal's CSI), the line and paragraph separators and the bidirectional controls (which make a
// viewer show another line than the one written) and each byte that starts no well-formed UTF-8 sequence becomes
// '?'. At most the first max_bytes bytes of `text`, never half a character. The result is well-formed UTF-8.
std::string printable(std::string_view text, std::size_t max_bytes = std::string_view::npos);

}  // namespace arclight
