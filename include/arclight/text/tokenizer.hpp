#pragma once
// Tokenizers: text (bytes) to token ids and back. Byte-level BPE read from a Hugging Face tokenizer.json (GPT-2,
// Llama 3, Qwen2, Qwen3) and a plain byte tokenizer for from-scratch models. Pure C++: neither LibTorch nor MPI.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arclight/core/error.hpp"

namespace arclight::text {

using TokenId = std::int32_t;

// A tokenizer file that cannot be used as it is: not JSON, a key missing or of the wrong type, a kind of model or
// pre-tokenizer not supported. The message names the file and the key. Exit code 2, like a bad model file.
class TokenizerFileError : public UsageError {
 public:
  explicit TokenizerFileError(const std::string& what) : UsageError(what) {}
};

// Whether special added tokens (<|im_start|>, <|eot_id|>) written in the text become their ids (`match`, what
// Hugging Face does by default) or are tokenized as ordinary text (`as_text`, for text users wrote). Added tokens
// that are not special (Qwen's <tool_call>, <think>) are always matched.
enum class Specials : std::uint8_t { match, as_text };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Any bytes in, invalid UTF-8 included; decode(encode(text)) == text.
  virtual std::vector<TokenId> encode(std::string_view text, Specials specials = Specials::match) const = 0;
  // The bytes of the tokens, concatenated (not necessarily valid UTF-8); ids out of range throw std::out_of_range.
  virtual std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const = 0;
  // The text one token adds to a sequence decoded so far, for text given out as it is generated: at the sequence's
  // start (no text yet) what decode({id}) gives, elsewhere the token's bytes as they are (a SentencePiece-style
  // decoder takes the first word's leading space off, which single-token decodes would do to every word). An id the
  // tokenizer does not know (a model's embedding rows past its vocabulary) adds nothing.
  virtual std::string piece(TokenId id, bool skip_special, bool at_start) const = 0;
  // One more than the largest id.
  virtual std::size_t vocab_size() const = 0;
  // The id of a token given by its text (as tokenizer.json writes it), for special tokens such as "<|im_end|>".
  virtual std::optional<TokenId> token_id(std::string_view token) const = 0;
  virtual bool is_special(TokenId id) const = 0;
  // `ids` with the special tokens the file's post-processor puts around one text (Llama's BOS before it; Qwen's none),
  // as Hugging Face's tokenizer(text) and vLLM's completions add them (add_special_tokens). Chat templates write
  // theirs.
  virtual std::vector<TokenId> with_special_tokens(std::vector<TokenId> ids) const { return ids; }
};

// A tokenizer.json's text; `file` names it in errors. Throws TokenizerFileError.
std::unique_ptr<Tokenizer> parse_tokenizer_json(std::string_view json_text, const std::string& file = "tokenizer.json");
// `path` is a tokenizer.json or a model directory holding one. Throws TokenizerFileError (also for a missing file).
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path);

// Bytes as ids 0..255, then the given special tokens (e.g. "<|bos|>", "<|eos|>") from 256 on: for models trained
// from scratch, where no vocabulary is learnt.
std::unique_ptr<Tokenizer> make_byte_tokenizer(const std::vector<std::string>& specials);
// The tokenizer of a from-scratch model that serves text (outside agents): bytes, then ChatML's <|endoftext|>,
// <|im_start|> and <|im_end|>, so that the chatml template renders conversations for it.
std::unique_ptr<Tokenizer> make_scratch_chat_tokenizer();

}  // namespace arclight::text
