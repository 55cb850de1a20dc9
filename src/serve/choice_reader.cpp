#include "choice_reader.hpp"

#include <algorithm>

namespace arclight::serve {
namespace {

constexpr std::chrono::milliseconds poll{100};

std::string finish_name(Finish finish) {
  switch (finish) {
    case Finish::stop: return "stop";
    case Finish::length: return "length";
    case Finish::cancelled: return "abort";
    default: return "error";
  }
}

// How many bytes at the end of `text` begin a UTF-8 character that is not complete yet.
std::size_t incomplete_utf8_tail(std::string_view text) {
  for (std::size_t back = 1; back <= std::min<std::size_t>(3, text.size()); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const std::size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return length > back ? back : 0;
  }
  return 0;
}

}  // namespace

ChoiceReader::ChoiceReader(std::shared_ptr<GenerationStream> stream, const text::Tokenizer& tokenizer,
                           std::vector<std::string> stop_strings, std::vector<text::TokenId> stop_tokens)
    : stream_(std::move(stream)),
      tokenizer_(tokenizer),
      stop_strings_(std::move(stop_strings)),
      stop_tokens_(std::move(stop_tokens)) {}

bool ChoiceReader::next(Delta& delta) {
  Piece piece;
  while ((piece = next_within(delta, poll)) == Piece::none_yet) {
  }
  return piece == Piece::given;
}

ChoiceReader::Piece ChoiceReader::next_within(Delta& delta, std::chrono::milliseconds wait) {
  delta = {};
  if (done_) return Piece::ended;
  if (!ended_) pull(delta, wait);
  if (delta.tokens.empty() && !ended_) return Piece::none_yet;
  const std::size_t end = ended_ ? text_.size() : safe_end();
  if (end > given_) delta.text = text_.substr(given_, end - given_);
  given_ = std::max(given_, end);
  done_ = ended_;
  return Piece::given;
}

void ChoiceReader::read_to_end() {
  Delta delta;
  while (next(delta)) {
  }
}

void ChoiceReader::pull(Delta& delta, std::chrono::milliseconds wait) {
  if (client_left_ && std::chrono::steady_clock::now() >= next_look_) {
    next_look_ = std::chrono::steady_clock::now() + poll;
    if (client_left_()) {
      client_gone_ = ended_ = true;
      finish_ = finish_name(Finish::cancelled);
      stream_->cancel();
      return;
    }
  }
  std::vector<StreamedToken> batch;
  const bool more = stream_->next(batch, wait);
  for (const StreamedToken& token : batch) {
    if (ended_) break;  // tokens after a stop string: not part of the answer
    take(token, delta);
  }
  if (!more && !ended_) {
    ended_ = true;
    finish_ = finish_name(stream_->finish_reason());
  }
}

void ChoiceReader::take(const StreamedToken& token, Delta& delta) {
  delta.tokens.push_back(token);
  tokens_.push_back(token);
  if (std::find(stop_tokens_.begin(), stop_tokens_.end(), token.id) != stop_tokens_.end()) {
    ended_ = true;  // the engine ends the stream too; the stop token is kept, its text is not shown
    finish_ = "stop";
    return;
  }
  const std::size_t before = text_.size();
  text_ += tokenizer_.piece(token.id, skip_special_, /*at_start=*/!started_);
  // The decoded sequence starts at its first token that is neither a skipped special one nor unknown, even one whose
  // text the start takes away (a lone U+2581).
  started_ =
      started_ || (static_cast<std::size_t>(token.id) < tokenizer_.vocab_size() && !tokenizer_.is_special(token.id));
  end_at_stop_string(before);
}

// Looks only where the new text can complete a stop string: the whole answer at every token made a long answer's
// reading quadratic.
void ChoiceReader::end_at_stop_string(std::size_t before) {
  std::size_t first = std::string::npos;
  for (const std::string& stop : stop_strings_)
    first = std::min(first, text_.find(stop, before >= stop.size() ? before - stop.size() + 1 : 0));
  if (first == std::string::npos) return;
  text_.resize(first);
  ended_ = true;
  finish_ = "stop";
  stream_->cancel();
}

// The end of what can be given out now: not the start of a stop string, nor half a character.
std::size_t ChoiceReader::safe_end() const {
  std::size_t hold = 0;
  for (const std::string& stop : stop_strings_)
    for (std::size_t k = std::min(stop.size() - 1, text_.size()); k > hold; --k)
      if (text_.compare(text_.size() - k, k, stop, 0, k) == 0) {
        hold = k;
        break;
      }
  const std::size_t end = text_.size() - hold;
  return end - incomplete_utf8_tail(std::string_view(text_).substr(0, end));
}

std::vector<std::int32_t> ChoiceReader::token_ids() const {
  std::vector<std::int32_t> ids;
  for (const StreamedToken& t : tokens_) ids.push_back(t.id);
  return ids;
}

std::vector<float> ChoiceReader::untruncated_logprobs() const {
  std::vector<float> out;
  for (const StreamedToken& t : tokens_) out.push_back(t.untruncated_logprob);
  return out;
}

}  // namespace arclight::serve
