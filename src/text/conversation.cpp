// Conversations from OpenAI-style JSON, and values serialized as Jinja's tojson writes them in Hugging Face's
// templates (Python's json.dumps: ", " and ": " between items, non-ASCII kept).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "arclight/core/log.hpp"
#include "arclight/text/chat_template.hpp"
#include "arclight/text/json_input.hpp"
#include "json_text.hpp"

namespace arclight::text {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written: tojson keeps them so

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw UsageError(log::concat("chat messages: ", where, ": ", what));
}

// A double as Python's repr writes it: nlohmann's shortest digits and notation agree with it but for 1e15 <= |x| <
// 1e16, which Python writes in full (1000000000000000.0) and nlohmann with an exponent (1e+15).
std::string python_float(const json& value) {
  std::string text = value.dump();
  const std::size_t exponent = text.find("e+15");
  if (exponent == std::string::npos || exponent + 4 != text.size()) return text;  // e+150 is no e+15
  const std::size_t sign = text[0] == '-' ? 1 : 0;
  std::string digits = text.substr(sign, exponent - sign);  // d or d.ddd: at most 17 digits
  if (digits.size() > 1) digits.erase(1, 1);
  std::string whole = digits.substr(0, std::min<std::size_t>(16, digits.size()));
  whole.resize(16, '0');
  return text.substr(0, sign) + whole + "." + (digits.size() > 16 ? digits.substr(16) : "0");
}

void append_tojson(std::string& out, const json& value) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      out += first ? "" : ", ";
      first = false;
      out += json(key).dump() + ": ";
      append_tojson(out, item);
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < value.size(); ++i) {
      out += i ? ", " : "";
      append_tojson(out, value[i]);
    }
    out += ']';
  } else if (value.is_number_float()) {
    out += python_float(value);
  } else {
    out += value.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

void append_tojson_indented(std::string& out, const json& value, int indent, int depth) {
  const bool object = value.is_object();
  if ((!object && !value.is_array()) || value.empty()) return append_tojson(out, value);  // {} and [] as they are
  const std::string inner = "\n" + std::string(static_cast<std::size_t>(indent * (depth + 1)), ' ');
  out += object ? '{' : '[';
  bool first = true;
  for (const auto& [key, item] : value.items()) {
    out += first ? inner : "," + inner;
    first = false;
    if (object) out += json(key).dump() + ": ";
    append_tojson_indented(out, item, indent, depth + 1);
  }
  out += "\n" + std::string(static_cast<std::size_t>(indent * depth), ' ') + (object ? '}' : ']');
}

// A string, null (""), or a list of text parts joined by newlines (as vLLM joins them).
std::string content_of(const json& message, const std::string& where) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array())
    bad(where + ".content", log::concat("expected a string or a list of parts, found ", it->type_name()));
  std::string text;
  for (const json& part : *it) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad(where + ".content", "only {\"type\": \"text\", \"text\": ...} parts are supported, found " + part.dump());
    if (&part != &it->front()) text += '\n';
    text += part["text"].get<std::string>();
  }
  return text;
}

// Python's truth of a JSON value: None, False, 0, 0.0, "", [] and {} are false.
bool python_false(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return true;
    case json::value_t::boolean: return !value.get<bool>();
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return value == 0;
    case json::value_t::string: return value.get_ref<const std::string&>().empty();
    default: return value.empty();  // an object or an array
  }
}

ToolCall tool_call_of(const json& call, const std::string& where) {
  const json& function = call.is_object() && call.contains("function") ? call["function"] : call;
  if (!function.is_object() || !function.contains("name") || !function["name"].is_string())
    bad(where, "a tool call needs a function name, found " + call.dump());
  ToolCall out{function["name"].get<std::string>(), "{}", ""};
  if (call.is_object() && call.contains("id") && call["id"].is_string()) out.id = call["id"].get<std::string>();
  const auto arguments = function.find("arguments");
  // What Python takes for false (None, "", [], 0, false) is {}, as vLLM's _postprocess_messages gives it to the
  // template: not null, an empty text, [] or 0.
  if (arguments == function.end() || python_false(*arguments)) return out;
  if (!arguments->is_string()) {
    out.arguments = tojson(*arguments);
    return out;
  }
  // Text (OpenAI's clients send arguments as text) is parsed and written as the template's tojson writes a value, as
  // vLLM parses it before rendering: Qwen2.5's and Llama 3.1's templates quoted the text whole, Qwen3's pasted it with
  // the client's spacing. Text that is no JSON is rendered as given (vLLM refuses the request).
  const json parsed = parse_json<json>(arguments->get<std::string>());
  out.arguments = parsed.is_discarded() ? arguments->get<std::string>() : tojson(parsed);
  return out;
}

