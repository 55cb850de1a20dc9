// The OpenAI routes: a request is parsed (openai_request.cpp), its prompts tokenized, one stream per choice submitted
// to the Generator, the streams read back as text (choice_reader.cpp), and answered whole or as server-sent events.
#include "arclight/serve/openai_endpoint.hpp"

#include <random>
#include <utility>

#include "answer_json.hpp"
#include "arclight/core/log.hpp"
#include "arclight/serve/ids.hpp"

namespace arclight::serve {
namespace {

// Agent Lightning's proxy prefix, optional before every route: its groups are the rollout's and attempt's names.
const std::string traced_prefix = "(?:/rollout/([^/]+)/attempt/([^/]+))?";

std::string random_id(const std::string& prefix) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(random()));
  return prefix + hex;
}

HttpResponse json_response(const json& body) { return {200, "application/json", dump(body), nullptr}; }

// A response's choices are read in turn: each round waits this long for the first that has not ended, and takes what
// the others have by then.
constexpr std::chrono::milliseconds wait_for_tokens{100}, no_wait{0};

const text::Tokenizer& tokenizer_of(const ServedModel& model) {
  if (!model.tokenizer) throw UsageError("openai endpoint: the served model has no tokenizer");
  return *model.tokenizer;
}

class Endpoint {
 public:
  Endpoint(Generator& generator, ServedModel model, CallTracer* tracer)
      : generator_(generator), model_(std::move(model)), tracer_(tracer), json_(model_.name, tokenizer_of(model_)) {}

  HttpResponse models(const HttpRequest&) const {
    const json model = {{"id", model_.name},      {"object", "model"},   {"created", 0},
                        {"owned_by", "arclight"}, {"root", model_.name}, {"max_model_len", model_.max_context}};
    return json_response({{"object", "list"}, {"data", json::array({model})}});
  }

  HttpResponse completions(const HttpRequest& http) {
    const std::optional<Trace> trace = trace_of(http);
    const CompletionRequest request = parse_completion_request(http.body);
    std::vector<TokenList> prompts;
    for (const Prompt& prompt : request.prompts) prompts.push_back(tokens_of(prompt, request.add_special_tokens));
    auto answer = start("cmpl-", std::move(prompts), request.sampling, model_.stop_ids, 16, trace, http);
    return respond(answer, false, request.sampling);
  }

  HttpResponse chat(const HttpRequest& http) {
    const std::optional<Trace> trace = trace_of(http);
    const ChatRequest request = parse_chat_request(http.body);
    const std::string forced = forced_call(request);
    TokenList prompt = chat_prompt(request, !forced.empty());
    if (!forced.empty()) {
      const TokenList begun = model_.tokenizer->encode(forced);
      prompt.insert(prompt.end(), begun.begin(), begun.end());
    }
    auto answer = start("chatcmpl-", {prompt}, request.sampling, model_.stop_ids, -1, trace, http);
    answer->tools = !request.conversation.tools.empty();
    answer->tool_format = tool_format();
    if (answer->tools && answer->tool_format == ToolFormat::mistral)
      for (auto& choice : answer->choices) choice->show_special_tokens();
    answer->forced_call = forced;
    answer->tool_choice = request.tool_choice;
    answer->one_tool_call = !request.parallel_tool_calls;
    answer->reasoning_parser = model_.reasoning_parser != ReasoningParser::none;
    // A forced call begins after the prompt: no reasoning. deepseek_r1 ignores enable_thinking, as vLLM's; qwen3 takes
    // it (the prompt then closes an empty <think>) unless the prompt opened <think> itself (DeepSeek R1's).
    answer->thinking = answer->reasoning_parser && forced.empty() &&
                       (model_.reasoning_parser == ReasoningParser::deepseek_r1 || model_.chat_template->opens_think ||
                        request.enable_thinking != false);
    return respond(answer, true, request.sampling);
  }

 private:
  // Streamed, or read to the end and answered whole.
  HttpResponse respond(const std::shared_ptr<Answer>& answer, bool chat, const Sampling& sampling) {
    if (sampling.stream) return stream(answer, chat, sampling.include_usage);
    read_all(*answer);
    json choices = json::array();
    for (std::size_t i = 0; i < answer->choices.size(); ++i)
      choices.push_back(chat ? json_.chat_choice(*answer, i) : json_.completion_choice(*answer, i));
    json body = json_.header(*answer, chat ? "chat.completion" : "text_completion", choices);
    body["usage"] = answer->usage();
    if (answer->prompts.size() == 1) body["prompt_token_ids"] = answer->prompts[0];  // else each choice has its own
    return json_response(body);
  }

