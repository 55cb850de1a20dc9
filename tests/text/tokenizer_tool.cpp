// The C++ side of tests/text/tokenizer_reference_test.sh and of `scripts/bench.sh tokenizer`. Strings travel as
// hex, one per line, so that any bytes (invalid UTF-8, newlines) pass.
//   tokenizer_tool encode TOKENIZER_JSON HEX_LINES   one JSON line per input: {"ids":[...],"special":[...],
//                                                   "decoded":"<hex>"} (special: with the post-processor's tokens)
//   tokenizer_tool decode TOKENIZER_JSON ID_LINES    one hex line per JSON array of ids: the decoded bytes
//   tokenizer_tool bench TOKENIZER_JSON HEX_LINES R  encodes every line R times; prints tokens, seconds, tokens/s
//   tokenizer_tool chat MODEL_DIR JSON_LINES       one JSON line per conversation ({"messages", "tools",
//                                                  "add_generation_prompt", "enable_thinking"}):
//                                                  {"text":..,"ids":[..]}, or {"error": ...} where the template refuses
//                                                  it
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arclight/core/error.hpp"
#include "arclight/text/chat_template.hpp"
#include "arclight/text/tokenizer.hpp"

namespace {

using arclight::text::TokenId;

std::string from_hex(const std::string& hex) {
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += digits[c >> 4], out += digits[c & 15];
  return out;
}

std::vector<std::string> read_hex_lines(const char* path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(from_hex(line));
  return lines;
}

std::vector<TokenId> parse_ids(const std::string& line) {  // "[1,2,3]"
  std::vector<TokenId> ids;
  for (std::size_t at = line.find_first_of("0123456789"); at != std::string::npos;
       at = line.find_first_of("0123456789", at)) {
    std::size_t used = 0;
    ids.push_back(std::stoi(line.substr(at), &used));
    at += used;
  }
  return ids;
}

int encode(const arclight::text::Tokenizer& t, const char* lines_path) {
  for (const std::string& text : read_hex_lines(lines_path)) {
    const std::vector<TokenId> ids = t.encode(text);
    std::string out = "{\"ids\":[";
    for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
    out += "],\"special\":[";  // with the post-processor's special tokens (add_special_tokens)
    const std::vector<TokenId> special = t.with_special_tokens(ids);
    for (std::size_t i = 0; i < special.size(); ++i) out += (i ? "," : "") + std::to_string(special[i]);
    std::cout << out << "],\"decoded\":\"" << to_hex(t.decode(ids)) << "\"}\n";
  }
  return 0;
}

int decode(const arclight::text::Tokenizer& t, const char* ids_path) {
  std::ifstream in(ids_path);
  for (std::string line; std::getline(in, line);) std::cout << to_hex(t.decode(parse_ids(line))) << "\n";
  return 0;
}

int bench(const arclight::text::Tokenizer& t, const char* lines_path, int rounds) {
  const std::vector<std::string> lines = read_hex_lines(lines_path);
  for (const std::string& text : lines) t.encode(text);  // warm-up, as the JavaScript side's: the word cache
  std::size_t tokens = 0, bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r)
    for (const std::string& text : lines) tokens += t.encode(text).size(), bytes += text.size();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"tokens\": %zu, \"bytes\": %zu, \"seconds\": %.4f, \"tokens_per_s\": %.0f}\n", tokens, bytes, seconds,
              tokens / seconds);
  return 0;
}

int chat(const char* model_dir, const char* lines_path) {
  const auto tokenizer = arclight::text::load_tokenizer(model_dir);
  const auto chat_template = arclight::text::load_chat_template(model_dir);
  std::ifstream in(lines_path);
  for (std::string line; std::getline(in, line);) {
    const auto request = nlohmann::json::parse(line);
    arclight::text::RenderOptions options;
    options.add_generation_prompt = request.value("add_generation_prompt", false);
    if (request.contains("enable_thinking")) options.enable_thinking = request["enable_thinking"].get<bool>();
    const auto conversation = arclight::text::parse_conversation(line);
    try {
      const nlohmann::json out = {
          {"text", chat_template.render(conversation, options)},
          {"ids", arclight::text::encode_chat(chat_template, *tokenizer, conversation, options)}};
      std::cout << out.dump() << "\n";
    } catch (const arclight::UsageError& e) {  // a conversation the template refuses, as Jinja's raise_exception
      std::cout << nlohmann::json({{"error", e.what()}}).dump() << "\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: tokenizer_tool encode|decode|bench TOKENIZER_JSON FILE [ROUNDS]\n";
    return 2;
  }
  try {
    if (std::string(argv[1]) == "chat") return chat(argv[2], argv[3]);
    const auto tokenizer = arclight::text::load_tokenizer(argv[2]);
    const std::string mode = argv[1];
    if (mode == "encode") return encode(*tokenizer, argv[3]);
    if (mode == "decode") return decode(*tokenizer, argv[3]);
    if (mode == "bench") return bench(*tokenizer, argv[3], argc > 4 ? std::stoi(argv[4]) : 1);
    std::cerr << "unknown mode " << mode << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tokenizer_tool: " << e.what() << "\n";
    return 2;
  }
}
