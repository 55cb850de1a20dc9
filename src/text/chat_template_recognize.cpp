// Chat templates recognised from a model directory's Jinja text (tokenizer_config.json or chat_template.jinja), and
// the special tokens and end ids beside it; chat_template.cpp renders them.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>

#include <nlohmann/json.hpp>

#include "arclight/core/log.hpp"
#include "arclight/core/utf8.hpp"
#include "arclight/text/chat_template.hpp"
#include "arclight/text/json_input.hpp"
#include "chat_template_defaults.hpp"

namespace arclight::text {
namespace {

namespace fs = std::filesystem;

// Qwen2.5-Math's default system prompt as its template's Jinja string literal writes it.
constexpr std::string_view qwen25_math_system_literal =
    "Please reason step by step, and put your final answer within \\\\boxed{}.";
// How the tools text begins in Qwen3's template (and its 2507 models', Qwen3-VL's), where the system turn holds the
// conversation's system message only; Qwen2.5's begins "\n\n# Tools", after its system prompt or default.
constexpr std::string_view qwen3_tools_literal = "\"# Tools\\n\\nYou may call";

// A Jinja string literal's text as it renders (Python's unicode-escape): \\, \', \", \n, \t, \r, \b, \f, \v and \a;
// others as written (numeric ones, \x.. \u.. \N{..} and octal, too: no built-in system prompt holds them).
std::string jinja_unescaped(std::string_view literal) {
  static constexpr std::string_view escapes = "\\'\"ntrbfva", meanings = "\\'\"\n\t\r\b\f\v\a";
  std::string out;
  for (std::size_t i = 0; i < literal.size(); ++i) {
    const std::size_t escape =
        i + 1 < literal.size() && literal[i] == '\\' ? escapes.find(literal[i + 1]) : escapes.npos;
    if (escape == escapes.npos) {
      out += literal[i];
    } else {
      out += meanings[escape];
      ++i;
    }
  }
  return out;
}

// The system prompts a ChatML template writes by itself: each text that follows '<|im_start|>system\n' up to
// <|im_end|>, none where a string literal ends there or a Jinja tag follows (the conversation's content, in a literal
// or in the template's own text). After the newline escaped, the text is in a string literal and read as Jinja reads
// it; after a newline itself (in a literal, as Qwen1.5's, or in the template's text) it is taken as written, which
// refuses a default with escapes that is built in (none is so written).
std::vector<std::string> literal_system_prompts(std::string_view jinja) {
  std::vector<std::string> prompts;
  for (const std::string_view head : {"<|im_start|>system\\n", "<|im_start|>system\n"})
    for (auto at = jinja.find(head); at != std::string_view::npos; at = jinja.find(head, at + 1)) {
      const std::string_view rest = jinja.substr(at + head.size());
      if (rest.empty() || rest[0] == '\'' || rest[0] == '"') continue;
      if (rest.rfind("{{", 0) == 0 || rest.rfind("{%", 0) == 0 || rest.rfind("{#", 0) == 0) continue;
      const std::string_view prompt = rest.substr(0, rest.find("<|im_end|>"));
      prompts.push_back(head.back() == 'n' ? jinja_unescaped(prompt) : std::string(prompt));
    }
  return prompts;
}

// The error for a template of a known family that is none of the built-in ones: `what` names it.
[[noreturn]] void not_built_in(const std::string& where, const std::string& what) {
  throw TokenizerFileError(where + ": " + what + " is not built in; name a template to use instead (" +
                           std::string(known_templates) + ")");
}

// Qwen3's template and Thinking-2507's, told apart by how each writes the <think> block: both after the last query
// only (a variant keeping reasoning in all of the history is neither), on the last turn or around reasoning; Qwen3's
// closes an empty one in the generation prompt for enable_thinking false, Thinking-2507's prompt opens it. Other
// templates that write <think> (QwQ's, which drops reasoning from every answer; copies of Instruct-2507's patched to
// write reasoning, whose own writes none) are not built in.
std::string_view qwen3_variant(std::string_view jinja, const std::string& where) {
  const auto has = [&](std::string_view marker) { return jinja.find(marker) != std::string_view::npos; };
  const bool think_on_last_turn =
      has("loop.index0 > ns.last_query_index") && has("loop.last or (not loop.last and reasoning_content)");
  const bool opens_think = has("<|im_start|>assistant\\n<think>\\n'");
  const bool thinking_switch = has("enable_thinking is defined and enable_thinking is false");
  if (think_on_last_turn && thinking_switch && !opens_think) return "qwen3";
  if (think_on_last_turn && opens_think && !has("enable_thinking")) return "qwen3-thinking-2507";
  not_built_in(where, "a ChatML template with <think> other than Qwen3's and Qwen3 Thinking-2507's (QwQ's, ...)");
}

}  // namespace

// A ChatML template is one of the built-in ones only where nothing in it renders otherwise: the default system
// prompt it writes, a BOS, its tools block, its tool format. A default system prompt of its own (as Qwen2.5-Math's
// was before it was built in) or Hermes 3's BOS and tool role passed for plain ChatML, and trained on prompts the
// model never saw.
ChatTemplate ChatTemplate::recognize(std::string_view jinja, const std::string& where) {
  const auto has = [&](std::string_view marker) { return jinja.find(marker) != std::string_view::npos; };
  if (has("<|im_start|>")) {
    if (has("bos_token")) not_built_in(where, "a ChatML template that writes bos_token");
    if (has("<|im_sep|>"))  // Phi-4's: a role ends with <|im_sep|>, not a newline
      not_built_in(where, "a ChatML template with <|im_sep|> (Phi-4's)");
    const bool qwen3_tools = has(qwen3_tools_literal);
    ChatTemplate t = named(has("<think>")                                   ? qwen3_variant(jinja, where)
                           : qwen3_tools                                    ? "qwen3-instruct-2507"
                           : has(qwen25_system)                             ? "qwen2.5"
                           : has(qwen2_system)                              ? "qwen2"
                           : has(std::string(qwen15_system) + "<|im_end|>") ? "qwen1.5"
                           : has(qwen25_math_system_literal)                ? "qwen2.5-math"
                                                                            : "chatml");
    if (has("# Tools") && qwen3_tools != t.qwen3_tools_block)
      not_built_in(where, "a ChatML template whose tools block is not " + t.name + "'s");
    for (const std::string& prompt : literal_system_prompts(jinja))
      if (prompt != t.default_system)
        not_built_in(where, "a ChatML template whose default system prompt \"" + printable(prompt, 200) + "\"");
    t.tool_format = has("<tool_response>");
    return t;
  }
  if (has("<|start_header_id|>")) {
    if (!has("Cutting Knowledge Date")) return named("llama3");
    return named(has("strftime_now") ? "llama3.2" : "llama3.1");
  }
  // DeepSeek's, each by what sets it apart from its kin: R1's (the distills') by the reasoning it leaves out of
  // answers, the <think> its generation prompt opens, the last system message alone and later tool results on a new
  // line (the full R1's joins system messages and writes no newline there); V3's by joined system messages, no <think>
  // and no is_last_user (V3-0324's, which writes <｜Assistant｜> after each user turn). Both write calls only where
  // content is none. Others (V3.1's thinking switch, R1's older ones, those) are not built in.
  if (has("<｜User｜>") && has("<｜Assistant｜>")) {
    // A newline in a Jinja string is written as an escape or as itself.
    const auto has_either = [&](const std::string& escaped) {
      std::string raw = escaped;
      for (std::size_t at; (at = raw.find("\\n")) != std::string::npos;) raw.replace(at, 2, "\n");
      return has(escaped) || has(raw);
    };
    const bool calls_where_no_content = has("message['content'] is none") && !has("is_last_user");
    if (calls_where_no_content && has("split('</think>')[-1]") && has_either("'<｜Assistant｜><think>\\n'") &&
        has("set ns.system_prompt = message['content']") && !has("is_first_sp") &&
        has_either("'\\n<｜tool▁output▁begin｜>'"))
      return named("deepseek-r1");
    if (calls_where_no_content && has_either("ns.system_prompt + '\\n\\n' + message['content']") && !has("think"))
      return named("deepseek-v3");
    not_built_in(where, "a DeepSeek template other than V3's and R1's");
  }
  // Gemma 3's, by the way it writes the system message and the parts of a message's content; Gemma 2's (Gemma 1.1's
  // too), by the system role it refuses and the content it trims whole; FunctionGemma's and others are not built in.
  if (has("<start_of_turn>")) {
    if (has("set first_user_prefix = messages[0]['content'][0]['text'] + '") && has("{{ item['text'] | trim }}") &&
        has("{%- set role = \"model\" -%}") && !has("tool"))
      return named("gemma3");
    if (has("raise_exception('System role not supported')") && has("message['content'] | trim") &&
        has("{% set role = 'model' %}") && has("Conversation roles must alternate") && has("{{ bos_token }}") &&
        has("'<end_of_turn>") && !has("first_user_prefix") && !has("item['text']") && !has("is iterable") &&
        !has("tool"))
      return named("gemma2");
    not_built_in(where, "a Gemma template other than Gemma 2's and 3's");
  }
  // Mistral's templates differ by version in spaces and markers ("[INST] " in v0.3's, [SYSTEM_PROMPT] in v7's): NeMo's
  // alone is built in, known by the way it writes a turn, its tools and its results.
  if (has("[INST]")) {
    if (has("\"[INST]\" + message[\"content\"] + \"[/INST]\"") && has("\"[AVAILABLE_TOOLS][\"") &&
        has("'[TOOL_RESULTS]{\"content\": ' + content|string") && !has("[SYSTEM_PROMPT]"))
      return named("mistral-nemo");
    not_built_in(where, "a Mistral [INST] template other than Mistral NeMo's");
  }
  throw TokenizerFileError(where +
                           ": a chat template arclight does not know (it recognises ChatML by <|im_start|>, "
                           "Llama 3 by <|start_header_id|>, Mistral NeMo's by [INST], DeepSeek's by <｜User｜> and "
                           "Gemma's by <start_of_turn>); "
                           "name one (" +
                           std::string(known_templates) + ")");
}

namespace {

// bos_token and eos_token are a string, {"content": ...} (older files), or null.
std::string special_token(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"];
  return "";
}

// chat_template is a string, or a list of {"name", "template"} of which "default" is the one.
std::string template_text(const nlohmann::json& config, const fs::path& dir, const std::string& where) {
  const auto it = config.find("chat_template");
  if (it != config.end() && it->is_string()) return it->get<std::string>();
  if (it != config.end() && it->is_array())
    for (const auto& entry : *it)
      if (entry.is_object() && entry.value("name", nlohmann::json()) == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"];
  if (it != config.end() && !it->is_null())
    throw TokenizerFileError(where + ": key \"chat_template\": expected a string or a list with a \"default\"");
  std::ifstream jinja(dir / "chat_template.jinja", std::ios::binary);  // where transformers 4.43+ saves it
  if (!jinja) throw TokenizerFileError(where + ": no chat_template and no chat_template.jinja; name a template");
  return {std::istreambuf_iterator<char>(jinja), std::istreambuf_iterator<char>()};
}

// generation_config.json's eos_token_id, else config.json's (transformers derives the generation config from it), an
// id or a list; none where neither file has one.
std::vector<TokenId> generation_eos_ids(const fs::path& dir) {
  for (const char* file : {"generation_config.json", "config.json"}) {
    std::ifstream in(dir / file, std::ios::binary);
    if (!in) continue;
    const std::string where = (dir / file).string();
    const auto config = parse_json<nlohmann::json>(std::string{std::istreambuf_iterator<char>(in), {}});
    if (config.is_discarded() || !config.is_object())
      throw TokenizerFileError(
          log::concat(where, ": not a JSON object (or nested deeper than ", max_json_depth, " levels)"));
    const auto it = config.find("eos_token_id");
    if (it == config.end() || it->is_null()) return {};
    std::vector<TokenId> ids;
    for (const nlohmann::json& id : it->is_array() ? *it : nlohmann::json::array({*it})) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
          id.get<std::int64_t>() > std::numeric_limits<TokenId>::max())
        throw TokenizerFileError(where + ": eos_token_id: expected a token id or a list of them");
      ids.push_back(id.get<TokenId>());
    }
    return ids;
  }
  return {};
}

}  // namespace

ChatTemplate load_chat_template(const fs::path& model_dir, std::string_view name) {
  const std::string where = (model_dir / "tokenizer_config.json").string();
  nlohmann::json config = nlohmann::json::object();
  if (std::ifstream in(model_dir / "tokenizer_config.json", std::ios::binary); in) {
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    config = parse_json<nlohmann::json>(text);
    if (config.is_discarded())
      throw TokenizerFileError(log::concat(where, ": not JSON, or nested deeper than ", max_json_depth, " levels"));
    if (!config.is_object()) throw TokenizerFileError(where + ": expected a JSON object");
  } else if (name.empty()) {
    throw TokenizerFileError(where + ": cannot be read, and no chat template was named");
  }
  ChatTemplate t = name.empty() ? ChatTemplate::recognize(template_text(config, model_dir, where), where)
                                : ChatTemplate::named(name);
  if (const std::string bos = special_token(config, "bos_token"); !bos.empty() && t.family != TemplateFamily::chatml)
    t.bos_token = bos;
  if (const std::string eos = special_token(config, "eos_token"); !eos.empty()) t.eos_token = eos;
  t.generation_eos_ids = generation_eos_ids(model_dir);
  return t;
}

}  // namespace arclight::text