  // The attempt a request is traced under, from the path or the headers; 404 when this runner does not run it.
  std::optional<Trace> trace_of(const HttpRequest& http) const {
    std::string rollout = http.captures.size() >= 2 ? http.captures[0] : "";
    std::string attempt = http.captures.size() >= 2 ? http.captures[1] : "";
    if (rollout.empty() && attempt.empty()) {
      rollout = http.header("x-rollout-id");
      attempt = http.header("x-attempt-id");
    }
    if (rollout.empty() && attempt.empty()) return std::nullopt;
    if (rollout.empty() || attempt.empty())
      throw HttpError(400, "x-rollout-id and x-attempt-id go together", "invalid_request_error");
    const auto rid = parse_rollout_name(rollout);
    const auto aid = parse_attempt_name(attempt);
    if (!rid || !aid || !tracer_ || !tracer_->running_here(*rid, *aid))
      throw HttpError(404, "rollout " + rollout + ", attempt " + attempt + " is not running on this runner",
                      "invalid_request_error", "", "attempt_not_found");
    return Trace{*rid, *aid};
  }

  // A text prompt as vLLM tokenizes it (with the post-processor's special tokens unless asked not to); ids as given.
  TokenList tokens_of(const Prompt& prompt, bool add_special_tokens) const {
    if (const auto* text = std::get_if<std::string>(&prompt)) {
      TokenList ids = model_.tokenizer->encode(*text);
      return add_special_tokens ? model_.tokenizer->with_special_tokens(std::move(ids)) : ids;
    }
    const TokenList& ids = std::get<TokenList>(prompt);
    for (const std::int32_t id : ids)
      if (static_cast<std::size_t>(id) >= model_.tokenizer->vocab_size())
        throw HttpError(400,
                        log::concat("prompt: token id ", id, " is outside the vocabulary (",
                                    model_.tokenizer->vocab_size(), " tokens)"),
                        "invalid_request_error", "prompt");
    return ids;
  }

  ToolFormat tool_format() const {
    if (!model_.chat_template) return ToolFormat::hermes;
    switch (model_.chat_template->family) {
      case text::TemplateFamily::llama3: return ToolFormat::llama3_json;
      case text::TemplateFamily::mistral: return ToolFormat::mistral;
      case text::TemplateFamily::chatml:
      case text::TemplateFamily::deepseek:
      case text::TemplateFamily::gemma: break;  // DeepSeek's and Gemma's templates take no tools
    }
    return ToolFormat::hermes;
  }

  // tool_choice "required" or a named function: the call the answer must make, begun in the prompt in the template's
  // form (Hermes' tags, Llama 3.1's bare JSON, Mistral's list), as vLLM's guided decoding forces one; here the model
  // writes the rest, and an answer that does not complete it is text. Empty otherwise, and where the template takes
  // no tools (chat_prompt says so).
  std::string forced_call(const ChatRequest& request) const {
    if (!model_.chat_template || request.tool_choice == ToolChoice::none ||
        request.tool_choice == ToolChoice::automatic)
      return "";
    const text::ChatTemplate& chat = *model_.chat_template;
    const std::string name = json(request.tool_name).dump();
    if (chat.family == text::TemplateFamily::llama3) {
      if (!chat.knowledge_cutoff) return "";
      return request.tool_choice == ToolChoice::required ? "{\"name\": \"" : "{\"name\": " + name + ", \"parameters\":";
    }
    if (chat.family == text::TemplateFamily::mistral)
      return request.tool_choice == ToolChoice::required ? "[TOOL_CALLS][{\"name\": \""
                                                         : "[TOOL_CALLS][{\"name\": " + name + ", \"arguments\":";
    if (!chat.tool_format) return "";
    if (request.tool_choice == ToolChoice::required) return "<tool_call>\n";
    return "<tool_call>\n{\"name\": " + name + ", \"arguments\":";  // ' {' is a token
  }

