#pragma once
// A byte-level (or character-level) BPE as tokenizer.json describes it: what reading the file produces and encoding
// and decoding use. Private to the text module.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "arclight/text/tokenizer.hpp"
#include "regex.hpp"

namespace arclight::text {

struct AddedToken {
  std::string content;
  TokenId id;
  bool special, lstrip, rstrip;
};

struct Merge {
  std::int32_t rank;
  TokenId merged;
};
inline std::uint64_t pair_key(TokenId a, TokenId b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

// One step of the pre-tokenizer: a Split (or ByteLevel with use_regex) cutting every piece further.
struct SplitStep {
  std::unique_ptr<Regex> regex;
  SplitBehavior behavior = SplitBehavior::isolated;
};

enum class Kind : std::uint8_t { none, normal, added, special };

// A normalizer step, in the file's order: NFC, or Prepend / Replace (SentencePiece-style files: Llama 2).
struct NormalizerStep {
  enum class Type : std::uint8_t { nfc, prepend, replace } type;
  std::string text, replacement;  // prepend: text; replace: text -> replacement
};

// The Metaspace pre-tokenizer (Mistral v0.3; Llama and Mistral files that transformers converts since 4.41): every
// space becomes the replacement (U+2581), which is put before the text unless it starts with one (always; first: only
// before the text at the very start of the input, not after an added token; never), and with split the text is cut
// before each replacement.
struct MetaspaceStep {
  enum class Prepend : std::uint8_t { always, first, never };
  std::string replacement;
  Prepend prepend = Prepend::always;
  bool split = true;
};

// Everything tokenizer.json says that encoding and decoding need. Two alphabets: byte-level (GPT-2, Llama 3, Qwen:
// a ByteLevel pre-tokenizer; every token spells bytes, every byte is a token) and characters (SentencePiece-style:
// Llama 2, Mistral; tokens are UTF-8 with U+2581 for spaces, a character without a token falls back to its bytes'
// <0xAB> tokens or to the unknown token).
struct BpeModel {
  bool byte_level = true;
  std::unordered_map<std::string, TokenId> vocab;  // the key of a token (key_of) -> id
  std::vector<std::string> bytes_of_id;            // what decoding writes for each id
  std::vector<Kind> kind_of_id;
  std::array<TokenId, 256> byte_id{};  // byte-level: each byte's token; characters: its <0xAB> token or -1
  std::unordered_map<std::uint64_t, Merge> merges;
  std::vector<AddedToken> added;
  std::vector<NormalizerStep> normalizers;
  std::vector<SplitStep> steps;
  std::optional<MetaspaceStep> metaspace;  // characters only; never beside other pre-tokenizer steps
  bool ignore_merges = false;
  std::optional<TokenId> unk;  // characters: the token of a character without one (fuse_unk: once for a run)
  bool fuse_unk = false;
  // Characters: the decoder's Replace steps (U+2581 -> space), its ByteFallback, and how many leading spaces its
  // Strip takes off the whole text.
  std::vector<std::pair<std::string, std::string>> decoder_replacements;
  bool decoder_byte_fallback = false;
  std::size_t strip_leading_spaces = 0;
  // The post-processor's special tokens around one sequence (TemplateProcessing's `single`: Llama's BOS before it).
  std::vector<TokenId> prefix_ids, suffix_ids;

  // A token's string in tokenizer.json to the key encoding looks it up by: byte-level, the bytes it spells (its own
  // UTF-8 where a character is outside the byte-level alphabet, as added tokens such as "<|im_end|>"); characters,
  // the string itself.
  std::string key_of(const std::string& token) const;
};

// Reads a tokenizer.json's text; `file` names it in errors. Throws TokenizerFileError.
BpeModel read_bpe_model(std::string_view json_text, const std::string& file);

}  // namespace arclight::text
