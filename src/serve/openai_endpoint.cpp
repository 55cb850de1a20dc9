// The OpenAI routes: a request is parsed (openai_request.cpp), its prompts tokenized, one stream per choice submitted
// to the Generator, the streams read back as text (choice_reader.cpp), and answered whole or as server-sent events.
#include "arclight/serve/openai_endpoint.hpp"

#include <ctime>
#include <nlohmann/json.hpp>
#include <random>

#include "arclight/core/log.hpp"
#include "arclight/serve/ids.hpp"
#include "choice_reader.hpp"
#include "openai_request.hpp"
#include "tool_calls.hpp"

namespace arclight::serve {
namespace {

using json = nlohmann::ordered_json;

// Agent Lightning's proxy prefix, optional before every route: its groups are the rollout's and attempt's names.
const std::string traced_prefix = "(?:/rollout/([^/]+)/attempt/([^/]+))?";

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string event(const json& value) { return "data: " + dump(value) + "\n\n"; }

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

class Endpoint {
 public:
  Endpoint(Generator& generator, ServedModel model, CallTracer* tracer)
      : generator_(generator), model_(std::move(model)), tracer_(tracer) {
    if (!model_.tokenizer) throw UsageError("openai endpoint: the served model has no tokenizer");
  }

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
    answer->forced_call = forced;
    answer->tool_choice = request.tool_choice;
    answer->one_tool_call = !request.parallel_tool_calls;
    return respond(answer, true, request.sampling);
  }

 private:
  // Streamed, or read to the end and answered whole.
  HttpResponse respond(const std::shared_ptr<Answer>& answer, bool chat, const Sampling& sampling) {
    if (sampling.stream) return stream(answer, chat, sampling.include_usage);
    read_all(*answer);
    json choices = json::array();
    for (std::size_t i = 0; i < answer->choices.size(); ++i)
      choices.push_back(chat ? chat_choice(*answer, i) : completion_choice(*answer, i));
    json body = header(*answer, chat ? "chat.completion" : "text_completion", choices);
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
    const bool llama = model_.chat_template && model_.chat_template->family == text::TemplateFamily::llama3;
    return llama ? ToolFormat::llama3_json : ToolFormat::hermes;
  }

  // tool_choice "required" or a named function: the call the answer must make, begun in the prompt in the template's
  // form (Hermes' tags, Llama 3.1's bare JSON), as vLLM's guided decoding forces one; here the model writes the rest,
  // and an answer that does not complete it is text. Empty otherwise, and where the template takes no tools
  // (chat_prompt says so).
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
    if (!chat.tool_format) return "";
    if (request.tool_choice == ToolChoice::required) return "<tool_call>\n";
    return "<tool_call>\n{\"name\": " + name + ", \"arguments\":";  // ' {' is a token
  }