  // `forcing`: a call begins after the prompt (forced_call). It cannot follow reasoning the model has not written: with
  // Qwen3's template the prompt closes an empty <think> first, as enable_thinking false renders it. A prompt that
  // opens <think> (Thinking-2507's) asks for reasoning before the call, which vLLM lets the model write, constraining
  // the call after it: begun in the prompt, the call would cut the reasoning out.
  TokenList chat_prompt(const ChatRequest& request, bool forcing) const {
    if (!model_.chat_template)
      throw HttpError(400, "model " + model_.name + " has no chat template: use /v1/completions",
                      "invalid_request_error", "messages");
    std::optional<bool> thinking = request.enable_thinking;
    if (forcing && model_.chat_template->opens_think)
      throw HttpError(400,
                      "tool_choice required or a named function begins the call in the prompt, and chat template " +
                          model_.chat_template->name +
                          " opens <think> there for the model's reasoning first: use tool_choice auto",
                      "invalid_request_error", "tool_choice");
    if (forcing && model_.chat_template->thinking_switch) {
      if (request.enable_thinking == true)
        throw HttpError(400,
                        "tool_choice required or a named function begins the call in the prompt, after an empty "
                        "<think> block: leave chat_template_kwargs.enable_thinking out or false",
                        "invalid_request_error", "tool_choice");
      thinking = false;
    }
    try {
      return text::encode_chat(*model_.chat_template, *model_.tokenizer, request.conversation,
                               {/*add_generation_prompt=*/true, thinking});
    } catch (const UsageError& e) {
      throw HttpError(400, e.what(), "invalid_request_error", "messages");
    }
  }

  // Submits every choice of every prompt, each ended when `http`'s client leaves. `default_max` < 0: as many tokens
  // as the context leaves.
  std::shared_ptr<Answer> start(const std::string& prefix, std::vector<TokenList> prompts, const Sampling& sampling,
                                const std::vector<text::TokenId>& stop_ids, int default_max, std::optional<Trace> trace,
                                const HttpRequest& http) {
    std::vector<text::TokenId> stops = stop_ids;  // the model's (its template's and EOS), and the request's own
    stops.insert(stops.end(), sampling.stop_token_ids.begin(), sampling.stop_token_ids.end());
    auto answer = std::make_shared<Answer>();
    answer->id = random_id(prefix);
    answer->n = sampling.n;
    answer->trace = trace;
    answer->temperature = sampling.temperature;
    answer->logprobs = sampling.logprobs;
    answer->prompts = std::move(prompts);
    std::vector<GenerationRequest> requests;
    for (const TokenList& prompt : answer->prompts) {
      GenerationRequest request =
          generation_request(prompt, sampling, stops, default_max, prefix == "chatcmpl-" ? "messages" : "prompt");
      for (int i = 0; i < sampling.n; ++i) {
        if (sampling.seed) request.seed = *sampling.seed + static_cast<std::uint64_t>(i);  // n different answers
        requests.push_back(request);
      }
    }
    for (std::shared_ptr<GenerationStream>& stream : submit(std::move(requests))) {
      answer->choices.push_back(
          std::make_unique<ChoiceReader>(std::move(stream), *model_.tokenizer, sampling.stop, stops));
      // A copy: a streamed answer is read after the handler returned, its request gone.
      answer->choices.back()->end_when([gone = http.connection_gone] { return gone && gone(); });
    }
    return answer;
  }

  // `param`: the request's field that holds the prompt, named by an error.
  GenerationRequest generation_request(const TokenList& prompt, const Sampling& sampling,
                                       const std::vector<text::TokenId>& stop_ids, int default_max,
                                       const char* param) const {
    const long room = static_cast<long>(model_.max_context) - static_cast<long>(prompt.size());
    if (room <= 0)
      throw HttpError(400,
                      log::concat("the prompt has ", prompt.size(), " tokens; the model's context is ",
                                  model_.max_context, " tokens, prompt and answer together"),
                      "invalid_request_error", param, "context_length_exceeded");
    // Text the tokenizer reads may hold a token the model has no row for (Gemma 3's <image_soft_token>)
    for (const text::TokenId id : prompt)
      if (model_.vocab_size > 0 && id >= model_.vocab_size)
        throw HttpError(400,
                        log::concat(param, ": token id ", id, " is outside the model's vocabulary (", model_.vocab_size,
                                    " tokens)"),
                        "invalid_request_error", param);
    GenerationRequest request;
    request.prompt = prompt;
    request.max_tokens =
        static_cast<int>(std::min<long>(sampling.max_tokens.value_or(default_max < 0 ? room : default_max), room));
    request.temperature = sampling.temperature;
    request.top_p = sampling.top_p;
    request.top_k = sampling.top_k;
    request.stop_tokens = stop_ids;
    request.seed = sampling.seed;
    request.top_logprobs = sampling.top_logprobs;
    return request;
  }

