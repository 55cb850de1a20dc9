#include "openai_request.hpp"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "arclight/core/log.hpp"
#include "arclight/text/json_input.hpp"

namespace arclight::serve {
namespace {

using json = nlohmann::ordered_json;  // tools keep their keys' order: the template writes them as given

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw HttpError(400, param.empty() ? message : param + ": " + message, "invalid_request_error", param);
}

json parse_body(std::string_view body) {
  json root = text::parse_json<json>(body);
  if (root.is_discarded())
    bad("", "the request body is not valid JSON (or nests deeper than " + std::to_string(text::max_json_depth) +
                " levels)");
  if (!root.is_object()) bad("", "the request body must be a JSON object");
  return root;
}

// The field, or nullptr when it is absent or null (OpenAI's clients send null for "not given").
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& body, const char* name, double fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad(name, log::concat("expected a number, found ", v->type_name()));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) bad(name, log::concat(x, " is out of range [", lo, ", ", hi, "]"));
  return x;
}

std::optional<std::int64_t> integer(const json& body, const char* name, std::int64_t lo, std::int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad(name, log::concat("expected an integer, found ", v->dump()));
  const bool too_large = v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(hi);
  const std::int64_t x = too_large ? hi : v->get<std::int64_t>();
  if (too_large || x < lo || x > hi) bad(name, log::concat(v->dump(), " is out of range [", lo, ", ", hi, "]"));
  return x;
}

bool boolean(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return false;
  if (!v->is_boolean()) bad(name, log::concat("expected a boolean, found ", v->type_name()));
  return v->get<bool>();
}

std::string string_field(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return "";
  if (!v->is_string()) bad(name, log::concat("expected a string, found ", v->type_name()));
  return v->get<std::string>();
}

// Each read of an answer looks for the start of every stop string at its end: 16 of 60 KB made that billions of
// comparisons per token.
constexpr std::size_t max_stop_bytes = 1024;

std::vector<std::string> stop_strings(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  const char* expected = "expected a string or a list of at most 16 strings";
  if (!v->is_string() && (!v->is_array() || v->size() > 16)) bad("stop", expected);
  std::vector<std::string> out;
  for (const json& s : v->is_string() ? json::array({*v}) : *v) {
    if (!s.is_string()) bad("stop", expected);
    if (s.get<std::string>().size() > max_stop_bytes)
      bad("stop", "a stop string is at most " + std::to_string(max_stop_bytes) + " bytes");
    if (!s.get<std::string>().empty()) out.push_back(s.get<std::string>());
  }
  return out;
}

// OpenAI's and vLLM's parameters that change what is sampled and that arclight does not implement: refused unless
// they ask for nothing (absent, null, or their no-op value), so that no agent takes answers that ignored them.
void refuse_unimplemented(const json& body) {
  const auto refuse = [](const char* name, const char* no_op) {
    bad(name, log::concat("is not implemented here (arclight samples without it): leave it out", no_op));
  };
  for (const char* name : {"presence_penalty", "frequency_penalty"})
    if (const json* v = field(body, name); v && !(v->is_number() && v->get<double>() == 0)) refuse(name, " or 0");
  if (const json* v = field(body, "repetition_penalty"); v && !(v->is_number() && v->get<double>() == 1))
    refuse("repetition_penalty", " or 1");
  if (const json* v = field(body, "logit_bias"); v && !(v->is_object() && v->empty())) refuse("logit_bias", " or {}");
  if (const json* v = field(body, "min_tokens"); v && !(v->is_number() && v->get<double>() == 0))
    refuse("min_tokens", " or 0");
  if (const json* v = field(body, "min_p"); v && !(v->is_number() && v->get<double>() == 0)) refuse("min_p", " or 0");
  if (const json* v = field(body, "ignore_eos"); v && *v != false) refuse("ignore_eos", " or false");
  for (const char* name : {"bad_words", "allowed_token_ids"})
    if (const json* v = field(body, name); v && !(v->is_array() && v->empty())) refuse(name, " or []");
  if (const json* v = field(body, "response_format");
      v && !(v->is_object() && v->contains("type") && (*v)["type"] == "text"))
    refuse("response_format", " or {\"type\": \"text\"} (no JSON mode, no schema)");
  for (const char* name : {"guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"})
    if (field(body, name)) refuse(name, "");
  if (const json* v = field(body, "echo"); v && *v != false) refuse("echo", " or false");
  // vLLM's switches away from what it (and arclight) does by default.
  if (const json* v = field(body, "include_stop_str_in_output"); v && *v != false)
    refuse("include_stop_str_in_output", " or false");
  if (const json* v = field(body, "skip_special_tokens"); v && *v != true) refuse("skip_special_tokens", " or true");
  if (const json* v = field(body, "add_generation_prompt"); v && *v != true)
    refuse("add_generation_prompt", " or true");
  if (const json* v = field(body, "continue_final_message"); v && *v != false)
    refuse("continue_final_message", " or false");
  if (field(body, "prompt_logprobs")) refuse("prompt_logprobs", "");
  if (const json* v = field(body, "suffix"); v && *v != "") refuse("suffix", "");
}

