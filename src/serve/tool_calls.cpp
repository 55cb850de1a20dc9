#include "tool_calls.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <random>

#include "arclight/text/chat_template.hpp"
#include "arclight/text/json_input.hpp"
#include "text_tags.hpp"

namespace arclight::serve {
namespace {

constexpr std::string_view open_tag = "<tool_call>";
constexpr std::string_view close_tag = "</tool_call>";

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// The text before an answer's calls, as its content: the blanks that lead up to the calls dropped, those it begins
// with kept (a stream has sent them by the time it learns that calls follow: Qwen3's "\n\n" after </think>).
std::string content_before_calls(std::string_view text) {
  const auto last = text.find_last_not_of(" \t\r\n");
  return last == std::string_view::npos ? std::string() : std::string(text.substr(0, last + 1));
}

// `arguments_required`: Llama 3.1's form, a bare JSON answer, is a call only with its arguments ("parameters" or
// "arguments", as vLLM's llama3_json parser takes them): {"name": "Ada", "age": 36} is an answer the user asked for.
std::optional<ParsedToolCall> call_of(const nlohmann::ordered_json& call, bool arguments_required = false) {
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return std::nullopt;
  if (arguments_required && !call.contains("parameters") && !call.contains("arguments")) return std::nullopt;
  const auto arguments =
      call.contains("arguments") ? call["arguments"] : call.value("parameters", nlohmann::ordered_json::object());
  if (!arguments.is_object()) return std::nullopt;
  // Written again as the model most likely wrote them (json.dumps' style, as vLLM gives them): the client echoes them
  // in its next request, whose prompt then repeats the model's own tokens.
  return ParsedToolCall{
      call["name"].get<std::string>(),
      text::as_tojson(arguments.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace))};
}

std::optional<ParsedToolCall> call_of(std::string_view body, bool arguments_required = false) {
  return call_of(text::parse_json<nlohmann::ordered_json>(body), arguments_required);
}

constexpr std::string_view python_tag = "<|python_tag|>";  // Llama 3.1 may write it before a call

// Llama 3.1: where a call may begin, the first character that is no blank; npos where the answer is blanks.
std::size_t llama3_call_start(std::string_view text) { return text.find_first_not_of(" \t\r\n"); }

// The length of the JSON object at the start of `text` (strings and their escapes skipped), npos where none ends.
std::size_t object_length(std::string_view text) {
  if (text.empty() || text[0] != '{') return std::string_view::npos;
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<ToolCallAnswer> parse_llama3_calls(std::string_view text) {
  const std::size_t at = llama3_call_start(text);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at);
  if (rest.substr(0, python_tag.size()) == python_tag) rest = trim(rest.substr(python_tag.size()));
  ToolCallAnswer answer;
  while (!rest.empty()) {
    const std::size_t length = object_length(rest);
    if (length == std::string_view::npos) return std::nullopt;
    std::optional<ParsedToolCall> call = call_of(rest.substr(0, length), true);
    if (!call) return std::nullopt;
    answer.calls.push_back(std::move(*call));
    rest = trim(rest.substr(length));
    if (!rest.empty() && rest[0] != ';') return std::nullopt;  // text after a call
    if (!rest.empty()) rest = trim(rest.substr(1));
  }
  if (answer.calls.empty()) return std::nullopt;
  return answer;
}

// StreamedToolCalls looks back open_tag.size() - 1 bytes for a tag that straddles the text it saw before.
static_assert(think_open.size() <= open_tag.size() && think_close.size() <= open_tag.size());

bool reasoning_under_way(std::size_t opened, std::size_t closed) {
  return opened != std::string_view::npos && (closed == std::string_view::npos || closed < opened);
}

// Hermes: where calls may begin, after the reasoning (a <think> block may name the tag while it plans one): past the
// last </think>, or from the start where there is none; npos inside a <think> not yet closed, whose tags are its
// reasoning's (as vLLM's reasoning parser gives an unclosed block to reasoning_content, not to the calls).
std::size_t after_reasoning(std::string_view text) {
  const std::size_t opened = text.rfind(think_open), closed = text.rfind(think_close);
  if (reasoning_under_way(opened, closed)) return std::string_view::npos;
  return closed == std::string_view::npos ? 0 : closed;
}

constexpr std::string_view mistral_marker = "[TOOL_CALLS]";

std::optional<ToolCallAnswer> parse_mistral_calls(std::string_view text) {
  const std::size_t at = text.find(mistral_marker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string rest;  // after the first marker, the others left out
  for (std::size_t from = at; from != std::string_view::npos;) {
    const std::size_t next = text.find(mistral_marker, from + mistral_marker.size());
    rest += text.substr(from + mistral_marker.size(),
                        next == std::string_view::npos ? next : next - from - mistral_marker.size());
    from = next;
  }
  auto list = text::parse_json<nlohmann::ordered_json>(trim(rest));
  if (list.is_discarded()) {  // vLLM's fallback: the text from the first "[{" to the last "}]"
    const std::size_t begin = rest.find("[{"), end = rest.rfind("}]");
    if (begin == std::string::npos || end == std::string::npos || end < begin) return std::nullopt;
    list = text::parse_json<nlohmann::ordered_json>(std::string_view(rest).substr(begin, end + 2 - begin));
  }
  if (!list.is_array() || list.empty()) return std::nullopt;
  ToolCallAnswer answer{content_before_calls(text.substr(0, at)), {}};
  for (const auto& item : list) {
    if (!item.is_object() || !item.contains("arguments")) return std::nullopt;  // vLLM's reads "arguments" only
    std::optional<ParsedToolCall> call = call_of(item, true);
    if (!call) return std::nullopt;
    answer.calls.push_back(std::move(*call));
  }
  return answer;
}

}  // namespace

std::size_t tool_calls_start(std::string_view text, ToolFormat format) {
  if (format == ToolFormat::llama3_json) return parse_llama3_calls(text) ? llama3_call_start(text) : std::string::npos;
  if (format == ToolFormat::mistral) return text.find(mistral_marker);
  const std::size_t from = after_reasoning(text);
  return from == std::string_view::npos ? from : text.find(open_tag, from);
}

std::size_t text_before_tool_calls(std::string_view text, ToolFormat format) {
  if (format == ToolFormat::llama3_json) {
    const std::size_t at = llama3_call_start(text);
    if (at == std::string_view::npos) return 0;
    const std::string_view first = text.substr(at, python_tag.size());
    return first[0] == '{' || python_tag.substr(0, first.size()) == first ? 0 : text.size();
  }
  if (format == ToolFormat::mistral) {
    const std::size_t at = text.find(mistral_marker);
    return at != std::string_view::npos ? at : held_tail(text, mistral_marker);
  }
  // Reasoning under way is shown as it comes, a tag it names too; after it, up to the first tag.
  const std::size_t from = after_reasoning(text);
  if (from == std::string_view::npos) return text.size();
  if (const std::size_t tag = text.find(open_tag, from); tag != std::string_view::npos) return tag;
  return held_tail(text, open_tag);
}

std::size_t StreamedToolCalls::text_before(std::string_view text) {
  constexpr auto none = std::string_view::npos;
  if (format_ == ToolFormat::llama3_json) return text_before_tool_calls(text, format_);  // reads the first characters
  if (format_ == ToolFormat::mistral) {  // the first marker, looked for in the new text and a marker's length before
    if (first_call_ == none) {
      const std::size_t from = scanned_ > mistral_marker.size() - 1 ? scanned_ - (mistral_marker.size() - 1) : 0;
      if (const std::size_t at = text.substr(std::min(from, text.size())).find(mistral_marker); at != none)
        first_call_ = from + at;
    }
    scanned_ = text.size();
    return first_call_ != none ? first_call_ : held_tail(text, mistral_marker);
  }
  // The new text, and a tag's length less one before it: a tag may straddle the end of the text seen before.
  const std::size_t from = scanned_ > open_tag.size() - 1 ? scanned_ - (open_tag.size() - 1) : 0;
  scanned_ = text.size();
  const std::string_view recent = text.substr(std::min(from, text.size()));
  if (const std::size_t at = recent.rfind(think_open); at != none) opened_ = from + at;
  if (const std::size_t at = recent.rfind(think_close); at != none && (closed_ == none || from + at > closed_)) {
    closed_ = from + at;
    first_call_ = none;  // calls come after the last </think>
  }
  if (reasoning_under_way(opened_, closed_)) return text.size();
  if (first_call_ == none) {
    const std::size_t start = std::max(from, closed_ == none ? 0 : closed_);
    if (const std::size_t at = text.substr(std::min(start, text.size())).find(open_tag); at != none)
      first_call_ = start + at;
  }
  return first_call_ != none ? first_call_ : held_tail(text, open_tag);
}

std::optional<ToolCallAnswer> parse_tool_calls(std::string_view text, ToolFormat format) {
  if (format == ToolFormat::llama3_json) return parse_llama3_calls(text);
  if (format == ToolFormat::mistral) return parse_mistral_calls(text);
  std::size_t at = tool_calls_start(text);
  if (at == std::string_view::npos) return std::nullopt;
  ToolCallAnswer answer{content_before_calls(text.substr(0, at)), {}};
  std::string_view rest = text.substr(at);
  while (!rest.empty()) {
    // Text between or after the calls is dropped, as vLLM's Hermes parser drops it: the calls are the answer (read
    // as text, a call the model made well was never run).
    if (rest.substr(0, open_tag.size()) != open_tag) {
      const std::size_t next = rest.find(open_tag);
      if (next == std::string_view::npos) break;
      rest = rest.substr(next);
    }
    const std::string_view body = rest.substr(open_tag.size());
    // Ended by the first close tag before which the call is whole JSON (an argument may hold the tag; a few tries,
    // not one parse per tag of an answer gone astray), or by the end of the text (generation stopped at the close
    // tag: a client's stop string, as vLLM's Hermes parser allows).
    std::optional<ParsedToolCall> call;
    std::size_t end = body.find(close_tag);
    for (int tries = 0; end != std::string_view::npos && !(call = call_of(body.substr(0, end))) && ++tries < 16;)
      end = body.find(close_tag, end + 1);
    if (!call && end != std::string_view::npos) return std::nullopt;
    if (!call && !(call = call_of(body))) return std::nullopt;
    answer.calls.push_back(std::move(*call));
    rest = end == std::string_view::npos ? std::string_view() : trim(body.substr(end + close_tag.size()));
  }
  return answer;
}

std::string new_tool_call_id(ToolFormat format) {
  static constexpr std::string_view alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 random{std::random_device{}()};
  const bool mistral = format == ToolFormat::mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += alphabet[random() % alphabet.size()];
  return id;
}

}  // namespace arclight::serve
