#pragma once
// Unicode helpers of the tokenizers: NFC normalisation (ICU) and GPT-2's byte-to-character map.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "arclight/core/utf8.hpp"  // utf8_sequence_length

namespace arclight::text {

// `text` in Normalization Form C. Stretches that are not valid UTF-8 are copied as they are (Hugging Face only
// ever sees valid UTF-8; we keep every byte so that decode(encode(text)) gives the bytes back).
std::string to_nfc(std::string_view text);

// GPT-2's byte-level alphabet: each byte is written as one printable character (' ' as 'Ġ', '\n' as 'Ċ').
// The bytes a token string spells in that alphabet, or nullopt where a character is outside it.
std::optional<std::string> bytes_of_byte_level(std::string_view token);
// The character (as UTF-8) that stands for `byte`.
std::string byte_level_char(std::uint8_t byte);

// The byte length of the White_Space character (Rust's char::is_whitespace, as Hugging Face's added tokens strip)
// that starts at text[at], or that ends just before text[end]; 0 where there is none.
std::size_t white_space_at(std::string_view text, std::size_t at);
std::size_t white_space_before(std::string_view text, std::size_t end);

// text with every occurrence of `from` (not empty) replaced by `to`, left to right, in one pass: replacing in place
// shifts the rest each time (quadratic: 1 MB of spaces took 12 s).
std::string replaced_all(std::string_view text, std::string_view from, std::string_view to);

}  // namespace arclight::text