  // `forcing`: a call begins after the prompt (forced_call). It cannot follow reasoning the model has not written: with
  // Qwen3's template the prompt closes an empty <think> first, as enable_thinking false renders it.
  TokenList chat_prompt(const ChatRequest& request, bool forcing) const {
    if (!model_.chat_template)
      throw HttpError(400, "model " + model_.name + " has no chat template: use /v1/completions",
                      "invalid_request_error", "messages");
    std::optional<bool> thinking = request.enable_thinking;
    if (forcing && model_.chat_template->think) {
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

  json header(const Answer& answer, const char* object, json choices) const {
    return {{"id", answer.id},
            {"object", object},
            {"created", answer.created},
            {"model", model_.name},
            {"choices", std::move(choices)}};
  }

  // ---- logprobs ----
  std::string token_text(std::int32_t id) const { return model_.tokenizer->piece(id, false, false); }

  // A token that top-p or top-k cut has log-prob -inf, which JSON cannot hold (it was written null): -9999, as vLLM.
  static float finite(float logprob) { return std::max(logprob, -9999.0f); }

  json chat_logprob(std::int32_t id, float logprob) const {
    const std::string text = token_text(id);
    return {
        {"token", text}, {"logprob", finite(logprob)}, {"bytes", std::vector<unsigned char>(text.begin(), text.end())}};
  }

  json chat_logprobs(const std::vector<StreamedToken>& tokens) const {
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
  json completion_logprobs(const std::vector<StreamedToken>& tokens, std::size_t& offset) const {
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
      for (const char byte : model_.tokenizer->piece(t.id, /*skip_special=*/true, offset == 0))
        offset += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;  // a character counted at its first byte
    }
    return out;
  }

  // ---- whole answers ----
  json completion_choice(const Answer& answer, std::size_t i) const {
    const ChoiceReader& choice = *answer.choices[i];
    std::size_t offset = 0;
    return {{"index", i},
            {"text", choice.text()},
            {"logprobs", answer.logprobs ? completion_logprobs(choice.tokens(), offset) : json()},
            {"finish_reason", choice.finish_reason()},
            {"token_ids", choice.token_ids()},
            {"prompt_token_ids", answer.prompt_of(i)}};
  }

  json chat_choice(const Answer& answer, std::size_t i) const {
    const ChoiceReader& choice = *answer.choices[i];
    const std::string text = answer.forced_call + choice.text();
    json message = {{"role", "assistant"}, {"content", text}};
    std::string finish = choice.finish_reason();
    if (auto calls = answer.tools ? parse_tool_calls(text, answer.tool_format) : std::nullopt) {
      if (answer.one_tool_call) calls->calls.resize(1);
      message["content"] = calls->content.empty() ? json() : json(calls->content);
      message["tool_calls"] = tool_calls_json(*calls);
      // As OpenAI and vLLM answer: "tool_calls" for a call the model chose, or one required that it ended; a named
      // function's call ends as the answer did ("stop").
      if (answer.tool_choice == ToolChoice::automatic ||
          (answer.tool_choice == ToolChoice::required && finish == "stop"))
        finish = "tool_calls";
    }
    return {{"index", i},
            {"message", std::move(message)},
            {"logprobs", answer.logprobs ? chat_logprobs(choice.tokens()) : json()},
            {"finish_reason", finish},
            {"token_ids", choice.token_ids()}};
  }

  static json tool_calls_json(const ToolCallAnswer& calls) {
    json out = json::array();
    for (const ParsedToolCall& call : calls.calls)
      out.push_back({{"id", new_tool_call_id()},
                     {"type", "function"},
                     {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    return out;
  }

  // ---- server-sent events ----
  HttpResponse stream(std::shared_ptr<Answer> answer, bool chat, bool include_usage) {
    HttpResponse response{200, "text/event-stream", "", nullptr};
    response.stream = [this, answer, chat, include_usage](const StreamWriter& write) {
      Events events(*this, *answer, chat, include_usage, write);
      if (!events.send_choices()) return;  // the client is gone: ~Answer cancels
      if (include_usage) {
        json last = header(*answer, chat ? "chat.completion.chunk" : "text_completion", json::array());
        last["usage"] = answer->usage();
        if (!write(event(last))) return;
      }
      write("data: [DONE]\n\n");
    };
    return response;
  }

  json chunk(const Answer& answer, bool chat, json choice) const {
    return header(answer, chat ? "chat.completion.chunk" : "text_completion", json::array({std::move(choice)}));
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
          sent_(answer.choices.size()) {}

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
      bool first = true;
      std::size_t offset = 0;  // completions' log-probs: characters of text before the next token's
      std::string given;       // with tools: the text the reader gave so far
      std::size_t shown = 0;   // of it, sent: the text before the calls (their tokens come with them, at the end)
    };

    bool send(std::size_t i, json choice_json) {
      json c = endpoint_.chunk(answer_, chat_, std::move(choice_json));
      if (include_usage_) c["usage"] = nullptr;
      if (sent_[i].first) c["prompt_token_ids"] = answer_.prompt_of(i);
      sent_[i].first = false;
      return write_(event(c));
    }

    bool send_piece(std::size_t i, const Delta& delta) {
      if (delta.text.empty() && delta.tokens.empty()) return true;
      Sent& sent = sent_[i];
      if (!answer_.tools) return send(i, endpoint_.delta_choice(answer_, i, chat_, delta, sent.offset));
      if (!answer_.forced_call.empty()) return true;  // the answer is a call from its first token
      sent.given += delta.text;
      // Blanks before a call are not the answer's text (the whole answer trims them): held until text follows them.
      const std::size_t before = text_before_tool_calls(sent.given, answer_.tool_format);
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
      for (json& last : endpoint_.last_choices(answer_, i, chat_, sent_[i].shown))
        if (!send(i, std::move(last))) return false;
      return true;
    }

    Endpoint& endpoint_;
    Answer& answer_;
    const bool chat_, include_usage_;
    const StreamWriter& write_;
    std::vector<Sent> sent_;
  };

  json delta_choice(const Answer& answer, std::size_t i, bool chat, const Delta& delta, std::size_t& offset) const {
    std::vector<std::int32_t> ids;
    for (const StreamedToken& t : delta.tokens) ids.push_back(t.id);
    json out = {{"index", i}};
    if (chat)
      out["delta"] = {{"content", delta.text}};
    else
      out["text"] = delta.text;
    out["logprobs"] = !answer.logprobs ? json()
                      : chat           ? chat_logprobs(delta.tokens)
                                       : completion_logprobs(delta.tokens, offset);
    out["finish_reason"] = nullptr;
    out["token_ids"] = ids;
    return out;
  }

  // The finish reason; with tools, first the rest of the answer, its text past the `shown` characters sent before and
  // its tool calls, then the finish with every token's id and log-prob (apart: OpenAI's SDKs close a tool call's
  // arguments only on a chunk before the finish).
  std::vector<json> last_choices(const Answer& answer, std::size_t i, bool chat, std::size_t shown) const {
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
    if (shown == 0) {  // as the whole answer has it (the text before calls trimmed, none when empty)
      if (!whole["message"]["content"].is_null()) delta["content"] = whole["message"]["content"];
    } else {  // what the text sent before lacks: up to the calls (trailing blanks dropped), or to the end
      const std::string text = answer.forced_call + choice.text();
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

  static json tool_calls_indexed(json calls) {
    for (std::size_t k = 0; k < calls.size(); ++k) calls[k]["index"] = k;
    return calls;
  }

  Generator& generator_;
  ServedModel model_;
  CallTracer* tracer_;
};

}  // namespace

void add_openai_routes(HttpServer& server, Generator& generator, ServedModel model, CallTracer* tracer) {
  auto endpoint = std::make_shared<Endpoint>(generator, std::move(model), tracer);
  server.get(traced_prefix + "/v1/models", [endpoint](const HttpRequest& r) { return endpoint->models(r); });
  server.post(traced_prefix + "/v1/completions", [endpoint](const HttpRequest& r) { return endpoint->completions(r); });
  server.post(traced_prefix + "/v1/chat/completions", [endpoint](const HttpRequest& r) { return endpoint->chat(r); });
}

}  // namespace arclight::serve
