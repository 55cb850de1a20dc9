#include "tokenize.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "arclight/core/error.hpp"
#include "arclight/text/chat_template.hpp"
#include "arclight/text/tokenizer.hpp"

namespace arclight::app {
namespace {

std::string json_ids(const std::vector<text::TokenId>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

}  // namespace

int tokenize(const Invocation& inv) {
  namespace fs = std::filesystem;
  const auto tokenizer = text::load_tokenizer(inv.tokenize_model);
  const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  if (!inv.tokenize_chat) {
    // As Hugging Face's tokenizer(text) and vLLM's completions: with the post-processor's special tokens.
    std::vector<text::TokenId> ids = tokenizer->encode(input);
    if (!inv.tokenize_no_special_tokens) ids = tokenizer->with_special_tokens(std::move(ids));
    std::printf("%s\n", json_ids(ids).c_str());
    return exit_ok;
  }
  // A tokenizer.json given as the model: its directory holds tokenizer_config.json.
  const fs::path dir =
      fs::is_directory(inv.tokenize_model) ? fs::path(inv.tokenize_model) : fs::path(inv.tokenize_model).parent_path();
  const text::ChatTemplate chat = text::load_chat_template(dir, inv.tokenize_template);
  text::RenderOptions options;
  options.add_generation_prompt = inv.tokenize_generation_prompt;
  options.enable_thinking = inv.tokenize_enable_thinking;
  const auto ids = text::encode_chat(chat, *tokenizer, text::parse_conversation(input), options);
  std::printf("{\"template\": \"%s\", \"ids\": %s, \"stop_ids\": %s}\n", chat.name.c_str(), json_ids(ids).c_str(),
              json_ids(chat.stop_ids(*tokenizer)).c_str());
  return exit_ok;
}

}  // namespace arclight::app