  std::vector<std::shared_ptr<GenerationStream>> submit(std::vector<GenerationRequest> requests) {
    try {
      return generator_.submit_group(std::move(requests));
    } catch (const UsageError& e) {
      throw HttpError(400, e.what(), "invalid_request_error");
    }
  }

  void read_all(Answer& answer) {
    // In turn, as a stream is read: a choice's stop string is seen (and its decode row freed) while the others go on.
    // Read one after the other, choice k decoded on past its stop string until every choice before it had ended.
    std::vector<bool> ended(answer.choices.size(), false);
    for (std::size_t left = ended.size(); left > 0;) {
      bool waited = false;
      for (std::size_t i = 0; i < ended.size(); ++i) {
        if (ended[i]) continue;
        Delta delta;
        ChoiceReader::Piece piece;
        while ((piece = answer.choices[i]->next_within(delta, waited ? no_wait : wait_for_tokens)) ==
               ChoiceReader::Piece::given)
          waited = true;
        waited = true;
        if (piece != ChoiceReader::Piece::ended) continue;
        ended[i] = true;
        --left;
        // At once: the answer's end cancels the other choices.
        const ChoiceReader& choice = *answer.choices[i];
        if (choice.client_gone()) throw HttpError(499, "the client closed its connection", "invalid_request_error");
        if (choice.finish_reason() == "error")
          throw HttpError(500, "generation failed: " + choice.error(), "server_error");
      }
    }
    for (std::size_t i = 0; i < answer.choices.size(); ++i) record(answer, i);
  }

  // A traced request's choice that ended well becomes a span of its attempt: before the client hears of its end, so
  // that a client ending the attempt at once finds it recorded.
  void record(const Answer& answer, std::size_t i) {
    if (!answer.trace) return;
    const ChoiceReader& choice = *answer.choices[i];
    tracer_->record({answer.trace->rollout, answer.trace->attempt, answer.prompt_of(i), choice.token_ids(),
                     choice.untruncated_logprobs(), answer.temperature, choice.policy_version()});
  }

  // ---- server-sent events ----
  HttpResponse stream(std::shared_ptr<Answer> answer, bool chat, bool include_usage) {
    HttpResponse response{200, "text/event-stream", "", nullptr};
    response.stream = [this, answer, chat, include_usage](const StreamWriter& write) {
      Events events(*this, *answer, chat, include_usage, write);
      if (!events.send_choices()) return;  // the client is gone: ~Answer cancels
      if (include_usage) {
        json last = json_.header(*answer, chat ? "chat.completion.chunk" : "text_completion", json::array());
        last["usage"] = answer->usage();
        if (!write(event(last))) return;
      }
      write("data: [DONE]\n\n");
    };
    return response;
  }

  // A streamed answer's choices' events: (chat) the role, then a piece per delta, then the finish reason; the first of
  // a choice carries its prompt's token ids, each a null usage when the last event carries it (OpenAI's
  // stream_options.include_usage). Every step is false once the client has left.
  class Events {
   public:
    Events(Endpoint& endpoint, Answer& answer, bool chat, bool include_usage, const StreamWriter& write)
        : endpoint_(endpoint),
          answer_(answer),
          chat_(chat),
          include_usage_(include_usage),
          write_(write),
          sent_(answer.choices.size(), Sent{StreamedToolCalls(answer.tool_format), true, 0, {}, 0, {}}) {}

    // The choices are read in turn, as vLLM interleaves them: each round waits for the first that has not ended (the
    // engine advances every choice of a response at each decode step) and takes what the others have by then.
    bool send_choices() {
      const std::size_t n = answer_.choices.size();
      if (chat_)
        for (std::size_t i = 0; i < n; ++i)
          if (!send(i, {{"index", i},
                        {"delta", {{"role", "assistant"}, {"content", ""}}},
                        {"logprobs", nullptr},
                        {"finish_reason", nullptr}}))
            return false;
      std::vector<bool> ended(n, false);
      for (std::size_t left = n; left > 0;) {
        bool waited = false;
        for (std::size_t i = 0; i < n; ++i) {
          if (ended[i]) continue;
          Delta delta;
          const auto piece = answer_.choices[i]->next_within(delta, waited ? no_wait : wait_for_tokens);
          waited = true;
          if (piece == ChoiceReader::Piece::none_yet) continue;
          if (piece == ChoiceReader::Piece::given) {
            if (!send_piece(i, delta)) return false;
            continue;
          }
          ended[i] = true;
          --left;
          if (!send_end(i)) return false;
        }
      }
      return true;
    }

