// libFuzzer target for tokenizer.json's reader and the encoder behind it. The input is a tokenizer.json, optionally
// followed by "\n#TEXT#\n" and a text to encode. Whatever it accepts must encode any text (and a few fixed ones)
// into ids inside its vocabulary that decode without error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "arclight/text/tokenizer.hpp"

using namespace arclight::text;

namespace {

void check(const Tokenizer& t, std::string_view text) {
  for (Specials specials : {Specials::match, Specials::as_text}) {
    const std::vector<TokenId> ids = t.encode(text, specials);
    for (TokenId id : ids)
      if (id < 0 || static_cast<std::size_t>(id) >= t.vocab_size()) std::abort();
    (void)t.decode(ids);  // throws std::out_of_range (escaping: a finding) for an id without a token
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t marker = input.find("\n#TEXT#\n");
  const std::string_view file = input.substr(0, marker);
  const std::string_view text = marker == std::string_view::npos ? std::string_view() : input.substr(marker + 8);
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = parse_tokenizer_json(file, "fuzz/tokenizer.json");
  } catch (const TokenizerFileError&) {
    return 0;  // refused, as it should be; any other exception escapes and libFuzzer reports it
  }
  check(*tokenizer, text);
  check(*tokenizer, "Hello, world! 123 <|im_end|>  \n\n caf\xc3\xa9 e\xcc\x81 \xff\xfe \xe4\xbd\xa0\xe5\xa5\xbd");
  return 0;
}
