#pragma once
// Chat templates: messages (system, user, assistant with tool calls, tool) to the text a model was trained on, and
// to its tokens. Built in, not interpreted: ChatML as Qwen uses it (Qwen3's and Thinking-2507's <think> blocks,
// Instruct-2507's answers as given, the default system prompts of Qwen1.5, Qwen2, Qwen2.5 and Qwen2.5-Math,
// Hermes-style <tool_call> JSON), Llama 3 (3.0, and 3.1's system preamble), Mistral NeMo's [INST] turns with
// [TOOL_CALLS] and their ids, DeepSeek's <｜User｜>/<｜Assistant｜> turns (V3's, and R1's as its distilled Qwen and
// Llama models carry it), and Gemma's <start_of_turn> turns (Gemma 3's, and Gemma 2's, which Gemma 1.1 shares). A model
// directory's tokenizer_config.json `chat_template` (or chat_template.jinja) is recognised by its markers; a template
// that matches none is an error unless a name is given.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arclight/text/tokenizer.hpp"

namespace arclight::text {

struct ToolCall {
  std::string name;
  std::string arguments;  // as the template writes it: a JSON text (an object serialized like Jinja's tojson)
  std::string id;         // the client's id of the call, which Mistral's templates write (empty where none)
};

struct Message {
  std::string role;  // system, user, assistant, tool
  std::string content;
  std::optional<std::string> reasoning_content;  // Qwen3: the assistant's thinking, when given apart
  std::vector<ToolCall> tool_calls;
  std::string tool_call_id;       // tool: the id of the call it answers, which Mistral's templates write
  bool tool_calls_given = false;  // "tool_calls" not absent nor null: an empty list is a call to Mistral's templates
  // Content given as a list of parts (none where null): each part's text, which content joins by newlines (Gemma 3's
  // template reads them one by one, as vLLM hands them to it)
  std::optional<std::vector<std::string>> text_parts = std::nullopt;
};

struct Conversation {
  std::vector<Message> messages;
  std::vector<std::string> tools;  // each tool's definition as JSON text, serialized like Jinja's tojson
  // "tools" given, even as an empty list: Llama 3.1's and 3.2's templates write their tools block for one ("tools is
  // not none"), as transformers and vLLM render it; Qwen's write none ("if tools").
  bool tools_given = false;
};

// OpenAI-style JSON: a list of messages, or {"messages": [...], "tools": [...]}. Content may be a string, null, or
// a list of {"type": "text", "text": ...} parts; tool call arguments an object or a JSON string. Throws UsageError.
Conversation parse_conversation(std::string_view json_text);
// A JSON text written again as the templates' tojson writes JSON (Python's json.dumps: ", " and ": "), as vLLM
// gives a tool call's arguments back: a client echoes them, and the template renders the string as it is. Throws
// UsageError for text that is not JSON.
std::string as_tojson(std::string_view json_text);

struct RenderOptions {
  bool add_generation_prompt = false;   // end with the assistant's header: what the model continues
  std::optional<bool> enable_thinking;  // Qwen3: false adds an empty <think></think> after that header
};

enum class TemplateFamily { chatml, llama3, mistral, deepseek, gemma };

inline constexpr std::string_view known_templates =
    "chatml, qwen1.5, qwen2, qwen2.5, qwen2.5-math, qwen3, qwen3-instruct-2507, qwen3-thinking-2507, llama3, "
    "llama3.1, llama3.2, mistral-nemo, deepseek-v3, deepseek-r1, gemma2, gemma3";

struct ChatTemplate {
  TemplateFamily family = TemplateFamily::chatml;
  std::string name;  // one of known_templates
  // Qwen3 and Thinking-2507: <think> blocks of assistant turns after the last user query (Instruct-2507 writes an
  // answer as given)
  bool think = false;
  // Qwen3 and its 2507 models: with tools, the system turn holds the conversation's system message only, where
  // Qwen2.5's writes its default prompt when there is none
  bool qwen3_tools_block = false;
  bool thinking_switch = false;  // Qwen3: enable_thinking false closes an empty <think> in the generation prompt
  // DeepSeek R1, Qwen3 Thinking-2507: the generation prompt opens <think>: every answer begins reasoning
  bool opens_think = false;
  std::string default_system;     // Qwen1.5, 2, 2.5, 2.5-Math: the system prompt used when the conversation gives none
  bool knowledge_cutoff = false;  // Llama 3.1 and 3.2: the "Cutting Knowledge Date" system preamble
  bool date_today = false;        // Llama 3.2: today's date in it (strftime_now), 3.1's a fixed one
  // Gemma 2: a system message is refused (its template has no system turn)
  bool system_role = true;
  // Gemma 3: a message's content parts are read one by one (the others read them joined by newlines)
  bool content_parts = false;
  // Llama 3, Mistral, DeepSeek, Gemma: <|begin_of_text|>, <s>, <｜begin▁of▁sentence｜>, <bos>, first
  std::string bos_token;
  // ChatML: Hermes-style tools (<tools>, <tool_call>, <tool_response>); false for a model's own template that has
  // none (plain ChatML, Qwen2-Instruct's), which then refuses tools and tool turns rather than render them otherwise.
  bool tool_format = true;
  std::string eos_token;  // tokenizer_config.json's eos_token, a stop token (Mistral's templates end turns with it)
  // generation_config.json's eos_token_id (else config.json's): where transformers' generate and vLLM stop too, a
  // fine-tune's own end token among them
  std::vector<TokenId> generation_eos_ids;

  // By name; throws UsageError naming the known ones.
  static ChatTemplate named(std::string_view name);
  // From a Jinja template's text by its markers; throws TokenizerFileError naming `where` where none matches.
  static ChatTemplate recognize(std::string_view jinja, const std::string& where);

  std::string render(const Conversation& conversation, const RenderOptions& options = {}) const;
  // The model writes reasoning in a <think> block (Qwen3, Thinking-2507, DeepSeek R1): what a reasoning parser reads.
  bool reasons() const { return thinking_switch || opens_think; }
  // The tokens generation stops at: <|im_end|>, <|eot_id|> (and <|eom_id|>) or <end_of_turn>; <|endoftext|>,
  // <|end_of_text|> or <eos>; the configured EOS, the generation config's; those the tokenizer has.
  std::vector<TokenId> stop_ids(const Tokenizer& tokenizer) const;
};

// A model directory's template: `name` when given, else recognised from tokenizer_config.json's chat_template (or
// chat_template.jinja beside it); bos_token and eos_token from tokenizer_config.json, generation_eos_ids from
// generation_config.json or config.json. Throws TokenizerFileError.
ChatTemplate load_chat_template(const std::filesystem::path& model_dir, std::string_view name = "");

// The rendered text tokenized as Hugging Face's apply_chat_template does (special tokens in the text matched).
std::vector<TokenId> encode_chat(const ChatTemplate& chat, const Tokenizer& tokenizer, const Conversation& conversation,
                                 const RenderOptions& options = {});

}  // namespace arclight::text
