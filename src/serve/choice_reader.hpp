#pragma once
// One choice's answer as a client sees it: the engine's tokens turned into text, cut at the first stop string (the
// stream is cancelled there), given out in pieces that never end inside a UTF-8 character or a possible stop string.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "arclight/serve/generator.hpp"
#include "arclight/text/tokenizer.hpp"

namespace arclight::serve {

struct Delta {
  std::string text;
  std::vector<StreamedToken> tokens;
};

class ChoiceReader {
 public:
  ChoiceReader(std::shared_ptr<GenerationStream> stream, const text::Tokenizer& tokenizer,
               std::vector<std::string> stop_strings, std::vector<text::TokenId> stop_tokens);
  // The next piece (waits for it); false once the choice has ended and every piece was given.
  bool next(Delta& delta);
  // The next piece if one comes within `wait` (the streams of a response's n choices are read in turn).
  enum class Piece : std::uint8_t { given, none_yet, ended };
  Piece next_within(Delta& delta, std::chrono::milliseconds wait);
  void read_to_end();
  void cancel() { stream_->cancel(); }
  // `client_left` is asked (on the reading thread, at most every 100 ms while the reader waits or reads) whether the
  // client is gone: then the stream is cancelled and the choice ends at once, its finish "abort". An answer nobody
  // reads would hold a decode row to its end, and loading new weights waits for every running sequence.
  void end_when(std::function<bool()> client_left) { client_left_ = std::move(client_left); }
  bool client_gone() const { return client_gone_; }
  // The text of special tokens is part of the answer (Mistral's [TOOL_CALLS] with tools: vLLM's mistral parser has
  // skip_special_tokens false); before the first read.
  void show_special_tokens() { skip_special_ = false; }

  const std::vector<StreamedToken>& tokens() const { return tokens_; }  // every token the answer keeps
  const std::string& text() const { return text_; }                     // the answer's text so far
  std::string finish_reason() const { return finish_; }                 // stop, length, abort, error
  std::string error() const { return stream_->error(); }
  std::uint64_t policy_version() const { return stream_->policy_version(); }
  std::vector<std::int32_t> token_ids() const;
  std::vector<float> untruncated_logprobs() const;  // what a trace records (StreamedToken)

 private:
  void pull(Delta& delta, std::chrono::milliseconds wait);
  void take(const StreamedToken& token, Delta& delta);
  void end_at_stop_string(std::size_t before);  // text_'s size before the last token's text
  std::size_t safe_end() const;

  std::shared_ptr<GenerationStream> stream_;
  const text::Tokenizer& tokenizer_;
  std::vector<std::string> stop_strings_;
  std::vector<text::TokenId> stop_tokens_;
  std::vector<StreamedToken> tokens_;
  std::string text_;
  std::size_t given_ = 0;  // bytes of text_ already given out
  bool ended_ = false, done_ = false;
  bool started_ = false;  // a token of the decoded sequence came (its start: SentencePiece-style spaces)
  bool skip_special_ = true;
  std::string finish_;
  std::function<bool()> client_left_;
  std::chrono::steady_clock::time_point next_look_{};
  bool client_gone_ = false;
};

}  // namespace arclight::serve
