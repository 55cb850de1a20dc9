// The OpenAI routes over real HTTP, against the scripted engine: what the server sends the engine, and what it
// answers from the engine's tokens.
#include <boost/test/unit_test.hpp>

#include "fakes.hpp"

namespace arclight::serve::testing {
namespace {

const json hello_chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
const json add_tool = {{"type", "function"}, {"function", {{"name", "add"}, {"parameters", {{"type", "object"}}}}}};
constexpr std::int32_t im_end = 257;

std::vector<std::int32_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

// The data of each server-sent event; "[DONE]" as a string.
std::vector<json> events_of(const std::string& body) {
  std::vector<json> out;
  std::size_t at = 0, end;
  while ((end = body.find("\n\n", at)) != std::string::npos) {
    const std::string event = body.substr(at, end - at);
    BOOST_REQUIRE(event.rfind("data: ", 0) == 0);
    out.push_back(event == "data: [DONE]" ? json("[DONE]") : json::parse(event.substr(6)));
    at = end + 2;
  }
  BOOST_TEST(at == body.size());  // nothing after the last event
  return out;
}

std::string streamed_text(const std::vector<json>& events, const char* field) {
  std::string text;
  for (const json& e : events)
    if (e.is_object() && !e["choices"].empty()) {
      const json& c = e["choices"][0];
      if (std::string(field) == "text")
        text += c["text"].get<std::string>();
      else if (c["delta"].contains(field) && c["delta"][field].is_string())
        text += c["delta"][field];
    }
  return text;
}

json error_of(const httplib::Result& result, int status) {
  BOOST_REQUIRE(result);
  BOOST_TEST(result->status == status);
  return json::parse(result->body)["error"];
}

}  // namespace

BOOST_AUTO_TEST_SUITE(openai_endpoint)

BOOST_AUTO_TEST_CASE(models_lists_the_served_model) {
  Served served;
  const json body = json::parse(served.client->Get("/v1/models")->body);
  BOOST_TEST(body["data"][0]["id"] == "tiny");
  BOOST_TEST(body["data"][0]["max_model_len"] == 1024);
}

BOOST_AUTO_TEST_CASE(a_text_completion_answers_text_token_ids_and_usage) {
  Served served;
  served.generator.answer_text("Hi!");
  const json body = served.ok("/v1/completions", {{"prompt", "Say hi"}, {"temperature", 0}, {"top_k", 20}});
  BOOST_TEST(body["object"] == "text_completion");
  BOOST_TEST(body["choices"][0]["text"] == "Hi!");
  BOOST_TEST(body["choices"][0]["finish_reason"] == "stop");
  BOOST_TEST(body["choices"][0]["token_ids"] == json(bytes_of("Hi!")));
  BOOST_TEST(body["prompt_token_ids"] == json(bytes_of("Say hi")));
  BOOST_TEST(body["usage"] == json({{"prompt_tokens", 6}, {"completion_tokens", 3}, {"total_tokens", 9}}));
  const GenerationRequest sent = served.generator.requests().at(0);
  BOOST_TEST(sent.prompt == bytes_of("Say hi"));
  BOOST_TEST(sent.max_tokens == 16);  // OpenAI's default for completions
  BOOST_TEST(sent.temperature == 0.0);
  BOOST_TEST(sent.top_k == 20);  // vLLM's extension
  // The model's stops: its template's <|im_end|>, and EOS.
  BOOST_TEST(sent.stop_tokens == (std::vector<std::int32_t>{257, 258}));
  served.ok("/v1/completions", {{"prompt", "Say hi"}, {"top_k", -1}});  // vLLM's "all", as 0
  BOOST_TEST(served.generator.requests().at(1).top_k == 0);
}

BOOST_AUTO_TEST_CASE(prompts_as_token_ids_give_n_choices_each_with_their_prompt) {
  Served served;
  served.generator.answer_text("ok");
  const json body = served.ok("/v1/completions", {{"prompt", {{1, 2, 3}, {4, 5}}}, {"n", 2}, {"seed", 10}});
  BOOST_REQUIRE(body["choices"].size() == 4);
  for (int i = 0; i < 4; ++i) BOOST_TEST(body["choices"][i]["index"] == i);
  BOOST_TEST(body["choices"][1]["prompt_token_ids"] == json({1, 2, 3}));
  BOOST_TEST(body["choices"][2]["prompt_token_ids"] == json({4, 5}));
  BOOST_TEST(!body.contains("prompt_token_ids"));   // two prompts: each choice carries its own
  BOOST_TEST(body["usage"]["prompt_tokens"] == 5);  // each prompt once, whatever n
  std::vector<std::uint64_t> seeds;
  for (const GenerationRequest& r : served.generator.requests()) seeds.push_back(r.seed.value());
  std::sort(seeds.begin(), seeds.end());
  BOOST_TEST(seeds == (std::vector<std::uint64_t>{10, 10, 11, 11}));  // the n choices differ
}

BOOST_AUTO_TEST_CASE(a_token_id_outside_the_vocabulary_is_400) {
  Served served;
  const json error = error_of(served.post("/v1/completions", {{"prompt", {1, 259}}}), 400);
  BOOST_TEST(error["param"] == "prompt");
  BOOST_TEST(served.generator.requests().empty());
}

// A tokenizer may know ids the model has no row for (Gemma 3's <image_soft_token> past its 262,144): a prompt that
// holds one, written as text or as ids, is a 400 naming its field, never a forward past the embedding.
BOOST_AUTO_TEST_CASE(a_token_the_model_has_no_row_for_is_400) {
  Served served(test_options(), 1024, "chatml", ReasoningParser::none, /*vocab_size=*/258);  // <|endoftext|> is 258
  served.generator.answer_text("ok");
  BOOST_TEST(served.ok("/v1/chat/completions", hello_chat)["choices"][0]["message"]["content"] == "ok");
  const json chat = {{"messages", {{{"role", "user"}, {"content", "a <|endoftext|> b"}}}}};
  const json error = error_of(served.post("/v1/chat/completions", chat), 400);
  BOOST_TEST(error["param"] == "messages");
  BOOST_TEST(error["message"].get<std::string>().find("token id 258 is outside the model's vocabulary (258") !=
             std::string::npos);
  BOOST_TEST(error_of(served.post("/v1/completions", {{"prompt", {1, 258}}}), 400)["param"] == "prompt");
  BOOST_TEST(served.generator.requests().size() == 1u);
}

BOOST_AUTO_TEST_CASE(chat_goes_through_the_template_and_stops_at_its_end_token) {
  Served served;
  served.generator.answer = bytes_of("Hello");
  served.generator.answer.push_back(im_end);
  const json body = served.ok("/v1/chat/completions", hello_chat);
  const json& choice = body["choices"][0];
  BOOST_TEST(choice["message"]["role"] == "assistant");
  BOOST_TEST(choice["message"]["content"] == "Hello");  // the end token's text is not shown
  BOOST_TEST(choice["token_ids"].back() == im_end);     // but it is among the tokens trained on
  BOOST_TEST(choice["finish_reason"] == "stop");
  const GenerationRequest sent = served.generator.requests().at(0);
  BOOST_TEST(served.tokenizer->decode(sent.prompt) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  BOOST_TEST(body["prompt_token_ids"] == json(sent.prompt));
  BOOST_TEST(sent.max_tokens == 1024 - static_cast<int>(sent.prompt.size()));  // chat: what the context leaves
  BOOST_TEST((std::find(sent.stop_tokens.begin(), sent.stop_tokens.end(), im_end) != sent.stop_tokens.end()));
}

// Qwen3's enable_thinking comes as vLLM takes it, in chat_template_kwargs: false opens and closes an empty <think>.
BOOST_AUTO_TEST_CASE(chat_template_kwargs_enable_thinking_reaches_the_template) {
  Served served(test_options(), 1024, "qwen3");
  served.generator.answer = {im_end};
  json no_thinking = hello_chat;
  no_thinking["chat_template_kwargs"] = {{"enable_thinking", false}, {"unused", 1}};
  served.ok("/v1/chat/completions", no_thinking);
  served.ok("/v1/chat/completions", hello_chat);
  const std::string asked = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  BOOST_TEST(served.tokenizer->decode(served.generator.requests().at(0).prompt) == asked + "<think>\n\n</think>\n\n");
  BOOST_TEST(served.tokenizer->decode(served.generator.requests().at(1).prompt) == asked);
  for (const json& kwargs : {json(5), json({{"enable_thinking", "no"}})}) {
    json bad = hello_chat;
    bad["chat_template_kwargs"] = kwargs;
    const json error = error_of(served.post("/v1/chat/completions", bad), 400);
    BOOST_TEST(error["param"] == (kwargs.is_object() ? "enable_thinking" : "chat_template_kwargs"));
  }
}

// A client that gives up on an answer (its timeout, then a retry: the OpenAI SDK's way) ends its generation: the
// answer held a decode row to its end before, and a weight load waits for every running sequence.
BOOST_AUTO_TEST_CASE(a_client_that_leaves_ends_its_generation) {
  for (const bool stream : {false, true}) {
    Served served;
    served.generator.answer_text(std::string(2000, 'a'));  // 10 s at 5 ms a token
    served.generator.per_token = std::chrono::milliseconds(5);
    httplib::Client impatient("127.0.0.1", served.server.port());
    impatient.set_bearer_token_auth(token.c_str());
    impatient.set_read_timeout(std::chrono::milliseconds(300));
    json request = hello_chat;
    request["stream"] = stream;
    request["tools"] = {add_tool};  // a required call is held back to the end: no write sees the client leave
    request["tool_choice"] = "required";
    BOOST_TEST(!impatient.Post("/v1/chat/completions", request.dump(), "application/json"));
    impatient.stop();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (served.generator.cancelled_streams() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    BOOST_TEST(served.generator.cancelled_streams() == 1, (stream ? "streamed" : "whole"));
    BOOST_TEST(served.ok("/v1/chat/completions", {{"messages", hello_chat["messages"]},
                                                  {"max_tokens", 2}})["choices"][0]["message"]["content"] ==
               "aa");  // the server serves on
  }
}

BOOST_AUTO_TEST_CASE(max_tokens_ends_a_choice_with_length) {
  Served served;
  served.generator.answer_text("abcdefgh");
  json request = hello_chat;
  request["max_tokens"] = 50;
  request["max_completion_tokens"] = 3;  // the newer name wins
  const json body = served.ok("/v1/chat/completions", request);
  BOOST_TEST(body["choices"][0]["message"]["content"] == "abc");
  BOOST_TEST(body["choices"][0]["finish_reason"] == "length");
}

BOOST_AUTO_TEST_CASE(a_stop_string_cuts_the_text_and_cancels_the_stream) {
  Served served;
  // A tail of 10 s: only the cancel ends the stream before the test looks (a short one could end on its own first)
  std::string answer = "one, two. three";
  for (int i = 0; i < 400; ++i) answer += " four";
  served.generator.answer_text(answer);
  served.generator.per_token = std::chrono::milliseconds(5);
  json request = hello_chat;
  request["stop"] = {"xyz", ". "};
  const json body = served.ok("/v1/chat/completions", request);
  BOOST_TEST(body["choices"][0]["message"]["content"] == "one, two");
  BOOST_TEST(body["choices"][0]["finish_reason"] == "stop");
  BOOST_TEST(body["choices"][0]["token_ids"] == json(bytes_of("one, two. ")));  // up to the one that matched
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (served.generator.cancelled_streams() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  BOOST_TEST(served.generator.cancelled_streams() == 1);
}

// A whole answer's n choices are read in turn, as a stream's: a stop string in choice 1 ends its decoding while choice
// 0 goes on. Read one after the other, choice 1 was decoded on to its end (400 tokens) while choice 0 was read.
BOOST_AUTO_TEST_CASE(a_stop_string_ends_each_choice_of_a_whole_answer_as_it_comes) {
  Served served;
  const std::string long_answer(200, 'a');
  const std::string stopped = "xSTOP" + std::string(400, 'b');
  served.generator.answer_of_choice = {bytes_of(long_answer), bytes_of(stopped)};
  served.generator.per_token = std::chrono::milliseconds(5);
  json request = hello_chat;
  request["n"] = 2;
  request["stop"] = {"STOP"};
  const json body = served.ok("/v1/chat/completions", request);
  BOOST_TEST(body["choices"][0]["message"]["content"] == long_answer);
  BOOST_TEST(body["choices"][1]["message"]["content"] == "x");
  BOOST_TEST(served.generator.tokens_pushed(1) < 150, served.generator.tokens_pushed(1) << " tokens of choice 1");
  // A stop string is at most 1 KB (each read looks for the start of every one at the answer's end).
  request["stop"] = {"STOP", std::string(1025, 's')};
  BOOST_TEST(error_of(served.post("/v1/chat/completions", request), 400)["param"] == "stop");
  request["stop"] = std::string(1025, 's');
  BOOST_TEST(error_of(served.post("/v1/chat/completions", request), 400)["param"] == "stop");
}

// vLLM's stop_token_ids end a choice at those tokens, kept in its ids and not shown in its text, as the model's EOS.
BOOST_AUTO_TEST_CASE(stop_token_ids_end_a_choice) {
  Served served;
  served.generator.answer_text("abc");
  const json choice = served.ok("/v1/completions", {{"prompt", "p"}, {"stop_token_ids", {'b'}}})["choices"][0];
  BOOST_TEST(choice["text"] == "a");
  BOOST_TEST(choice["token_ids"] == json({'a', 'b'}));
  BOOST_TEST(choice["finish_reason"] == "stop");
  const std::vector<text::TokenId> sent = served.generator.requests().at(0).stop_tokens;
  BOOST_TEST((std::find(sent.begin(), sent.end(), 'b') != sent.end()));  // the engine stops there too
}

BOOST_AUTO_TEST_CASE(chat_logprobs_have_openai_shape) {
  Served served;
  served.generator.answer_text("ab");
  json request = hello_chat;
  request["logprobs"] = true;
  request["top_logprobs"] = 2;
  const json content = served.ok("/v1/chat/completions", request)["choices"][0]["logprobs"]["content"];
  BOOST_REQUIRE(content.size() == 2);
  BOOST_TEST(content[1]["token"] == "b");
  BOOST_TEST(content[1]["logprob"] == -0.25);
  BOOST_TEST(content[1]["bytes"] == json({98}));
  BOOST_TEST(content[1]["top_logprobs"].size() == 2);
  BOOST_TEST(content[1]["top_logprobs"][0]["token"] == "c");
  BOOST_TEST(served.generator.requests().at(0).top_logprobs == 2);
  // An alternative that top-p cut (-inf) is -9999, as vLLM writes it: JSON has no infinity (it was null).
  request["top_logprobs"] = 3;
  const json cut = served.ok("/v1/chat/completions", request)["choices"][0]["logprobs"]["content"][0]["top_logprobs"];
  BOOST_REQUIRE(cut.size() == 3);
  BOOST_TEST(cut[2]["logprob"] == -9999.0);
}

BOOST_AUTO_TEST_CASE(completion_logprobs_have_the_legacy_shape) {
  Served served;
  served.generator.answer_text("xy");
  const json logprobs = served.ok("/v1/completions", {{"prompt", "p"}, {"logprobs", 1}})["choices"][0]["logprobs"];
  BOOST_TEST(logprobs["tokens"] == json({"x", "y"}));
  BOOST_TEST(logprobs["token_logprobs"] == json({-0.125, -0.25}));
  // The token drawn is among its alternatives too (up to logprobs + 1 entries, as OpenAI's and vLLM's).
  BOOST_TEST(logprobs["top_logprobs"][0] == json({{"y", -1.125}, {"x", -0.125}}));
  BOOST_TEST(logprobs["text_offset"] == json({0, 1}));
  // Offsets index the text in characters, as OpenAI's and vLLM's: a special token adds nothing to it, "é" (two bytes,
  // two byte tokens here) one character, counted at its first byte.
  served.generator.answer = {'a', 256, 0xC3, 0xA9, 'b'};  // a <|im_start|> é b
  const json choice = served.ok("/v1/completions", {{"prompt", "p"}, {"logprobs", 0}})["choices"][0];
  BOOST_TEST(choice["text"] == "a\u00e9b");
  BOOST_TEST(choice["logprobs"]["text_offset"] == json({0, 1, 1, 2, 2}), choice["logprobs"]["text_offset"].dump());
  BOOST_TEST(choice["logprobs"]["top_logprobs"][0] == json({{"a", -0.125}}));  // logprobs 0: the token drawn alone
}

BOOST_AUTO_TEST_CASE(no_logprobs_asked_gives_null) {
  Served served;
  served.generator.answer_text("a");
  BOOST_TEST(served.ok("/v1/chat/completions", hello_chat)["choices"][0]["logprobs"].is_null());
}

BOOST_AUTO_TEST_CASE(a_streamed_chat_sends_the_role_then_pieces_then_the_finish_and_done) {
  Served served;
  served.generator.answer_text("Hello there");
  json request = hello_chat;
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  const auto result = served.post("/v1/chat/completions", request);
  BOOST_TEST(result->get_header_value("Content-Type") == "text/event-stream");
  const std::vector<json> events = events_of(result->body);
  BOOST_REQUIRE(events.size() >= 5);
  BOOST_TEST(events.front()["object"] == "chat.completion.chunk");
  BOOST_TEST(events.front()["choices"][0]["delta"]["role"] == "assistant");
  BOOST_TEST(events.front()["prompt_token_ids"].size() > 0);
  BOOST_TEST(streamed_text(events, "content") == "Hello there");
  std::vector<std::int32_t> ids;
  for (std::size_t i = 1; i + 3 < events.size(); ++i)
    for (const json& id : events[i]["choices"][0]["token_ids"]) ids.push_back(id);
  BOOST_TEST(ids == bytes_of("Hello there"));
  BOOST_TEST(events[events.size() - 3]["choices"][0]["finish_reason"] == "stop");
  BOOST_TEST(events[events.size() - 2]["usage"]["completion_tokens"] == 11);
  BOOST_TEST(events.back() == "[DONE]");
  for (std::size_t i = 0; i + 2 < events.size(); ++i)  // OpenAI's: every chunk before the last says usage null
    BOOST_TEST((events[i].contains("usage") && events[i]["usage"].is_null()), i);
}

// n choices stream side by side (as OpenAI and vLLM send them), not one after the other: a choice's pieces do not wait
// for the choices before it to end.
BOOST_AUTO_TEST_CASE(n_streamed_choices_interleave) {
  Served served;
  const std::string answer = "abcdefghijklmnopqrstuvwxyz0123456789ABCD";  // 200 ms a choice: a slow thread's start
  served.generator.answer_text(answer);
  served.generator.per_token = std::chrono::milliseconds(5);
  json request = hello_chat;
  request["n"] = 2;
  request["stream"] = true;
  const std::vector<json> events = events_of(served.post("/v1/chat/completions", request)->body);
  std::string text[2];
  std::size_t finished[2] = {0, 0}, first_piece[2] = {0, 0};
  for (std::size_t k = 0; k + 1 < events.size(); ++k) {
    const json& c = events[k]["choices"].at(0);
    const std::size_t i = c["index"];
    BOOST_REQUIRE(i < 2);
    if (c["delta"].contains("role")) {
      BOOST_TEST(events[k]["prompt_token_ids"].size() > 0);  // each choice's first event
      continue;
    }
    BOOST_TEST(!events[k].contains("prompt_token_ids"));
    if (!c["finish_reason"].is_null()) {
      finished[i] = k;
      continue;
    }
    if (first_piece[i] == 0) first_piece[i] = k;
    text[i] += c["delta"]["content"].get<std::string>();
  }
  BOOST_TEST(text[0] == answer);
  BOOST_TEST(text[1] == answer);
  BOOST_TEST(finished[0] > 0);
  BOOST_TEST(finished[1] > 0);
  BOOST_TEST(first_piece[1] < finished[0]);  // choice 1 began before choice 0 ended
  BOOST_TEST(events.back() == "[DONE]");
}

BOOST_AUTO_TEST_CASE(a_streamed_answer_never_shows_part_of_a_stop_string) {
  Served served;
  served.generator.answer_text("abcSTdefSTOPghi");
  const auto result = served.post("/v1/completions", {{"prompt", "p"}, {"stream", true}, {"stop", "STOP"}});
  const std::vector<json> events = events_of(result->body);
  BOOST_TEST(streamed_text(events, "text") == "abcSTdef");
  BOOST_TEST(events.end()[-2]["choices"][0]["finish_reason"] == "stop");
  BOOST_TEST(events.back() == "[DONE]");
}

BOOST_AUTO_TEST_CASE(tools_are_rendered_and_a_tool_call_is_parsed_back) {
  Served served;
  served.generator.answer_text("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>");
  served.generator.answer.push_back(im_end);
  json request = hello_chat;
  request["tools"] = {add_tool};
  const json choice = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(choice["finish_reason"] == "tool_calls");
  BOOST_TEST(choice["message"]["content"].is_null());
  const json call = choice["message"]["tool_calls"][0];
  BOOST_TEST(call["id"].get<std::string>().rfind("call_", 0) == 0);
  BOOST_TEST(call["type"] == "function");
  BOOST_TEST(call["function"]["name"] == "add");
  // As the model wrote them (json.dumps' style): a client echoes them, and the next prompt repeats the model's tokens.
  BOOST_TEST(call["function"]["arguments"] == "{\"a\": 1, \"b\": 2}");
  const std::string prompt = served.tokenizer->decode(served.generator.requests().at(0).prompt);
  // the tool as vLLM hands it to the template (its request model's dump: "type" first, whatever order this client
  // wrote; the description null where none was given), between the template's tags
  BOOST_TEST(prompt.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"add\", \"description\": null, "
                         "\"parameters\": {\"type\": \"object\"}}}\n</tools>") != std::string::npos,
             prompt);
}

// parallel_tool_calls false gives the first call only, whole or streamed (vLLM's since 0.11); the trace keeps every
// token the model wrote.
BOOST_AUTO_TEST_CASE(parallel_tool_calls_false_answers_the_first_call_only) {
  Served served;
  const std::string two_calls =
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2}}\n</tool_call>";
  served.generator.answer_text(two_calls);
  json request = hello_chat;
  request["tools"] = {add_tool};
  BOOST_TEST(served.ok("/v1/chat/completions", request)["choices"][0]["message"]["tool_calls"].size() == 2);
  request["parallel_tool_calls"] = false;
  const json choice = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_REQUIRE(choice["message"]["tool_calls"].size() == 1);
  BOOST_TEST(choice["message"]["tool_calls"][0]["function"]["arguments"] == "{\"a\": 1}");
  BOOST_TEST(choice["finish_reason"] == "tool_calls");
  BOOST_TEST(choice["token_ids"] == json(bytes_of(two_calls)));
  request["stream"] = true;
  const std::vector<json> events = events_of(served.post("/v1/chat/completions", request)->body);
  BOOST_REQUIRE(events.size() == 4);  // the role, the calls, the finish, [DONE]
  BOOST_TEST(events[1]["choices"][0]["delta"]["tool_calls"].size() == 1);
  request["parallel_tool_calls"] = "no";
  BOOST_TEST(error_of(served.post("/v1/chat/completions", request), 400)["param"] == "parallel_tool_calls");
}

BOOST_AUTO_TEST_CASE(a_malformed_tool_call_is_plain_text_with_stop) {
  Served served;
  const std::string text = "<tool_call>\n{\"name\": add}\n</tool_call>";
  served.generator.answer_text(text);
  json request = hello_chat;
  request["tools"] = {add_tool};
  const json choice = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(choice["finish_reason"] == "stop");
  BOOST_TEST(choice["message"]["content"] == text);
  BOOST_TEST(!choice["message"].contains("tool_calls"));
}

BOOST_AUTO_TEST_CASE(tool_choice_none_shows_no_tools_and_parses_no_calls) {
  Served served;
  served.generator.answer_text("<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>");
  json request = hello_chat;
  request["tools"] = {add_tool};
  request["tool_choice"] = "none";
  const json choice = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(choice["finish_reason"] == "stop");
  BOOST_TEST(served.tokenizer->decode(served.generator.requests().at(0).prompt).find("<tools>") == std::string::npos);
}

// tool_choice "required" or a named function begins the call in the prompt: the model writes the rest, and the answer
// is read with that beginning in front (its tokens are the prompt's; the answer's are what the model wrote).
BOOST_AUTO_TEST_CASE(a_required_or_named_tool_choice_begins_the_call_in_the_prompt) {
  Served served;
  const json mul_tool = {{"type", "function"}, {"function", {{"name", "mul"}}}};
  json request = hello_chat;
  request["tools"] = {add_tool, mul_tool};
  request["tool_choice"] = {{"type", "function"}, {"function", {{"name", "mul"}}}};
  const std::string rest = " {\"a\": 2}}\n</tool_call>";  // ' {' is one token of Qwen's: the prompt ends before it
  served.generator.answer_text(rest);
  served.generator.answer.push_back(im_end);
  const json body = served.ok("/v1/chat/completions", request);
  const json& choice = body["choices"][0];
  BOOST_TEST(choice["finish_reason"] == "stop");  // a named function's call, as OpenAI and vLLM answer it
  BOOST_TEST(choice["message"]["tool_calls"][0]["function"]["name"] == "mul");
  BOOST_TEST(choice["message"]["tool_calls"][0]["function"]["arguments"] == "{\"a\": 2}");
  const std::vector<std::int32_t> sent = served.generator.requests().at(0).prompt;
  const std::string prompt = served.tokenizer->decode(sent);
  const std::string begun = "<|im_start|>assistant\n<tool_call>\n{\"name\": \"mul\", \"arguments\":";
  BOOST_TEST(prompt.substr(prompt.size() - begun.size()) == begun);
  BOOST_TEST(body["prompt_token_ids"] == json(sent));
  std::vector<std::int32_t> answer_ids = bytes_of(rest);
  answer_ids.push_back(im_end);
  BOOST_TEST(choice["token_ids"] == json(answer_ids));
  json streamed = request;
  streamed["stream"] = true;
  served.generator.answer_text(rest);
  served.generator.answer.push_back(im_end);
  const std::vector<json> events = events_of(served.post("/v1/chat/completions", streamed)->body);
  BOOST_REQUIRE(events.size() >= 2u);
  BOOST_TEST(events[events.size() - 2]["choices"][0]["finish_reason"] == "stop");

  request["tool_choice"] = "required";
  served.generator.answer_text("{\"name\": \"add\", \"arguments\": {}}\n</tool_call>");
  const json required = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(required["finish_reason"] == "tool_calls");
  BOOST_TEST(required["message"]["tool_calls"][0]["function"]["name"] == "add");
  const std::string required_prompt = served.tokenizer->decode(served.generator.requests().at(2).prompt);
  const std::string required_begun = "<|im_start|>assistant\n<tool_call>\n";
  BOOST_TEST(required_prompt.substr(required_prompt.size() - required_begun.size()) == required_begun);
  // A continuation that is no call is text, the call's beginning in front, as a malformed call's.
  served.generator.answer_text("no");
  const json refused = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(refused["finish_reason"] == "stop");
  BOOST_TEST(refused["message"]["content"] == "<tool_call>\nno");
  request.erase("tools");
  BOOST_TEST(error_of(served.post("/v1/chat/completions", request), 400)["param"] == "tool_choice");
  // Qwen3's template: the call cannot follow reasoning not written; the prompt closes an empty <think> before it, and
  // thinking asked for is refused.
  Served qwen3(test_options(), 1024, "qwen3");
  qwen3.generator.answer_text("{\"name\": \"add\", \"arguments\": {}}\n</tool_call>");
  request["tools"] = {add_tool};
  BOOST_TEST(qwen3.ok("/v1/chat/completions", request)["choices"][0]["finish_reason"] == "tool_calls");
  const std::string qwen3_prompt = qwen3.tokenizer->decode(qwen3.generator.requests().at(0).prompt);
  const std::string after_think = "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n";
  BOOST_TEST(qwen3_prompt.substr(qwen3_prompt.size() - after_think.size()) == after_think);
  request["chat_template_kwargs"] = {{"enable_thinking", true}};
  BOOST_TEST(error_of(qwen3.post("/v1/chat/completions", request), 400)["param"] == "tool_choice");
}

// Llama 3.1 and 3.2: the tools in the first user message, a call the whole answer in JSON ("parameters"), tool_choice
// beginning it in the prompt; whole or streamed (a stream shows nothing of an answer that may be a call). Llama 3's
// template takes no tools: 400.
BOOST_AUTO_TEST_CASE(llama3_tools_are_json_calls_of_the_whole_answer) {
  Served served(test_options(), 4096, "llama3.1");
  const std::string call = "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}";
  served.generator.answer_text(call);
  json request = hello_chat;
  request["tools"] = {add_tool};
  const json choice = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(choice["finish_reason"] == "tool_calls");
  BOOST_TEST(choice["message"]["content"].is_null());
  BOOST_TEST(choice["message"]["tool_calls"][0]["function"]["name"] == "add");
  BOOST_TEST(choice["message"]["tool_calls"][0]["function"]["arguments"] == "{\"a\": 1, \"b\": 2}");
  const std::string prompt = served.tokenizer->decode(served.generator.requests().at(0).prompt);
  BOOST_TEST(prompt.find("<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n") != std::string::npos);
  BOOST_TEST(prompt.find("Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        "
                         "\"name\": \"add\",\n        \"description\": null,") != std::string::npos,
             prompt);
  served.generator.answer_text("The sum is 3.");  // no call: text
  BOOST_TEST(served.ok("/v1/chat/completions", request)["choices"][0]["message"]["content"] == "The sum is 3.");

  request["tool_choice"] = "required";
  served.generator.answer_text("add\", \"parameters\": {}}");
  const json required = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(required["message"]["tool_calls"][0]["function"]["name"] == "add");
  const std::string required_prompt = served.tokenizer->decode(served.generator.requests().at(2).prompt);
  const std::string begun = "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"";
  BOOST_TEST(required_prompt.substr(required_prompt.size() - begun.size()) == begun);
  request["tool_choice"] = {{"type", "function"}, {"function", {{"name", "add"}}}};
  served.generator.answer_text(" {\"a\": 5}}");
  const json named = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(named["message"]["tool_calls"][0]["function"]["arguments"] == "{\"a\": 5}");

  request.erase("tool_choice");
  request["stream"] = true;
  served.generator.answer_text(call);
  served.generator.per_token = std::chrono::milliseconds(1);
  const std::vector<json> events = events_of(served.post("/v1/chat/completions", request)->body);
  BOOST_REQUIRE(events.size() == 4);  // the role, the call, the finish, [DONE]
  BOOST_TEST(!events[1]["choices"][0]["delta"].contains("content"));
  BOOST_TEST(events[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "add");
  BOOST_TEST(events[2]["choices"][0]["finish_reason"] == "tool_calls");
  served.generator.answer_text("Sure: {x}");  // text from its first character: shown as it comes
  const std::vector<json> text_events = events_of(served.post("/v1/chat/completions", request)->body);
  BOOST_TEST(streamed_text(text_events, "content") == "Sure: {x}");
  BOOST_TEST(text_events.size() > 4u);

  Served llama3(test_options(), 4096, "llama3");
  request.erase("stream");
  const std::string refusal = error_of(llama3.post("/v1/chat/completions", request), 400)["message"];
  BOOST_TEST(refusal.find("tool definitions are not supported") != std::string::npos, refusal);
}

// Mistral NeMo: tools in [AVAILABLE_TOOLS], calls after its special [TOOL_CALLS] token (its text kept in the answer
// to be read, as vLLM keeps special tokens for its mistral parser), ids of 9 letters and digits, which its template
// takes back in the next request.
BOOST_AUTO_TEST_CASE(mistral_calls_follow_their_token_with_ids_the_template_takes) {
  Served served(test_options(), 4096, "mistral-nemo");
  const std::string call = "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}}]";
  const auto answer = [&](const std::string& text) { served.generator.answer = served.tokenizer->encode(text); };
  answer(call);
  BOOST_REQUIRE(served.generator.answer.front() == 259);  // one special token
  json request = hello_chat;
  request["tools"] = {add_tool};
  const json choice = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(choice["finish_reason"] == "tool_calls");
  BOOST_TEST(choice["message"]["content"].is_null());
  const json& made = choice["message"]["tool_calls"][0];
  BOOST_TEST(made["function"]["arguments"] == "{\"a\": 1}");
  const std::string id = made["id"];
  BOOST_TEST(id.size() == 9u);
  BOOST_TEST(served.tokenizer->decode(served.generator.requests().at(0).prompt) ==
             "<s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"add\", \"description\": null, "
             "\"parameters\": {\"type\": \"object\"}}}][/AVAILABLE_TOOLS][INST]Hi[/INST]");
  json next = request;  // the call and its result sent back
  next["messages"].push_back(choice["message"]);
  next["messages"].push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", "3"}});
  served.generator.answer_text("It is 3.");
  BOOST_TEST(served.ok("/v1/chat/completions", next)["choices"][0]["message"]["content"] == "It is 3.");
  const std::string prompt = served.tokenizer->decode(served.generator.requests().at(1).prompt);
  BOOST_TEST(prompt.find("[/INST][TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}, \"id\": \"" + id +
                         "\"}]</s>[TOOL_RESULTS]{\"content\": 3, \"call_id\": \"" + id + "\"}[/TOOL_RESULTS]") !=
                 std::string::npos,
             prompt);
  // Without tools, special tokens stay out of the text.
  answer("[TOOL_CALLS]x");
  BOOST_TEST(served.ok("/v1/chat/completions", hello_chat)["choices"][0]["message"]["content"] == "x");
  // tool_choice required begins the list in the prompt.
  request["tool_choice"] = "required";
  served.generator.answer_text("add\", \"arguments\": {}}]");
  const json required = served.ok("/v1/chat/completions", request)["choices"][0];
  BOOST_TEST(required["message"]["tool_calls"][0]["function"]["name"] == "add");
  const std::string begun = served.tokenizer->decode(served.generator.requests().at(3).prompt);
  BOOST_TEST(begun.substr(begun.size() - 30) == "[/INST][TOOL_CALLS][{\"name\": \"");
  // Streamed: the text before the token as it comes, the call at the end.
  request.erase("tool_choice");
  request["stream"] = true;
  answer("Adding. " + call);
  const std::vector<json> events = events_of(served.post("/v1/chat/completions", request)->body);
  BOOST_TEST(streamed_text(events, "content") == "Adding.");
  bool streamed_call = false;
  for (const json& e : events)
    if (e.is_object() && !e["choices"].empty() && e["choices"][0]["delta"].contains("tool_calls"))
      streamed_call = e["choices"][0]["delta"]["tool_calls"][0]["id"].get<std::string>().size() == 9;
  BOOST_TEST(streamed_call);
}

BOOST_AUTO_TEST_CASE(a_streamed_tool_call_comes_whole_in_the_last_chunk) {
  Served served;
  served.generator.answer_text("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>");
  json request = hello_chat;
  request["tools"] = {add_tool};
  request["stream"] = true;
  const std::vector<json> events = events_of(served.post("/v1/chat/completions", request)->body);
  BOOST_REQUIRE(events.size() == 4);  // the role, the calls, the finish, [DONE]
  const json calls = events[1]["choices"][0];
  BOOST_TEST(calls["finish_reason"].is_null());  // apart from the finish: OpenAI's SDKs close the arguments before it
  BOOST_TEST(calls["delta"]["tool_calls"][0]["index"] == 0);
  BOOST_TEST(calls["delta"]["tool_calls"][0]["function"]["name"] == "add");
  BOOST_TEST(events[2]["choices"][0]["finish_reason"] == "tool_calls");
  BOOST_TEST(events[2]["choices"][0]["delta"] == json::object());
}

// With tools, a stream shows the text before the calls as it comes (never a tag, or what may begin one), and the calls,
// the rest of the text and every token's id at the end.
BOOST_AUTO_TEST_CASE(a_streamed_answer_with_tools_shows_its_text_before_the_calls) {
  Served served;
  const std::string answer = "Let me add. <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  served.generator.answer_text(answer);
  served.generator.per_token = std::chrono::milliseconds(1);  // pieces as they come, not the answer at once
  json request = hello_chat;
  request["tools"] = {add_tool};
  request["stream"] = true;
  std::vector<json> events = events_of(served.post("/v1/chat/completions", request)->body);
  BOOST_REQUIRE_MESSAGE(events.size() > 5, json(events).dump());  // the role, text, the calls, the finish, [DONE]
  std::string before;
  for (std::size_t k = 1; k + 3 < events.size(); ++k) {
    const json& c = events[k]["choices"][0];
    before += c["delta"]["content"].get<std::string>();
    BOOST_TEST(c["token_ids"].empty());
    BOOST_TEST(c["finish_reason"].is_null());
  }
  BOOST_TEST(before == "Let me add.");  // as the whole answer's content: the blank before the call is not shown
  const json calls = events.end()[-3]["choices"][0];
  BOOST_TEST(!calls["delta"].contains("content"));
  BOOST_TEST(calls["delta"]["tool_calls"][0]["function"]["arguments"] == "{\"a\": 1}");
  const json last = events.end()[-2]["choices"][0];
  BOOST_TEST(last["finish_reason"] == "tool_calls");
  BOOST_TEST(last["token_ids"] == json(bytes_of(answer)));
  // No call: all of it shown, what looked like a tag's start held back only until it was not one.
  served.generator.answer_text("Sum <3> <tool");
  events = events_of(served.post("/v1/chat/completions", request)->body);
  BOOST_TEST(streamed_text(events, "content") == "Sum <3> <tool");
  BOOST_TEST(events.end()[-3]["choices"][0]["delta"]["content"] == " <tool");  // held back to the end
  BOOST_TEST(events.end()[-2]["choices"][0]["finish_reason"] == "stop");
  BOOST_TEST(events.end()[-2]["choices"][0]["token_ids"] == json(bytes_of("Sum <3> <tool")));
  // Reasoning that names the tag (a Qwen3 model planning its call) is shown as it comes, not held to the end.
  const std::string thought = "<think>\nI will call it with <tool_call> and JSON.\n</think>\n\n";
  served.generator.answer_text(thought + "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>");
  events = events_of(served.post("/v1/chat/completions", request)->body);
  BOOST_REQUIRE(events.size() > 5);
  std::string shown;  // before the chunk with the calls
  for (std::size_t k = 1; k + 3 < events.size(); ++k) shown += events[k]["choices"][0]["delta"]["content"];
  BOOST_TEST(shown == thought.substr(0, thought.find_last_not_of('\n') + 1));
  BOOST_TEST(events.end()[-3]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "add");
}

// runner.reasoning_parser qwen3: the answer's <think> block is the message's reasoning (under both names vLLM 0.11
// gives it), the rest its content, whole or streamed; without the parser the content is the whole answer.
BOOST_AUTO_TEST_CASE(a_reasoning_parser_gives_the_think_block_apart) {
  Served served(test_options(), 1024, "qwen3", ReasoningParser::qwen3);
  const std::string answer = "<think>\nTwo and two.\n</think>\n\nFour.";
  served.generator.answer_text(answer);
  json message = served.ok("/v1/chat/completions", hello_chat)["choices"][0]["message"];
  BOOST_TEST(message["content"] == "\n\nFour.");
  BOOST_TEST(message["reasoning"] == "\nTwo and two.\n");
  BOOST_TEST(message["reasoning_content"] == message["reasoning"]);
  // Cut short: all of it reasoning, no content.
  json cut = hello_chat;
  cut["max_tokens"] = 12;
  message = served.ok("/v1/chat/completions", cut)["choices"][0]["message"];
  BOOST_TEST(message["content"].is_null());
  BOOST_TEST(message["reasoning"] == "\nTwo ");
  // Thinking turned off (the prompt closes an empty <think>): all of it content, the reasoning null.
  json no_thinking = hello_chat;
  no_thinking["chat_template_kwargs"] = {{"enable_thinking", false}};
  served.generator.answer_text("Four.");
  message = served.ok("/v1/chat/completions", no_thinking)["choices"][0]["message"];
  BOOST_TEST(message["content"] == "Four.");
  BOOST_TEST((message.contains("reasoning_content") && message["reasoning_content"].is_null()));
  // Streamed a byte a token: reasoning as it comes, then content, each token's id once.
  served.generator.answer_text(answer);
  served.generator.per_token = std::chrono::milliseconds(1);
  json streamed = hello_chat;
  streamed["stream"] = true;
  const auto read = [&](const json& request) {
    std::string reasoning, content;
    std::vector<std::int32_t> ids;
    bool reasoning_after_content = false;
    for (const json& e : events_of(served.post("/v1/chat/completions", request)->body)) {
      if (!e.is_object() || e["choices"].empty()) continue;
      const json& c = e["choices"][0];
      if (c["delta"].contains("reasoning")) {
        BOOST_TEST(c["delta"]["reasoning_content"] == c["delta"]["reasoning"]);
        reasoning += c["delta"]["reasoning"].get<std::string>();
        reasoning_after_content |= !content.empty();
      }
      if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
      if (c.contains("token_ids") && c["finish_reason"].is_null())
        for (const json& id : c["token_ids"]) ids.push_back(id.get<std::int32_t>());
    }
    BOOST_TEST(!reasoning_after_content);
    return std::make_tuple(reasoning, content, ids);
  };
  auto [reasoning, content, ids] = read(streamed);
  BOOST_TEST(reasoning == "\nTwo and two.\n");
  BOOST_TEST(content == "\n\nFour.");
  BOOST_TEST(ids == bytes_of(answer));
  // The answer ends where "</thi" may have begun the close: held, then given as reasoning.
  served.generator.answer_text("<think>\nplan </thi");
  std::tie(reasoning, content, ids) = read(streamed);
  BOOST_TEST(reasoning == "\nplan </thi");
  BOOST_TEST(content == "");
  BOOST_TEST(ids == bytes_of("<think>\nplan </thi"));

  // With tools the calls are read from the content: a tag named in the reasoning is not one.
  const std::string thought = "<think>\nI will call <tool_call> now.\n</think>\n\n";
  const std::string call = "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>";
  served.generator.answer_text(thought + call);
  json with_tools = hello_chat;
  with_tools["tools"] = {add_tool};
  const json choice = served.ok("/v1/chat/completions", with_tools)["choices"][0];
  BOOST_TEST(choice["finish_reason"] == "tool_calls");
  BOOST_TEST(choice["message"]["content"].is_null());
  BOOST_TEST(choice["message"]["tool_calls"][0]["function"]["name"] == "add");
  BOOST_TEST(choice["message"]["reasoning"] == "\nI will call <tool_call> now.\n");
  with_tools["stream"] = true;
  const std::vector<json> events = events_of(served.post("/v1/chat/completions", with_tools)->body);
  std::string streamed_reasoning;
  for (const json& e : events)
    if (e.is_object() && !e["choices"].empty() && e["choices"][0]["delta"].contains("reasoning"))
      streamed_reasoning += e["choices"][0]["delta"]["reasoning"].get<std::string>();
  BOOST_TEST(streamed_reasoning == "\nI will call <tool_call> now.\n");
  BOOST_TEST(streamed_text(events, "content") == "");
  BOOST_REQUIRE(events.size() > 3);
  BOOST_TEST(events.end()[-3]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "add");
  BOOST_TEST(events.end()[-2]["choices"][0]["token_ids"] == json(bytes_of(thought + call)));
  // Text between the reasoning and a call is the content, the same streamed as whole: the blanks before the call
  // dropped, those after </think> kept (a stream has sent them before it knows a call follows).
  served.generator.answer_text(thought + "Sure.\n" + call);
  with_tools["stream"] = false;
  BOOST_TEST(served.ok("/v1/chat/completions", with_tools)["choices"][0]["message"]["content"] == "\n\nSure.");
  with_tools["stream"] = true;
  BOOST_TEST(streamed_text(events_of(served.post("/v1/chat/completions", with_tools)->body), "content") == "\n\nSure.");

  // A required call is begun in the prompt after an empty <think>: the answer is a call, no reasoning.
  served.generator.answer_text("{\"name\": \"add\", \"arguments\": {}}\n</tool_call>");
  with_tools["stream"] = false;
  with_tools["tool_choice"] = "required";
  const json forced = served.ok("/v1/chat/completions", with_tools)["choices"][0]["message"];
  BOOST_TEST(forced["tool_calls"][0]["function"]["name"] == "add");
  BOOST_TEST((forced.contains("reasoning") && forced["reasoning"].is_null()));

  // Without the parser: the whole answer is the content, and the message has no reasoning.
  Served plain(test_options(), 1024, "qwen3");
  plain.generator.answer_text(answer);
  message = plain.ok("/v1/chat/completions", hello_chat)["choices"][0]["message"];
  BOOST_TEST(message["content"] == answer);
  BOOST_TEST(!message.contains("reasoning"));
}

// DeepSeek R1's prompt opens <think> itself: its answers begin with reasoning whatever enable_thinking says.
BOOST_AUTO_TEST_CASE(deepseek_r1_answers_are_reasoning_up_to_their_close) {
  Served served(test_options(), 1024, "deepseek-r1", ReasoningParser::deepseek_r1);
  served.generator.answer_text("Two and two.\n</think>\n\nFour.");
  json request = hello_chat;
  request["chat_template_kwargs"] = {{"enable_thinking", false}};
  const json message = served.ok("/v1/chat/completions", request)["choices"][0]["message"];
  BOOST_TEST(message["reasoning"] == "Two and two.\n");
  BOOST_TEST(message["content"] == "\n\nFour.");
  const std::string prompt = served.tokenizer->decode(served.generator.requests().at(0).prompt);
  BOOST_TEST(prompt == "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>\n");
  request["tools"] = {add_tool};  // its template writes no tool definitions
  BOOST_TEST(error_of(served.post("/v1/chat/completions", request), 400)["message"].get<std::string>().find(
                 "writes no tool definitions") != std::string::npos);
  // vLLM's deepseek_r1 parser ignores enable_thinking beside a Qwen3 template too: an answer without </think> is
  // reasoning; its qwen3 parser makes it content.
  json no_thinking = hello_chat;
  no_thinking["chat_template_kwargs"] = {{"enable_thinking", false}};
  for (const auto parser : {ReasoningParser::deepseek_r1, ReasoningParser::qwen3}) {
    Served qwen3(test_options(), 1024, "qwen3", parser);
    qwen3.generator.answer_text("Four.");
    const json m = qwen3.ok("/v1/chat/completions", no_thinking)["choices"][0]["message"];
    BOOST_TEST(m["content"] == (parser == ReasoningParser::qwen3 ? json("Four.") : json()));
    BOOST_TEST(m["reasoning"] == (parser == ReasoningParser::qwen3 ? json() : json("Four.")));
  }
}

// Qwen3 Thinking-2507's prompt opens <think>: answers are reasoning up to </think> whatever enable_thinking says, and
// calls come after it (a forced one refused). Instruct-2507's prompt opens none and ignores the switch.
BOOST_AUTO_TEST_CASE(qwen3_2507_prompts_open_think_or_not) {
  Served thinking(test_options(), 1024, "qwen3-thinking-2507", ReasoningParser::qwen3);
  thinking.generator.answer_text("Two and two.\n</think>\n\nFour.");
  json request = hello_chat;
  request["chat_template_kwargs"] = {{"enable_thinking", false}};
  const json message = thinking.ok("/v1/chat/completions", request)["choices"][0]["message"];
  BOOST_TEST(message["reasoning"] == "Two and two.\n");
  BOOST_TEST(message["content"] == "\n\nFour.");
  BOOST_TEST(thinking.tokenizer->decode(thinking.generator.requests().at(0).prompt) ==
             "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  // A forced call would be begun in the prompt, cutting out the reasoning the prompt asks for: refused.
  request["tools"] = {add_tool};
  request["tool_choice"] = {{"type", "function"}, {"function", {{"name", "add"}}}};
  BOOST_TEST(error_of(thinking.post("/v1/chat/completions", request), 400)["param"] == "tool_choice");
  request["tool_choice"] = "auto";
  thinking.generator.answer_text(
      "Adding.\n</think>\n\n<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>");
  const json called = thinking.ok("/v1/chat/completions", request)["choices"][0]["message"];
  BOOST_TEST(called["tool_calls"][0]["function"]["name"] == "add");
  BOOST_TEST(called["reasoning"] == "Adding.\n");
  // Streamed a byte a token: the reasoning from the first token, then the call.
  thinking.generator.per_token = std::chrono::milliseconds(1);
  request["stream"] = true;
  const std::vector<json> events = events_of(thinking.post("/v1/chat/completions", request)->body);
  BOOST_TEST(streamed_text(events, "reasoning") == "Adding.\n");
  BOOST_TEST(streamed_text(events, "content") == "");
  BOOST_REQUIRE(events.size() > 3);
  BOOST_TEST(events.end()[-3]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "add");
  request.erase("stream");

  Served instruct(test_options(), 1024, "qwen3-instruct-2507");
  instruct.generator.answer_text("Four.");
  BOOST_TEST(instruct.ok("/v1/chat/completions", hello_chat)["choices"][0]["message"]["content"] == "Four.");
  request.erase("tools");
  request.erase("tool_choice");
  instruct.ok("/v1/chat/completions", request);  // enable_thinking false: no empty block
  for (const auto& r : instruct.generator.requests())
    BOOST_TEST(instruct.tokenizer->decode(r.prompt) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

BOOST_AUTO_TEST_CASE(earlier_tool_calls_and_tool_results_are_rendered_back) {
  Served served;
  served.generator.answer_text("3");
  const json request = {
      {"messages",
       {{{"role", "user"}, {"content", "1+2?"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "add"}, {"arguments", "{\"a\": 1}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "3"}}}},
      {"tools", {add_tool}}};
  served.ok("/v1/chat/completions", request);
  const std::string prompt = served.tokenizer->decode(served.generator.requests().at(0).prompt);
  BOOST_TEST(prompt.find("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>") !=
             std::string::npos);
  BOOST_TEST(prompt.find("<tool_response>\n3\n</tool_response>") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_request_under_the_proxy_path_is_traced_per_choice) {
  Served served;
  served.generator.answer_text("ab");
  json request = hello_chat;
  request["n"] = 2;
  request["temperature"] = 0.7;
  request["top_p"] = 0.9;
  request["logprobs"] = true;
  const json body = served.ok("/rollout/ro-3/attempt/at-5/v1/chat/completions", request);
  // The client sees the log-probs of the distribution drawn from; the trace those before top-p, and the temperature
  BOOST_TEST(body["choices"][0]["logprobs"]["content"][1]["logprob"] == -0.25);
  const std::vector<TracedCall> calls = served.tracer.calls();
  BOOST_REQUIRE(calls.size() == 2);
  for (const TracedCall& call : calls) {
    BOOST_TEST(call.rollout_id == 3u);
    BOOST_TEST(call.attempt_id == 5u);
    BOOST_TEST(json(call.prompt) == body["prompt_token_ids"]);
    BOOST_TEST(json(call.response) == body["choices"][0]["token_ids"]);
    BOOST_TEST(call.logprobs == (std::vector<float>{-0.25f, -0.5f}));
    BOOST_TEST(call.temperature == 0.7);
    BOOST_TEST(call.policy_version == policy_version);
  }
}

BOOST_AUTO_TEST_CASE(a_request_with_the_trace_headers_is_traced) {
  Served served;
  served.generator.answer_text("z");
  served.ok("/v1/completions", {{"prompt", {7, 8}}}, {{"x-rollout-id", "ro-3"}, {"x-attempt-id", "at-5"}});
  BOOST_REQUIRE(served.tracer.calls().size() == 1);
  BOOST_TEST(served.tracer.calls()[0].prompt == (std::vector<std::int32_t>{7, 8}));
  BOOST_TEST(served.tracer.calls()[0].response == bytes_of("z"));
}

BOOST_AUTO_TEST_CASE(a_streamed_traced_request_is_recorded_once_it_ends) {
  Served served;
  served.generator.answer_text("abc");
  served.post("/rollout/ro-3/attempt/at-5/v1/completions", {{"prompt", "p"}, {"stream", true}});
  BOOST_REQUIRE(served.tracer.calls().size() == 1);
  BOOST_TEST(served.tracer.calls()[0].response == bytes_of("abc"));
}

// A client may end the attempt as soon as it reads a choice's finish reason: the choice is recorded by then (recorded
// after the stream, the span reached an attempt already ended and was dropped).
BOOST_AUTO_TEST_CASE(a_streamed_choice_is_recorded_before_its_end_is_sent) {
  Served served;
  served.generator.answer_text("abc");
  served.tracer.record_delay = std::chrono::milliseconds(100);
  httplib::Request request;
  request.method = "POST";
  request.path = "/rollout/ro-3/attempt/at-5/v1/completions";
  request.body = json({{"prompt", "p"}, {"stream", true}, {"n", 2}}).dump();
  request.set_header("Content-Type", "application/json");
  std::string seen;
  std::vector<std::size_t> recorded_at_ends;       // how many calls were recorded as each choice's end arrived
  const std::string end = "\"finish_reason\":\"";  // a reason, not null
  request.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
    const std::size_t before = seen.size();  // a match from before it is whole in what came before
    seen.append(data, size);
    for (std::size_t at = seen.find(end, before >= end.size() ? before - end.size() + 1 : 0); at != std::string::npos;
         at = seen.find(end, at + 1))
      recorded_at_ends.push_back(served.tracer.calls().size());
    return true;
  };
  const httplib::Result result = served.client->send(request);
  BOOST_REQUIRE(result);
  BOOST_TEST(result->status == 200);
  BOOST_TEST(recorded_at_ends == (std::vector<std::size_t>{1, 2}));
  BOOST_TEST(served.tracer.calls().size() == 2u);
}

BOOST_AUTO_TEST_CASE(an_attempt_not_running_here_is_404_before_generating) {
  Served served;
  for (const char* path :
       {"/rollout/ro-4/attempt/at-5/v1/chat/completions", "/rollout/ro-3/attempt/at-6/v1/chat/completions",
        "/rollout/3/attempt/5/v1/chat/completions"})
    BOOST_TEST(error_of(served.post(path, hello_chat), 404)["code"] == "attempt_not_found");
  error_of(served.post("/v1/chat/completions", hello_chat, {{"x-rollout-id", "ro-9"}, {"x-attempt-id", "at-5"}}), 404);
  error_of(served.post("/v1/chat/completions", hello_chat, {{"x-rollout-id", "ro-3"}}), 400);
  BOOST_TEST(served.generator.requests().empty());
}

BOOST_AUTO_TEST_CASE(an_untagged_request_is_served_and_not_traced) {
  Served served;
  served.generator.answer_text("a");
  served.ok("/v1/chat/completions", hello_chat);
  BOOST_TEST(served.tracer.calls().empty());
}

BOOST_AUTO_TEST_CASE(malformed_or_out_of_range_requests_are_400_naming_the_field) {
  Served served;
  const auto param_of = [&](const std::string& body) {
    const auto result = served.client->Post("/v1/chat/completions", body, "application/json");
    return error_of(result, 400)["param"];
  };
  BOOST_TEST(param_of("{\"messages\": [").is_null());
  BOOST_TEST(param_of(R"({"messages": [{"role": "user", "content": "x"}], "metadata": )" + std::string(1000, '[') +
                      std::string(1000, ']') + "}")
                 .is_null());  // nested past 256 levels: refused as the body, not dumped (a thread's stack overflowed)
  BOOST_TEST(param_of("[1, 2]").is_null());
  BOOST_TEST(param_of(R"({"messages": "hi"})") == "messages");
  BOOST_TEST(param_of(R"({"messages": [{"role": "wizard", "content": "x"}]})") == "messages");
  const std::string messages = R"("messages": [{"role": "user", "content": "x"}])";
  BOOST_TEST(param_of("{" + messages + R"(, "temperature": -1})") == "temperature");
  BOOST_TEST(param_of("{" + messages + R"(, "temperature": "hot"})") == "temperature");
  BOOST_TEST(param_of("{" + messages + R"(, "n": 0})") == "n");
  BOOST_TEST(param_of("{" + messages + R"(, "top_k": -2})") == "top_k");
  BOOST_TEST(param_of("{" + messages + R"(, "max_tokens": 0})") == "max_tokens");
  BOOST_TEST(param_of("{" + messages + R"(, "logprobs": true, "top_logprobs": 21})") == "top_logprobs");
  BOOST_TEST(param_of("{" + messages + R"(, "stop": 5})") == "stop");
  BOOST_TEST(param_of("{" + messages + R"(, "stream": "yes"})") == "stream");
  BOOST_TEST(param_of("{" + messages + R"(, "tool_choice": {"type": "function", "function": {"name": "x"}}})") ==
             "tool_choice");
  BOOST_TEST(param_of("{" + messages + R"(, "stream_options": {"include_usage": true}})") == "stream_options");
  // Tools as vLLM's request model takes them: a function, its description text, its parameters an object.
  for (const char* tool : {R"({"type": "retrieval", "function": {"name": "f"}})",
                           R"({"type": "function", "function": {"name": "f", "description": 3}})",
                           R"({"type": "function", "function": {"name": "f", "parameters": "{}"}})"})
    BOOST_TEST(param_of("{" + messages + R"(, "tools": [)" + tool + "]}") == "tools", tool);
  // What changes the sampling and is not implemented here is refused, not ignored; its no-op values pass.
  for (const char* unimplemented : {R"("presence_penalty": 1.5)",
                                    R"("frequency_penalty": -1)",
                                    R"("repetition_penalty": 1.2)",
                                    R"("logit_bias": {"72": -100})",
                                    R"("min_tokens": 3)",
                                    R"("response_format": {"type": "json_object"})",
                                    R"("guided_json": {"type": "object"})",
                                    R"("echo": true)",
                                    R"("suffix": "x")",
                                    R"("best_of": 3)",
                                    R"("min_p": 0.1)",
                                    R"("ignore_eos": true)",
                                    R"("bad_words": ["x"])",
                                    R"("allowed_token_ids": [1])",
                                    R"("stop_token_ids": [-1])",
                                    R"("include_stop_str_in_output": true)",
                                    R"("skip_special_tokens": false)",
                                    R"("add_generation_prompt": false)",
                                    R"("continue_final_message": true)",
                                    R"("prompt_logprobs": 1)"}) {
    const std::string body = "{" + messages + ", " + unimplemented + "}";
    const std::string name = std::string(unimplemented).substr(1, std::string(unimplemented).find('"', 1) - 1);
    BOOST_TEST(param_of(body) == name, body);
  }
  const auto not_boolean =
      served.client->Post("/v1/completions", R"({"prompt": "x", "add_special_tokens": 1})", "application/json");
  BOOST_TEST(error_of(not_boolean, 400)["param"] == "add_special_tokens");
  // Prompts times n past the bound (each choice is queued at once): one more than allowed is refused, all of it.
  json many = {{"prompt", json::array()}, {"n", 8}};
  for (int i = 0; i < 129; ++i) many["prompt"].push_back({1, 2});
  const auto too_many = served.client->Post("/v1/completions", many.dump(), "application/json");
  BOOST_TEST(error_of(too_many, 400)["message"] ==
             "prompt: 129 prompts of 8 choices each: at most 1024 choices a request");
  BOOST_TEST(served.generator.requests().empty());
}

// The no-op values of parameters not implemented here pass (clients send their defaults); OpenAI's "developer"
// messages are system messages.
BOOST_AUTO_TEST_CASE(unimplemented_parameters_at_their_no_op_values_and_developer_messages_pass) {
  Served served;
  served.generator.answer_text("a");
  const std::string messages = R"("messages": [{"role": "user", "content": "x"}])";
  served.ok("/v1/chat/completions",
            json::parse("{" + messages +
                        R"(, "presence_penalty": 0, "frequency_penalty": 0, "logit_bias": {}, "best_of": 1,
                            "response_format": {"type": "text"}, "echo": false, "suffix": null, "min_tokens": 0.0,
                            "min_p": 0, "ignore_eos": false, "bad_words": [], "allowed_token_ids": [],
                            "skip_special_tokens": true, "add_generation_prompt": true, "prompt_logprobs": null})"));
  // OpenAI's "developer" messages are system messages.
  served.ok("/v1/chat/completions",
            {{"messages", {{{"role", "developer"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "x"}}}}});
  BOOST_TEST(served.tokenizer->decode(served.generator.requests().back().prompt) ==
             "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
}

BOOST_AUTO_TEST_CASE(a_prompt_longer_than_the_context_is_400) {
  Served served;
  const json error = error_of(served.post("/v1/completions", {{"prompt", std::string(1100, 'x')}}), 400);
  BOOST_TEST(error["code"] == "context_length_exceeded");
  BOOST_TEST(error["param"] == "prompt");
  const json chat = {{"messages", {{{"role", "user"}, {"content", std::string(1100, 'x')}}}}};
  BOOST_TEST(error_of(served.post("/v1/chat/completions", chat), 400)["param"] == "messages");
}

BOOST_AUTO_TEST_CASE(an_engine_refusal_is_400) {
  Served served;  // the scripted engine refuses an empty prompt
  BOOST_TEST(error_of(served.post("/v1/completions", {{"prompt", ""}}), 400)["message"] == "an empty prompt");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace arclight::serve::testing