   private:
    struct Sent {
      StreamedToolCalls calls;  // with tools: where they begin in `given`
      bool first = true;
      std::size_t offset = 0;       // completions' log-probs: characters of text before the next token's
      std::string given;            // with tools: the text the reader gave so far
      std::size_t shown = 0;        // of it, sent: the text before the calls (their tokens come with them, at the end)
      StreamedReasoning reasoning;  // where the answer's reasoning is told apart
    };

    bool send(std::size_t i, json choice_json) {
      json c = endpoint_.json_.chunk(answer_, chat_, std::move(choice_json));
      if (include_usage_) c["usage"] = nullptr;
      if (sent_[i].first) c["prompt_token_ids"] = answer_.prompt_of(i);
      sent_[i].first = false;
      return write_(event(c));
    }

    // With reasoning told apart, `delta`'s text is split: the reasoning goes as it comes, the content as without.
    bool send_piece(std::size_t i, Delta& delta) {
      if (delta.text.empty() && delta.tokens.empty()) return true;
      Sent& sent = sent_[i];
      std::string reasoning;
      if (answer_.thinking) sent.reasoning.take(std::exchange(delta.text, std::string()), reasoning, delta.text);
      if (!answer_.tools)
        return send(i, endpoint_.json_.delta_choice(answer_, i, chat_, delta, sent.offset, reasoning));
      if (!reasoning.empty() && !send(i, endpoint_.json_.reasoning_choice(i, reasoning))) return false;
      if (!answer_.forced_call.empty()) return true;  // the answer is a call from its first token
      sent.given += delta.text;
      // Blanks before a call are not the answer's text (the whole answer drops them): held until text follows them.
      const std::size_t before = sent.calls.text_before(sent.given);
      const std::size_t last = before == 0 ? std::string::npos : sent.given.find_last_not_of(" \t\r\n", before - 1);
      const std::size_t end = last == std::string::npos ? 0 : last + 1;
      if (end <= sent.shown) return true;
      const json text = {{"index", i},
                         {"delta", {{"content", sent.given.substr(sent.shown, end - sent.shown)}}},
                         {"logprobs", nullptr},
                         {"finish_reason", nullptr},
                         {"token_ids", json::array()}};
      sent.shown = end;
      return send(i, text);
    }

    bool send_end(std::size_t i) {
      const ChoiceReader& choice = *answer_.choices[i];
      if (choice.client_gone()) return false;  // seen while tool calls were held back: not traced
      if (choice.finish_reason() == "error")   // not traced; the other choices go on
        return write_(
            event(json::parse(error_body(HttpError(500, "generation failed: " + choice.error(), "server_error")))));
      endpoint_.record(answer_, i);
      const std::string reasoning = sent_[i].reasoning.rest();  // held while it might have begun </think>
      if (!reasoning.empty() && !send(i, endpoint_.json_.reasoning_choice(i, reasoning))) return false;
      for (json& last : endpoint_.json_.last_choices(answer_, i, chat_, sent_[i].shown))
        if (!send(i, std::move(last))) return false;
      return true;
    }

    Endpoint& endpoint_;
    Answer& answer_;
    const bool chat_, include_usage_;
    const StreamWriter& write_;
    std::vector<Sent> sent_;
  };

  Generator& generator_;
  ServedModel model_;
  CallTracer* tracer_;
  AnswerJson json_;
};

}  // namespace

void add_openai_routes(HttpServer& server, Generator& generator, ServedModel model, CallTracer* tracer) {
  auto endpoint = std::make_shared<Endpoint>(generator, std::move(model), tracer);
  server.get(traced_prefix + "/v1/models", [endpoint](const HttpRequest& r) { return endpoint->models(r); });
  server.post(traced_prefix + "/v1/completions", [endpoint](const HttpRequest& r) { return endpoint->completions(r); });
  server.post(traced_prefix + "/v1/chat/completions", [endpoint](const HttpRequest& r) { return endpoint->chat(r); });
}

}  // namespace arclight::serve