Sampling sampling_of(const json& body) {
  refuse_unimplemented(body);
  Sampling s;
  s.temperature = number(body, "temperature", 1.0, 0.0, 100.0);
  s.top_p = number(body, "top_p", 1.0, std::numeric_limits<double>::min(), 1.0);
  s.top_k = static_cast<int>(
      std::max<std::int64_t>(0, integer(body, "top_k", -1, std::numeric_limits<int>::max()).value_or(0)));
  auto max_tokens = integer(body, "max_completion_tokens", 1, std::numeric_limits<int>::max());
  if (!max_tokens) max_tokens = integer(body, "max_tokens", 1, std::numeric_limits<int>::max());
  if (max_tokens) s.max_tokens = static_cast<int>(*max_tokens);
  s.stop = stop_strings(body);
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array() || ids->size() > 64) bad("stop_token_ids", "expected a list of at most 64 token ids");
    for (const json& id : *ids) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
          id.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max())
        bad("stop_token_ids", "token ids must be integers from 0 to 2^31-1, found " + id.dump());
      s.stop_token_ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
    }
  }
  s.n = static_cast<int>(integer(body, "n", 1, max_choices).value_or(1));
  if (const auto best_of = integer(body, "best_of", 1, max_choices); best_of && *best_of != s.n)
    bad("best_of", "is not implemented here: leave it out or give it as n");
  const auto seed =
      integer(body, "seed", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
  if (seed) s.seed = static_cast<std::uint64_t>(*seed);
  s.stream = boolean(body, "stream");
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "expected an object");
    if (!s.stream) bad("stream_options", "only with \"stream\": true");
    s.include_usage = boolean(*options, "include_usage");
  }
  return s;
}

std::int32_t token_of(const json& v) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
      v.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max())
    bad("prompt", "token ids must be integers from 0 to 2^31-1, found " + v.dump());
  return static_cast<std::int32_t>(v.get<std::int64_t>());
}

TokenList token_list(const json& v) {
  TokenList out;
  for (const json& id : v) out.push_back(token_of(id));
  return out;
}

// A string, a list of token ids, or a list of either.
std::vector<Prompt> prompts_of(const json& body) {
  const json* v = field(body, "prompt");
  if (!v) bad("prompt", "missing");
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array() || v->empty())
    bad("prompt", "expected a string, a list of token ids, or a non-empty list of those");
  if ((*v)[0].is_number()) return {token_list(*v)};
  std::vector<Prompt> out;
  for (const json& p : *v) {
    if (p.is_string())
      out.emplace_back(p.get<std::string>());
    else if (p.is_array() && !p.empty())
      out.emplace_back(token_list(p));
    else
      bad("prompt", "each prompt of a list must be a string or a non-empty list of token ids");
  }
  return out;
}

void check_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "expected a list");
  for (const json& tool : tools) {
    const json* function = tool.is_object() ? field(tool, "function") : nullptr;
    if (!function || !function->is_object() || !field(*function, "name") || !(*function)["name"].is_string() ||
        (field(tool, "type") && tool["type"] != "function"))
      bad("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    const json* description = field(*function, "description");
    const json* parameters = field(*function, "parameters");
    if ((description && !description->is_string()) || (parameters && !parameters->is_object()))
      bad("tools", "a function's description is text and its parameters an object");
  }
}

// A tool as vLLM hands it to the template (its request model's dump): "type" and "function" first, the function's
// name, description and parameters first, null where not given, the other keys after them as given. Templates write
// tools whole (Qwen's tojson, Mistral's every key), so that the prompt holds what vLLM's would.
json vllm_tool(const json& tool) {
  const json& function = tool["function"];
  json dumped = {{"name", function["name"]},
                 {"description", function.value("description", json())},
                 {"parameters", function.value("parameters", json())}};
  for (const auto& [key, value] : function.items())
    if (key != "name" && key != "description" && key != "parameters") dumped[key] = value;
  json out = {{"type", "function"}, {"function", std::move(dumped)}};
  for (const auto& [key, value] : tool.items())
    if (key != "type" && key != "function") out[key] = value;
  return out;
}

