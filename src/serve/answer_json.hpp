#pragma once
// A request's answer (its choices, being generated) and its JSON in OpenAI's form with vLLM's token ids: whole, or as
// the chunks of server-sent events. No HTTP and no engine: the choices' readers hold what was generated.
#include <cstdint>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "arclight/store/types.hpp"
#include "choice_reader.hpp"
#include "openai_request.hpp"
#include "reasoning.hpp"
#include "tool_calls.hpp"

namespace arclight::serve {

using json = nlohmann::ordered_json;

std::string dump(const json& value);
std::string event(const json& value);  // one server-sent event

// The attempt a request is traced under.
struct Trace {
  store::RolloutId rollout = 0;
  store::AttemptId attempt = 0;
};

// One request's choices, started: the choices of prompt p are p*n .. p*n+n-1.
struct Answer {
  std::string id;
  std::int64_t created = std::time(nullptr);
  std::vector<TokenList> prompts;
  std::vector<std::unique_ptr<ChoiceReader>> choices;
  int n = 1;
  std::optional<Trace> trace;
  double temperature = 1.0;  // the traces record it
  bool logprobs = false;
  bool tools = false;          // tool calls are parsed from the answers
  bool one_tool_call = false;  // parallel_tool_calls false: the first only
  // A call that tool_choice requires, begun at the end of the prompt ("<tool_call>\n", with the named function's
  // name): the answers continue it, and are read with it in front.
  std::string forced_call;
  ToolChoice tool_choice = ToolChoice::automatic;
  ToolFormat tool_format = ToolFormat::hermes;
  // runner.reasoning_parser: the message tells its reasoning apart, as "reasoning" and "reasoning_content" (vLLM 0.11
  // gives both); `thinking`: the answer begins with reasoning (no call forced; Qwen3's template with enable_thinking
  // not false, one whose prompt opens <think>, or the deepseek_r1 parser), split from the content at its </think>.
  bool reasoning_parser = false;
  bool thinking = false;

  ~Answer() {
    for (auto& choice : choices) choice->cancel();  // a reader gone: the engine need not finish them
  }
  const TokenList& prompt_of(std::size_t choice) const { return prompts[choice / n]; }
  std::size_t prompt_tokens() const {  // each prompt once, whatever n (as OpenAI and vLLM count them)
    std::size_t total = 0;
    for (const TokenList& p : prompts) total += p.size();
    return total;
  }
  json usage() const {
    std::size_t completion = 0;
    for (const auto& choice : choices) completion += choice->tokens().size();
    return {{"prompt_tokens", prompt_tokens()},
            {"completion_tokens", completion},
            {"total_tokens", prompt_tokens() + completion}};
  }
};

class AnswerJson {
 public:
  AnswerJson(std::string model_name, const text::Tokenizer& tokenizer);

  json header(const Answer& answer, const char* object, json choices) const;
  json completion_choice(const Answer& answer, std::size_t i) const;
  json chat_choice(const Answer& answer, std::size_t i) const;

  // Streamed: one choice's event, a delta of its text (with `offset` as completion_logprobs'), its last events.
  json chunk(const Answer& answer, bool chat, json choice) const;
  // `reasoning`: what the delta adds to the reasoning (its text is the content's).
  json delta_choice(const Answer& answer, std::size_t i, bool chat, const Delta& delta, std::size_t& offset,
                    const std::string& reasoning = {}) const;
  json reasoning_choice(std::size_t i, const std::string& reasoning) const;  // a piece of reasoning alone
  std::vector<json> last_choices(const Answer& answer, std::size_t i, bool chat, std::size_t shown) const;

 private:
  std::string token_text(std::int32_t id) const;
  json chat_logprob(std::int32_t id, float logprob) const;
  json chat_logprobs(const std::vector<StreamedToken>& tokens) const;
  json completion_logprobs(const std::vector<StreamedToken>& tokens, std::size_t& offset) const;

  std::string model_name_;
  const text::Tokenizer& tokenizer_;
};

}  // namespace arclight::serve