Message message_of(const json& m, const std::string& where) {
  if (!m.is_object()) bad(where, log::concat("expected an object, found ", m.type_name()));
  if (!m.contains("role") || !m["role"].is_string()) bad(where + ".role", "missing or not a string");
  Message out{m["role"].get<std::string>(), content_of(m, where), std::nullopt, {}, "", false, std::nullopt};
  // Null or absent content is no parts, as vLLM hands it to a template that reads parts.
  if (const auto content = m.find("content"); content == m.end() || !content->is_string()) {
    out.text_parts.emplace();
    if (content != m.end() && content->is_array())
      for (const json& part : *content) out.text_parts->push_back(part["text"].get<std::string>());  // checked above
  }
  if (out.role == "developer") out.role = "system";  // OpenAI's newer name for it, which its clients send
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool")
    bad(where + ".role", "\"" + out.role + "\" is not one of system (or developer), user, assistant, tool");
  // An answer's reasoning, under either name an OpenAI-style server gives it (vLLM 0.11 both, later "reasoning").
  for (const char* name : {"reasoning_content", "reasoning"})
    if (const auto reasoning = m.find(name); !out.reasoning_content && reasoning != m.end() && reasoning->is_string())
      out.reasoning_content = reasoning->get<std::string>();
  const auto call_id = m.find("tool_call_id");
  if (call_id != m.end() && call_id->is_string()) out.tool_call_id = call_id->get<std::string>();
  const auto calls = m.find("tool_calls");
  if (calls != m.end() && !calls->is_null()) {
    if (!calls->is_array()) bad(where + ".tool_calls", "expected a list");
    out.tool_calls_given = true;
    for (std::size_t i = 0; i < calls->size(); ++i)
      out.tool_calls.push_back(tool_call_of((*calls)[i], log::concat(where, ".tool_calls[", i, "]")));
  }
  return out;
}

}  // namespace

std::string tojson(const nlohmann::ordered_json& value) {
  std::string out;
  append_tojson(out, value);
  return out;
}

std::string tojson_indented(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  append_tojson_indented(out, value, indent, 0);
  return out;
}

std::string as_tojson(std::string_view json_text) {
  const json value = parse_json<json>(json_text);
  if (value.is_discarded())
    throw UsageError(
        log::concat("not JSON (or nested deeper than ", max_json_depth, " levels): ", json_text.substr(0, 80)));
  return tojson(value);
}

Conversation parse_conversation(std::string_view json_text) {
  const json root = parse_json<json>(json_text);
  if (root.is_discarded()) bad("(input)", log::concat("not JSON, or nested deeper than ", max_json_depth, " levels"));
  const json* messages = &root;
  Conversation out;
  if (root.is_object()) {
    if (!root.contains("messages")) bad("(input)", "an object needs \"messages\"");
    messages = &root["messages"];
    if (root.contains("tools") && !root["tools"].is_null()) {
      if (!root["tools"].is_array()) bad("tools", "expected a list");
      out.tools_given = true;
      for (const json& tool : root["tools"]) out.tools.push_back(tojson(tool));
    }
  }
  if (!messages->is_array()) bad("messages", log::concat("expected a list, found ", messages->type_name()));
  for (std::size_t i = 0; i < messages->size(); ++i)
    out.messages.push_back(message_of((*messages)[i], log::concat("messages[", i, "]")));
  return out;
}

}  // namespace arclight::text
