#include "answer_json.hpp"

#include <algorithm>

#include "arclight/serve/ids.hpp"

namespace arclight::serve {
namespace {

// A token that top-p or top-k cut has log-prob -inf, which JSON cannot hold (it was written null): -9999, as vLLM.
float finite(float logprob) { return std::max(logprob, -9999.0f); }

json tool_calls_json(const ToolCallAnswer& calls, ToolFormat format) {
  json out = json::array();
  for (const ParsedToolCall& call : calls.calls)
    out.push_back({{"id", new_tool_call_id(format)},
                   {"type", "function"},
                   {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  return out;
}

// The answer's text (a forced call's beginning in front) as its reasoning and its content, which tool calls are read
// from; all of it the content where the answer has no reasoning to tell apart.
ReasoningSplit reasoning_and_content(const Answer& answer, std::size_t i) {
  std::string text = answer.forced_call + answer.choices[i]->text();
  if (!answer.thinking) return {"", std::move(text)};
  return split_reasoning(text);
}

json tool_calls_indexed(json calls) {
  for (std::size_t k = 0; k < calls.size(); ++k) calls[k]["index"] = k;
  return calls;
}

}  // namespace

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string event(const json& value) { return "data: " + dump(value) + "\n\n"; }

AnswerJson::AnswerJson(std::string model_name, const text::Tokenizer& tokenizer)
    : model_name_(std::move(model_name)), tokenizer_(tokenizer) {}

json AnswerJson::header(const Answer& answer, const char* object, json choices) const {
  return {{"id", answer.id},
          {"object", object},
          {"created", answer.created},
          {"model", model_name_},
          {"choices", std::move(choices)}};
}

json AnswerJson::chunk(const Answer& answer, bool chat, json choice) const {
  return header(answer, chat ? "chat.completion.chunk" : "text_completion", json::array({std::move(choice)}));
}

// ---- log-probs ----
std::string AnswerJson::token_text(std::int32_t id) const { return tokenizer_.piece(id, false, false); }

json AnswerJson::chat_logprob(std::int32_t id, float logprob) const {
  const std::string text = token_text(id);
  return {
      {"token", text}, {"logprob", finite(logprob)}, {"bytes", std::vector<unsigned char>(text.begin(), text.end())}};
}

json AnswerJson::chat_logprobs(const std::vector<StreamedToken>& tokens) const {
  json content = json::array();
  for (const StreamedToken& t : tokens) {
    json entry = chat_logprob(t.id, t.logprob);
    entry["top_logprobs"] = json::array();
    for (const auto& [id, logprob] : t.top) entry["top_logprobs"].push_back(chat_logprob(id, logprob));
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

// `offset`: where the first token's text starts in the choice's text, in characters (OpenAI's and vLLM's, Python's
// str indices); moved past the tokens by what each adds to the text (a special token's text is not in it).
json AnswerJson::completion_logprobs(const std::vector<StreamedToken>& tokens, std::size_t& offset) const {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const StreamedToken& t : tokens) {
    const std::string text = token_text(t.id);
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(finite(t.logprob));
    json top = json::object();
    for (const auto& [id, logprob] : t.top) top[token_text(id)] = finite(logprob);
    // The token drawn too, as OpenAI's and vLLM's (up to logprobs + 1 entries), unless an alternative of the same
    // text holds the place (pieces of one character, say): keyed by text, one would hide the other.
    if (!top.contains(text)) top[text] = finite(t.logprob);
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(offset);
    for (const char byte : tokenizer_.piece(t.id, /*skip_special=*/true, offset == 0))
      offset += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;  // a character counted at its first byte
  }
  return out;
}

// ---- whole answers ----
json AnswerJson::completion_choice(const Answer& answer, std::size_t i) const {
  const ChoiceReader& choice = *answer.choices[i];
  std::size_t offset = 0;
  return {{"index", i},
          {"text", choice.text()},
          {"logprobs", answer.logprobs ? completion_logprobs(choice.tokens(), offset) : json()},
          {"finish_reason", choice.finish_reason()},
          {"token_ids", choice.token_ids()},
          {"prompt_token_ids", answer.prompt_of(i)}};
}

json AnswerJson::chat_choice(const Answer& answer, std::size_t i) const {
  const ChoiceReader& choice = *answer.choices[i];
  const ReasoningSplit parts = reasoning_and_content(answer, i);
  json message = {{"role", "assistant"}, {"content", parts.content ? json(*parts.content) : json()}};
  std::string finish = choice.finish_reason();
  const std::string text = parts.content.value_or("");
  if (auto calls = answer.tools ? parse_tool_calls(text, answer.tool_format) : std::nullopt) {
    if (answer.one_tool_call) calls->calls.resize(1);
    message["content"] = calls->content.empty() ? json() : json(calls->content);
    message["tool_calls"] = tool_calls_json(*calls, answer.tool_format);
    // As OpenAI and vLLM answer: "tool_calls" for a call the model chose, or one required that it ended; a named
    // function's call ends as the answer did ("stop").
    if (answer.tool_choice == ToolChoice::automatic || (answer.tool_choice == ToolChoice::required && finish == "stop"))
      finish = "tool_calls";
  }
  if (answer.reasoning_parser) {  // null where the answer has none (thinking off)
    const json reasoning = answer.thinking ? json(parts.reasoning) : json();
    message["reasoning"] = message["reasoning_content"] = reasoning;
  }
  return {{"index", i},
          {"message", std::move(message)},
          {"logprobs", answer.logprobs ? chat_logprobs(choice.tokens()) : json()},
          {"finish_reason", finish},
          {"token_ids", choice.token_ids()}};
}

json AnswerJson::delta_choice(const Answer& answer, std::size_t i, bool chat, const Delta& delta, std::size_t& offset,
                              const std::string& reasoning) const {
  std::vector<std::int32_t> ids;
  for (const StreamedToken& t : delta.tokens) ids.push_back(t.id);
  json out = {{"index", i}};
  if (chat) {
    out["delta"] = json::object();
    if (!reasoning.empty()) out["delta"]["reasoning"] = out["delta"]["reasoning_content"] = reasoning;
    if (reasoning.empty() || !delta.text.empty()) out["delta"]["content"] = delta.text;  // tokens come with one
  } else {
    out["text"] = delta.text;
  }
  out["logprobs"] = !answer.logprobs ? json()
                    : chat           ? chat_logprobs(delta.tokens)
                                     : completion_logprobs(delta.tokens, offset);
  out["finish_reason"] = nullptr;
  out["token_ids"] = ids;
  return out;
}

json AnswerJson::reasoning_choice(std::size_t i, const std::string& reasoning) const {
  return {{"index", i},
          {"delta", {{"reasoning", reasoning}, {"reasoning_content", reasoning}}},
          {"logprobs", nullptr},
          {"finish_reason", nullptr},
          {"token_ids", json::array()}};
}

// The finish reason; with tools, first the rest of the answer, its text past the `shown` characters sent before and
// its tool calls, then the finish with every token's id and log-prob (apart: OpenAI's SDKs close a tool call's
// arguments only on a chunk before the finish).
std::vector<json> AnswerJson::last_choices(const Answer& answer, std::size_t i, bool chat, std::size_t shown) const {
  const ChoiceReader& choice = *answer.choices[i];
  json out = {{"index", i}};
  if (!answer.tools) {
    if (chat)
      out["delta"] = json::object();
    else
      out["text"] = "";
    out["finish_reason"] = choice.finish_reason();
    return {out};
  }
  const json whole = chat_choice(answer, i);
  json delta = json::object();
  const bool calls = whole["message"].contains("tool_calls");
  // Nothing sent yet: as the whole answer has it (the text before the calls less the blanks before them, none when
  // empty).
  if (shown == 0) {
    if (!whole["message"]["content"].is_null()) delta["content"] = whole["message"]["content"];
  } else {  // what the text sent before lacks: up to the calls (trailing blanks dropped), or to the end
    const std::string text = reasoning_and_content(answer, i).content.value_or("");
    std::string rest = text.substr(
        std::min(shown, text.size()),
        calls ? tool_calls_start(text, answer.tool_format) - std::min(shown, text.size()) : std::string::npos);
    if (calls) rest.erase(rest.find_last_not_of(" \t\r\n") + 1);
    if (!rest.empty()) delta["content"] = rest;
  }
  if (calls) delta["tool_calls"] = tool_calls_indexed(whole["message"]["tool_calls"]);
  std::vector<json> chunks;
  if (!delta.empty())
    chunks.push_back({{"index", i},
                      {"delta", std::move(delta)},
                      {"logprobs", nullptr},
                      {"finish_reason", nullptr},
                      {"token_ids", json::array()}});
  out["delta"] = json::object();
  out["logprobs"] = whole["logprobs"];
  out["finish_reason"] = whole["finish_reason"];
  out["token_ids"] = whole["token_ids"];
  chunks.push_back(std::move(out));
  return chunks;
}

}  // namespace arclight::serve
