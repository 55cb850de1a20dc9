#include "arclight/text/chat_template.hpp"

#include <algorithm>
#include <cstdint>
#include <ctime>

#include <nlohmann/json.hpp>

#include "arclight/core/log.hpp"
#include "arclight/core/utf8.hpp"
#include "arclight/text/json_input.hpp"
#include "json_text.hpp"
#include "chat_template_defaults.hpp"
#include "unicode.hpp"

namespace arclight::text {
namespace {

// The text of Qwen's templates, word for word (Qwen2.5 and Qwen3 share the tools block).
constexpr std::string_view qwen_tools_head =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "
    "signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view qwen_tools_tail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";
// Llama 3.1's template writes this date unless the caller passes another; 3.2's writes today's (strftime_now).
constexpr std::string_view llama31_date = "26 Jul 2024";

std::string llama3_preamble(const ChatTemplate& t) {
  std::string date(llama31_date);
  if (t.date_today) {
    char text[32];
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    date.assign(text, std::strftime(text, sizeof text, "%d %b %Y", &local));
  }
  return "Cutting Knowledge Date: December 2023\nToday Date: " + date + "\n\n";
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
std::string_view strip_newlines_left(std::string_view s) {
  return s.substr(std::min(s.find_first_not_of('\n'), s.size()));
}
std::string_view strip_newlines_right(std::string_view s) { return s.substr(0, s.find_last_not_of('\n') + 1); }
// Python's str.isspace() for one code point: what Jinja's trim (str.strip()) removes in transformers' templates.
bool is_python_space(std::uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
// The code point of the UTF-8 sequence at s[at] of length n.
std::uint32_t code_point(std::string_view s, std::size_t at, std::size_t n) {
  static constexpr std::uint8_t lead_mask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  std::uint32_t cp = static_cast<std::uint8_t>(s[at]) & lead_mask[n];
  for (std::size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<std::uint8_t>(s[at + i]) & 0x3F);
  return cp;
}
std::string_view trim(std::string_view s) {
  std::size_t begin = 0, end = s.size();
  for (std::size_t n;
       begin < end && (n = utf8_sequence_length(s, begin)) > 0 && is_python_space(code_point(s, begin, n));)
    begin += n;
  while (end > begin) {  // back to the start of the last character
    std::size_t start = end - 1;
    while (start > begin && (static_cast<std::uint8_t>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
    const std::size_t n = utf8_sequence_length(s, start);
    if (n != end - start || !is_python_space(code_point(s, start, n))) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

// Qwen3's template: the index of the last user message that is not a tool response wrapped as one.
std::size_t last_query_index(const std::vector<Message>& messages) {
  for (std::size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    if (messages[i].role == "user" && !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>")))
      return i;
  }
  return messages.size() - 1;
}

void chatml_system(const ChatTemplate& t, const Conversation& c, std::string& out) {
  const bool has_system = !c.messages.empty() && c.messages[0].role == "system";
  const std::string system = has_system ? c.messages[0].content : t.default_system;
  if (!c.tools.empty()) {
    out += "<|im_start|>system\n";
    if (!t.qwen3_tools_block || has_system) out += system + "\n\n";  // Qwen2.5 always writes one (its default at least)
    out += qwen_tools_head;
    for (const std::string& tool : c.tools) out += "\n" + tool;
    out += qwen_tools_tail;
  } else if (has_system || !system.empty()) {
    out += "<|im_start|>system\n" + system + "<|im_end|>\n";
  }
}

// An assistant turn: Qwen3 splits <think>...</think> off the content and writes it back only after the last query.
void chatml_assistant(const ChatTemplate& t, const Message& m, bool after_last_query, bool last, std::string& out) {
  std::string_view content = m.content;
  std::string reasoning = m.reasoning_content.value_or("");
  const auto close = m.content.find("</think>");
  if (t.think && !m.reasoning_content && close != std::string::npos) {  // Qwen2.5 keeps the content whole
    content = strip_newlines_left(std::string_view(m.content).substr(m.content.rfind("</think>") + 8));
    const std::string_view before = strip_newlines_right(std::string_view(m.content).substr(0, close));
    const auto open = before.rfind("<think>");
    reasoning = std::string(strip_newlines_left(open == std::string_view::npos ? before : before.substr(open + 7)));
  }
  out += "<|im_start|>assistant\n";
  if (t.think && after_last_query && (last || !reasoning.empty())) {
    const std::string_view r = strip_newlines_right(strip_newlines_left(reasoning));
    out += "<think>\n" + std::string(r) + "\n</think>\n\n" + std::string(strip_newlines_left(content));
  } else {
    out += content;
  }
  for (std::size_t i = 0; i < m.tool_calls.size(); ++i) {
    if (i > 0 || !content.empty()) out += "\n";
    out += "<tool_call>\n{\"name\": \"" + m.tool_calls[i].name + "\", \"arguments\": " + m.tool_calls[i].arguments +
           "}\n</tool_call>";
  }
  out += "<|im_end|>\n";
}

// A template recognised without Qwen's tool format (plain ChatML, Qwen2-Instruct's) ignores tool definitions in
// Hugging Face and writes tool turns its own way: rendered Qwen's way here they would not be the model's prompt.
void check_tool_format(const ChatTemplate& t, const Conversation& c) {
  if (t.tool_format) return;
  const bool tool_turns = std::any_of(c.messages.begin(), c.messages.end(),
                                      [](const Message& m) { return m.role == "tool" || !m.tool_calls.empty(); });
  if (!c.tools.empty() || tool_turns)
    throw UsageError("chat template " + t.name +
                     " (as the model's own template, recognised) has no tool format; name one that has (qwen2.5, "
                     "qwen3) to use Hermes-style tools");
}

std::string render_chatml(const ChatTemplate& t, const Conversation& c, const RenderOptions& options) {
  check_tool_format(t, c);
  std::string out;
  chatml_system(t, c, out);
  const auto& ms = c.messages;
  const std::size_t last_query = ms.empty() ? 0 : last_query_index(ms);
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const Message& m = ms[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      chatml_assistant(t, m, i > last_query, i + 1 == ms.size(), out);
    } else if (m.role == "tool") {
      if (i == 0 || ms[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == ms.size() || ms[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (t.opens_think) out += "<think>\n";
    if (t.thinking_switch && options.enable_thinking == false) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string llama3_header(std::string_view role) {
  return "<|start_header_id|>" + std::string(role) + "<|end_header_id|>\n\n";
}

// Llama 3.1's and 3.2's custom tools, in the first message after the system prompt (tools_in_user_message, their
// default), as their templates write them.
std::string llama3_tools_message(const Conversation& c, std::size_t first, const std::string& template_name) {
  if (first >= c.messages.size())
    throw UsageError("chat template " + template_name + ": tools go in the first user message, and there is none");
  std::string out = llama3_header("user") +
                    "Given the following functions, please respond with a JSON for a function call with its proper "
                    "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
                    "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n";
  for (const std::string& tool : c.tools) out += tojson_indented(parse_json<nlohmann::ordered_json>(tool), 4) + "\n\n";
  return out + std::string(trim(c.messages[first].content)) + "<|eot_id|>";
}

// Llama 3: each message under its role's header, trimmed, ended by <|eot_id|>; tool calls as Llama 3.1 writes them
// ({"name": ..., "parameters": ...}) and tool results under the ipython role.
std::string render_llama3(const ChatTemplate& t, const Conversation& c, const RenderOptions& options) {
  if (!c.tools.empty() && !t.knowledge_cutoff)
    throw UsageError("chat template " + t.name +
                     ": tool definitions are not supported (Llama 3.1's and 3.2's are, and ChatML's)");
  const bool tools = (c.tools_given || !c.tools.empty()) && t.knowledge_cutoff;  // 3.0's template has none
  std::string out = t.bos_token;
  const bool has_system = !c.messages.empty() && c.messages[0].role == "system";
  std::size_t i = t.knowledge_cutoff && has_system ? 1 : 0;
  if (t.knowledge_cutoff)
    out += llama3_header("system") + (tools ? "Environment: ipython\n" : "") + llama3_preamble(t) +
           std::string(has_system ? trim(c.messages[0].content) : "") + "<|eot_id|>";
  if (tools) out += llama3_tools_message(c, i++, t.name);
  for (; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    if (m.role == "tool") {  // Llama 3.1 calls the tool's role ipython; 3.0's template writes the role as given
      // 3.1's template writes `content | tojson` for anything iterable, and a string is: the result comes quoted.
      out += t.knowledge_cutoff ? llama3_header("ipython") + tojson(nlohmann::ordered_json(m.content))
                                : llama3_header("tool") + std::string(trim(m.content));
      out += "<|eot_id|>";
    } else if (!m.tool_calls.empty() && t.knowledge_cutoff) {  // 3.0's template writes the content, calls or not
      if (m.tool_calls.size() > 1) throw UsageError("chat template " + t.name + ": one tool call per message");
      out += llama3_header(m.role) + "{\"name\": \"" + m.tool_calls[0].name +
             "\", \"parameters\": " + m.tool_calls[0].arguments + "}<|eot_id|>";
    } else {
      out += llama3_header(m.role) + std::string(trim(m.content)) + "<|eot_id|>";
    }
  }
  if (options.add_generation_prompt) out += llama3_header("assistant");
  return out;
}

// Mistral NeMo's template (v3, "tekken") word for word, errors included.
constexpr std::string_view mistral_id_error = "Tool call IDs should be alphanumeric strings with length 9!";

void check_mistral_id(const std::string& id) {
  // Jinja's length of a text is its count of code points, as Python's len().
  const auto code_points = std::count_if(id.begin(), id.end(), [](char c) { return (c & 0xC0) != 0x80; });
  if (code_points != 9) throw UsageError(std::string(mistral_id_error));
}

// The tool definitions: each function's keys in the request's order but "return", text values between quotes as they
// are (not escaped), other values as tojson writes them.
std::string mistral_tools(const Conversation& c) {
  std::string out = "[AVAILABLE_TOOLS][";
  for (std::size_t i = 0; i < c.tools.size(); ++i) {
    const auto tool = nlohmann::ordered_json::parse(c.tools[i]);  // written by tojson: JSON
    const auto function = tool.is_object() ? tool.find("function") : tool.end();
    if (function == tool.end() || !function->is_object())
      throw UsageError(log::concat("tools[", i, "]: Mistral's template needs {\"function\": {...}}"));
    out += "{\"type\": \"function\", \"function\": {";
    bool first = true;
    for (const auto& [key, value] : function->items()) {
      if (key == "return") continue;
      out += (first ? "\"" : ", \"") + key + "\": ";
      out += value.is_string() ? "\"" + value.get<std::string>() + "\"" : tojson(value);
      first = false;
    }
    out += i + 1 < c.tools.size() ? "}}, " : "}}]";
  }
  return out + "[/AVAILABLE_TOOLS]";
}

// [INST] turns; the system message goes into the last user turn only where that ends the conversation; the tool
// definitions before the last user turn (and any turn with its text); calls and results carry their 9-character ids;
// assistant turns end with EOS. After the system message the roles alternate user/assistant, tool turns and calls
// left out. No generation prompt: the prompt ends with [/INST].
std::string render_mistral(const ChatTemplate& t, const Conversation& c) {
  const auto& ms = c.messages;
  const bool system = !ms.empty() && ms[0].role == "system";
  std::size_t turns = 0;
  const std::string* last_user = nullptr;
  for (std::size_t i = system ? 1 : 0; i < ms.size(); ++i) {
    if (ms[i].role == "user") last_user = &ms[i].content;
    if (ms[i].role == "tool" || ms[i].tool_calls_given) continue;
    if ((ms[i].role == "user") != (turns++ % 2 == 0))
      throw UsageError(
          "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...");
  }
  std::string out = t.bos_token;
  for (std::size_t i = system ? 1 : 0; i < ms.size(); ++i) {
    const Message& m = ms[i];
    if (m.role == "user") {
      if (c.tools_given && m.content == *last_user) out += mistral_tools(c);
      const bool with_system = system && i + 1 == ms.size();
      out += "[INST]" + (with_system ? ms[0].content + "\n\n" : "") + m.content + "[/INST]";
    } else if (m.tool_calls_given) {
      if (m.tool_calls.empty())  // the template would write "[TOOL_CALLS][" and leave it open
        throw UsageError(
            "an empty list of tool_calls: Mistral's template would begin a call and leave it open; "
            "leave tool_calls out");
      out += "[TOOL_CALLS][";
      for (std::size_t k = 0; k < m.tool_calls.size(); ++k) {
        const ToolCall& call = m.tool_calls[k];
        check_mistral_id(call.id);
        out +=
            "{\"name\": " + tojson(call.name) + ", \"arguments\": " + call.arguments + ", \"id\": \"" + call.id + "\"}";
        out += k + 1 < m.tool_calls.size() ? ", " : "]" + t.eos_token;
      }
    } else if (m.role == "assistant") {
      out += m.content + t.eos_token;
    } else if (m.role == "tool") {
      check_mistral_id(m.tool_call_id);
      out += "[TOOL_RESULTS]{\"content\": " + m.content + ", \"call_id\": \"" + m.tool_call_id + "\"}[/TOOL_RESULTS]";
    } else {
      throw UsageError(
          "Only user and assistant roles are supported, with the exception of an initial optional system message!");
    }
  }
  return out;
}

// DeepSeek's templates, V3's and R1's (the distilled Qwen and Llama models carry R1's), as vLLM renders them: content
// is never none there (null comes as ""), so they write an assistant turn's content and never its calls (both write
// calls only "if content is none"). Neither writes tool definitions. R1: the last system message alone (V3: all of
// them, apart by a blank line), an answer's reasoning left out (the text after its last </think>), and a generation
// prompt that opens <think>. Tool results are one block from the first to the next turn; a later block has no opening
// (the templates never reset it).
constexpr std::string_view deepseek_end = "<｜end▁of▁sentence｜>";

std::string render_deepseek(const ChatTemplate& t, const Conversation& c, const RenderOptions& options) {
  const bool r1 = t.opens_think;
  if (!c.tools.empty()) throw UsageError("chat template " + t.name + " writes no tool definitions: leave tools out");
  std::string system;
  bool first_system = true;
  for (const Message& m : c.messages)
    if (m.role == "system") {
      system = r1 || first_system ? m.content : system + "\n\n" + m.content;
      first_system = false;
    }
  std::string out = t.bos_token + system;
  bool in_tool_outputs = false, first_output = true;
  for (const Message& m : c.messages) {
    if (m.role == "user") {
      in_tool_outputs = false;
      out += "<｜User｜>" + m.content;
    } else if (m.role == "assistant") {
      if (in_tool_outputs) {
        out += "<｜tool▁outputs▁end｜>" + m.content + std::string(deepseek_end);
        in_tool_outputs = false;
        continue;
      }
      std::string_view content = m.content;
      if (const std::size_t close = content.rfind("</think>"); r1 && close != std::string_view::npos)
        content.remove_prefix(close + std::string_view("</think>").size());
      out += "<｜Assistant｜>" + std::string(content) + std::string(deepseek_end);
    } else if (m.role == "tool") {
      in_tool_outputs = true;
      out += (first_output ? "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" : "\n<｜tool▁output▁begin｜>") +
             m.content + "<｜tool▁output▁end｜>";
      first_output = false;
    }
  }
  if (in_tool_outputs) out += "<｜tool▁outputs▁end｜>";
  if (options.add_generation_prompt && !in_tool_outputs) out += r1 ? "<｜Assistant｜><think>\n" : "<｜Assistant｜>";
  return out;
}

// Gemma 3's template: BOS, each turn "<start_of_turn>ROLE\n" ... "<end_of_turn>\n" with the assistant's role named
// "model", the text trimmed (each part of a list alone, as vLLM hands the parts to this template, but a tool
// result's, which vLLM joins by newlines first), a first system message's text (its first part's: one there must be)
// and a blank line opening the next turn, untrimmed. After it the roles alternate user/assistant; a tool turn where
// an answer may stand is written under its own role, as the template does. No tool definitions, and an answer's calls
// left out (the template writes content only). Gemma 2's the same without a system turn (refused, in its template's
// words) and with each content trimmed whole (vLLM joins the parts by newlines for it).
std::string render_gemma(const ChatTemplate& t, const Conversation& c, const RenderOptions& options) {
  if (!c.tools.empty()) throw UsageError("chat template " + t.name + " writes no tool definitions: leave tools out");
  const auto& ms = c.messages;
  const bool system = !ms.empty() && ms[0].role == "system";
  if (system && !t.system_role)
    throw UsageError("messages[0]: System role not supported (chat template " + t.name +
                     " has no system turn: put the instructions in the first user message)");
  std::string prefix;
  if (system) {
    if (ms[0].text_parts && ms[0].text_parts->empty())  // the template reads its first part
      throw UsageError("messages[0].content: Gemma 3's template needs a text part in the system message");
    prefix = (ms[0].text_parts ? ms[0].text_parts->front() : ms[0].content) + "\n\n";
  }
  std::string out = t.bos_token;
  for (std::size_t i = system ? 1 : 0, turn = 0; i < ms.size(); ++i, ++turn) {
    const Message& m = ms[i];
    if ((m.role == "user") != (turn % 2 == 0))
      throw UsageError("Conversation roles must alternate user/assistant/user/assistant/...");
    out += "<start_of_turn>" + (m.role == "assistant" ? std::string("model") : m.role) + "\n";
    if (turn == 0) out += prefix;
    if (!t.content_parts || !m.text_parts || m.role == "tool")
      out += trim(m.content);
    else
      for (const std::string& part : *m.text_parts) out += trim(part);
    out += "<end_of_turn>\n";
  }
  if (options.add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::named(std::string_view name) {
  ChatTemplate t;
  t.name = std::string(name);
  if (name == "chatml") return t;
  if (name == "qwen3") return t.think = t.qwen3_tools_block = t.thinking_switch = true, t;
  if (name == "qwen3-instruct-2507") return t.qwen3_tools_block = true, t;
  if (name == "qwen3-thinking-2507") return t.think = t.qwen3_tools_block = t.opens_think = true, t;
  if (name == "qwen2.5") return t.default_system = std::string(qwen25_system), t;
  if (name == "qwen2.5-math") return t.default_system = std::string(qwen25_math_system), t;
  if (name == "qwen2") return t.default_system = std::string(qwen2_system), t;
  if (name == "qwen1.5") return t.default_system = std::string(qwen15_system), t;
  if (name == "mistral-nemo") {
    t.family = TemplateFamily::mistral;
    t.bos_token = "<s>";
    t.eos_token = "</s>";
    return t;
  }
  if (name == "gemma2" || name == "gemma3") {
    t.family = TemplateFamily::gemma;
    t.bos_token = "<bos>";
    t.eos_token = "<eos>";
    t.tool_format = false;
    t.system_role = t.content_parts = name == "gemma3";
    return t;
  }
  if (name == "deepseek-v3" || name == "deepseek-r1") {
    t.family = TemplateFamily::deepseek;
    t.bos_token = "<｜begin▁of▁sentence｜>";
    t.eos_token = std::string(deepseek_end);
    t.tool_format = false;
    t.opens_think = name == "deepseek-r1";
    return t;
  }
  t.family = TemplateFamily::llama3;
  t.bos_token = "<|begin_of_text|>";
  if (name == "llama3") return t;
  if (name == "llama3.1") return t.knowledge_cutoff = true, t;
  if (name == "llama3.2") return t.knowledge_cutoff = t.date_today = true, t;
  throw UsageError("chat template \"" + std::string(name) + "\" is not known (" + std::string(known_templates) + ")");
}

std::string ChatTemplate::render(const Conversation& conversation, const RenderOptions& options) const {
  switch (family) {
    case TemplateFamily::chatml: return render_chatml(*this, conversation, options);
    case TemplateFamily::llama3: return render_llama3(*this, conversation, options);
    case TemplateFamily::deepseek: return render_deepseek(*this, conversation, options);
    case TemplateFamily::gemma: return render_gemma(*this, conversation, options);
    case TemplateFamily::mistral: break;
  }
  return render_mistral(*this, conversation);
}

std::vector<TokenId> ChatTemplate::stop_ids(const Tokenizer& tokenizer) const {
  std::vector<std::string> names =
      family == TemplateFamily::chatml     ? std::vector<std::string>{"<|im_end|>", "<|endoftext|>"}
      : family == TemplateFamily::llama3   ? std::vector<std::string>{"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"}
      : family == TemplateFamily::deepseek ? std::vector<std::string>{std::string(deepseek_end)}
      : family == TemplateFamily::gemma    ? std::vector<std::string>{"<end_of_turn>", "<eos>"}
                                           : std::vector<std::string>{"</s>"};
  if (!eos_token.empty()) names.push_back(eos_token);
  std::vector<TokenId> ids;
  for (const std::string& n : names)
    if (const auto id = tokenizer.token_id(n); id && std::find(ids.begin(), ids.end(), *id) == ids.end())
      ids.push_back(*id);
  for (const TokenId id : generation_eos_ids)
    if (static_cast<std::size_t>(id) < tokenizer.vocab_size() && std::find(ids.begin(), ids.end(), id) == ids.end())
      ids.push_back(id);
  return ids;
}

std::vector<TokenId> encode_chat(const ChatTemplate& chat, const Tokenizer& tokenizer, const Conversation& conversation,
                                 const RenderOptions& options) {
  return tokenizer.encode(chat.render(conversation, options), Specials::match);
}

}  // namespace arclight::text