bool has_tool(const json& tools, const std::string& name) {
  for (const json& tool : tools)
    if (tool["function"]["name"] == name) return true;
  return false;
}

void read_tool_choice(const json& body, const json& tools, ChatRequest& out) {
  const json* v = field(body, "tool_choice");
  if (!v) return;
  if (v->is_string()) {
    const std::string choice = v->get<std::string>();
    if (choice == "none")
      out.tool_choice = ToolChoice::none;
    else if (choice == "auto")
      out.tool_choice = ToolChoice::automatic;
    else if (choice == "required" && !tools.empty())
      out.tool_choice = ToolChoice::required;
    else if (choice == "required")
      bad("tool_choice", "\"required\" needs tools");
    else
      bad("tool_choice", "expected none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    return;
  }
  const json* function = v->is_object() ? field(*v, "function") : nullptr;
  if (!function || !function->is_object() || !field(*function, "name") || !(*function)["name"].is_string())
    bad("tool_choice", "expected none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  out.tool_choice = ToolChoice::named;
  out.tool_name = (*function)["name"].get<std::string>();
  if (!has_tool(tools, out.tool_name)) bad("tool_choice", "no tool named \"" + out.tool_name + "\" in tools");
}

// The tools the prompt shows, as vLLM hands them on: all, or the one named.
json tools_shown(const json& tools, const ChatRequest& request) {
  json out = json::array();
  for (const json& tool : tools)
    if (request.tool_choice != ToolChoice::named || tool["function"]["name"] == request.tool_name)
      out.push_back(vllm_tool(tool));
  return out;
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body) {
  const json root = parse_body(body);
  CompletionRequest out{string_field(root, "model"), prompts_of(root), sampling_of(root)};
  if (field(root, "add_special_tokens")) out.add_special_tokens = boolean(root, "add_special_tokens");
  if (out.prompts.size() * static_cast<std::size_t>(out.sampling.n) > max_request_choices)
    bad("prompt", log::concat(out.prompts.size(), " prompts of ", out.sampling.n, " choices each: at most ",
                              max_request_choices, " choices a request"));
  // Completions' logprobs is a count of alternatives per token.
  if (const auto k = integer(root, "logprobs", 0, max_top_logprobs)) {
    out.sampling.logprobs = true;
    out.sampling.top_logprobs = static_cast<int>(*k);
  }
  return out;
}

ChatRequest parse_chat_request(std::string_view body) {
  const json root = parse_body(body);
  ChatRequest out;
  out.model = string_field(root, "model");
  out.sampling = sampling_of(root);
  out.sampling.logprobs = boolean(root, "logprobs");
  out.sampling.top_logprobs = static_cast<int>(integer(root, "top_logprobs", 0, max_top_logprobs).value_or(0));
  if (out.sampling.top_logprobs > 0 && !out.sampling.logprobs) bad("top_logprobs", "needs \"logprobs\": true");
  const json* messages = field(root, "messages");
  if (!messages || !messages->is_array() || messages->empty()) bad("messages", "expected a non-empty list");
  const json* tools = field(root, "tools");
  const json no_tools = json::array();
  if (tools) check_tools(*tools);
  read_tool_choice(root, tools ? *tools : no_tools, out);
  if (field(root, "parallel_tool_calls")) out.parallel_tool_calls = boolean(root, "parallel_tool_calls");
  // vLLM's way to pass the template's variables; of them only Qwen3's enable_thinking changes a built-in template.
  if (const json* kwargs = field(root, "chat_template_kwargs")) {
    if (!kwargs->is_object()) bad("chat_template_kwargs", "expected an object");
    if (field(*kwargs, "enable_thinking")) out.enable_thinking = boolean(*kwargs, "enable_thinking");
  }
  json conversation = {{"messages", *messages}};
  // As given, an empty list too (Llama 3.1's template writes its tools block for one, as vLLM renders it); none for
  // tool_choice none.
  if (tools && out.tool_choice != ToolChoice::none) conversation["tools"] = tools_shown(*tools, out);
  try {
    out.conversation = text::parse_conversation(conversation.dump());
  } catch (const std::exception& e) {  // UsageError, or the JSON library's on a part of an unexpected type
    bad("messages", e.what());
  }
  return out;
}

}  // namespace arclight::serve
