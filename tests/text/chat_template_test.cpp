// Chat templates: recognised from tokenizer_config.json (a string, a list with a "default", chat_template.jinja),
// named, or refused; conversations from OpenAI-style JSON; stop tokens. The renderings themselves are checked
// against the real templates in chat_template_reference.mjs.
#include "arclight/text/chat_template.hpp"
#include "../temp_dir.hpp"

#include <boost/test/unit_test.hpp>

#include <ctime>

#include <algorithm>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

using namespace arclight;
using namespace arclight::text;
using json = nlohmann::json;

namespace {

const char* chatml_source = "{% for m in messages %}{{'<|im_start|>' + m.role}}{% endfor %}";

Conversation chat(const std::string& json_text) { return parse_conversation(json_text); }

}  // namespace

BOOST_AUTO_TEST_SUITE(chat_templates)

BOOST_AUTO_TEST_CASE(recognised_by_markers) {
  BOOST_TEST(ChatTemplate::recognize(chatml_source, "x").name == "chatml");
  // Qwen3's and Thinking-2507's by how each writes <think>: on the last turn or around reasoning, and closed for
  // enable_thinking false (Qwen3's); the same history and a prompt opening it (Thinking-2507's). Instruct-2507's writes
  // no <think>, and Qwen3's tools block (the system message only where given). A <think> template otherwise (QwQ's
  // prompt opens it, its history drops it; Instruct-2507's patched to write reasoning; one keeping reasoning in all of
  // the history) is refused.
  const std::string any_turn = "<|im_start|> '<think>' {%- if loop.last or (not loop.last and reasoning_content) %}";
  const std::string last_turn = any_turn + "{%- if loop.index0 > ns.last_query_index %}";
  const std::string opens = "{{- '<|im_start|>assistant\\n<think>\\n' }}";
  const std::string switched = "{%- if enable_thinking is defined and enable_thinking is false %}";
  BOOST_TEST(ChatTemplate::recognize(last_turn + switched, "x").name == "qwen3");
  BOOST_TEST(ChatTemplate::recognize(last_turn + opens, "x").name == "qwen3-thinking-2507");
  const std::string qwen3_tools =
      "<|im_start|> {%- if messages[0].role == 'system' %}{{- messages[0].content + "
      "'\\n\\n' }}{%- endif %}{{- \"# Tools\\n\\nYou may call\" }} <tool_response>";
  const ChatTemplate instruct = ChatTemplate::recognize(qwen3_tools, "x");
  BOOST_TEST(instruct.name == "qwen3-instruct-2507");
  BOOST_TEST(instruct.tool_format);
  // Qwen2.5's tools block (after its default) is not Qwen3's: a template mixing the two is neither.
  BOOST_TEST(ChatTemplate::recognize("<|im_start|> You are a helpful assistant. {{- \"\\n\\n# Tools\" }}", "x").name ==
             "qwen2");
  BOOST_CHECK_THROW(ChatTemplate::recognize("{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }} "
                                            "{{- \"# Tools\\n\\nYou may call\" }}",
                                            "x"),
                    TokenizerFileError);
  BOOST_CHECK_THROW(ChatTemplate::recognize(last_turn + switched + "{{- \"\\n\\n# Tools\" }}", "x"),
                    TokenizerFileError);
  const std::string patched = "<|im_start|> '<think>' {%- if reasoning_content %}";
  for (const std::string& other : std::vector<std::string>{
           "<|im_start|> {{ '<think>' }}", last_turn, last_turn + opens + switched, patched, patched + qwen3_tools,
           last_turn + "{%- if reasoning_content %}", "<|im_start|> {{- '<|im_start|>assistant\\n<think>\\n' }}",
           any_turn + switched, any_turn + opens})
    BOOST_CHECK_THROW(ChatTemplate::recognize(other, "x"), TokenizerFileError);
  BOOST_TEST(
      ChatTemplate::recognize("<|im_start|>You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", "x")
          .name == "qwen2.5");
  BOOST_TEST(ChatTemplate::recognize("<|start_header_id|>", "x").name == "llama3");
  BOOST_TEST(ChatTemplate::recognize("<|start_header_id|> Cutting Knowledge Date", "x").name == "llama3.1");
  // Qwen2-Instruct's template (its default system prompt); Llama 3.2's (today's date).
  BOOST_TEST(ChatTemplate::recognize("{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n"
                                     "You are a helpful assistant.<|im_end|>\\n' }}{% endif %}",
                                     "x")
                 .name == "qwen2");
  BOOST_TEST(ChatTemplate::recognize("<|start_header_id|> Cutting Knowledge Date {% set date_string = "
                                     "strftime_now(\"%d %b %Y\") %}",
                                     "x")
                 .name == "llama3.2");
  BOOST_CHECK_THROW(ChatTemplate::recognize("[INST] {{ m.content }} [/INST]", "x"), TokenizerFileError);
  // Qwen2.5-Math's default system prompt, its backslash a Jinja escape in both places the template writes it (with
  // tools and without); written otherwise in either, a prompt of the template's own, refused.
  const std::string math_prompt = "Please reason step by step, and put your final answer within \\\\boxed{}.";
  const std::string math =
      "{{- '" + math_prompt + "' }} {{- '<|im_start|>system\\n" + math_prompt + "<|im_end|>\\n' }}";
  const ChatTemplate qwen_math = ChatTemplate::recognize(math, "x");
  BOOST_TEST(qwen_math.name == "qwen2.5-math");
  BOOST_TEST(qwen_math.render(chat(R"([{"role": "user", "content": "U"}])")) ==
             "<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n"
             "<|im_start|>user\nU<|im_end|>\n");
  BOOST_CHECK_THROW(ChatTemplate::recognize("{{- '" + math_prompt +
                                                "' }} {{- '<|im_start|>system\\nPlease reason step "
                                                "by step, and put your final answer within \\boxed{}.<|im_end|>\\n' }}",
                                            "x"),
                    TokenizerFileError);
  // ChatML templates that render otherwise than the built-in ones were taken for plain ChatML (a review found them):
  // a default system prompt of its own (Qwen2.5-Math's was one before it was built in), Hermes 3's BOS.
  BOOST_CHECK_THROW(
      ChatTemplate::recognize("{{bos_token}}{% for m in messages %}{{'<|im_start|>' + m.role}}{% endfor %}", "x"),
      TokenizerFileError);
  BOOST_CHECK_THROW(ChatTemplate::recognize("{{'<|im_start|>' + m.role + '<|im_sep|>' + m.content}}", "x"),  // Phi-4
                    TokenizerFileError);
  // The same default system prompt written with a newline itself in the literal (it passed for plain ChatML), and
  // Qwen2-Instruct's so written still Qwen2's.
  BOOST_CHECK_THROW(
      ChatTemplate::recognize("{{- '<|im_start|>system\nPlease reason step by step.<|im_end|>\n' }}", "x"),
      TokenizerFileError);
  BOOST_TEST(
      ChatTemplate::recognize("{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}", "x").name ==
      "qwen2");
  // Qwen1.5-Chat's, without the full stop.
  const ChatTemplate qwen15 =
      ChatTemplate::recognize("{{ '<|im_start|>system\\nYou are a helpful assistant<|im_end|>\\n' }}", "x");
  BOOST_TEST(qwen15.name == "qwen1.5");
  BOOST_TEST(qwen15.render(chat(R"([{"role": "user", "content": "U"}])")) ==
             "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
  // The conversation's system prompt in the template's own text, after a newline itself: no default of its own.
  BOOST_TEST(ChatTemplate::recognize("{% if messages[0]['role'] == 'system' %}<|im_start|>system\n"
                                     "{{ messages[0]['content'] }}<|im_end|>{% endif %}",
                                     "x")
                 .name == "chatml");
  // A system prompt from the conversation ('<|im_start|>system\n' + content) is no default of the template's.
  BOOST_TEST(ChatTemplate::recognize("{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>' }} "
                                     "<tool_response>",
                                     "x")
                 .tool_format);
  BOOST_CHECK_THROW(ChatTemplate::named("mistral"), UsageError);
}

// Hugging Face ignores tools a template has no format for: rendered Qwen's way they would not be the model's prompt.
BOOST_AUTO_TEST_CASE(a_recognised_template_without_a_tool_format_refuses_tools) {
  const ChatTemplate plain = ChatTemplate::recognize(chatml_source, "x");
  BOOST_TEST(!plain.tool_format);
  const auto hello = chat(R"([{"role": "user", "content": "hi"}])");
  BOOST_TEST(plain.render(hello) == "<|im_start|>user\nhi<|im_end|>\n");
  BOOST_CHECK_THROW(
      plain.render(chat(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function",
      "function": {"name": "f"}}]})")),
      UsageError);
  BOOST_CHECK_THROW(plain.render(chat(R"([{"role": "user", "content": "hi"}, {"role": "tool", "content": "5"}])")),
                    UsageError);
  BOOST_TEST(ChatTemplate::named("chatml").tool_format);  // a template named is rendered as documented, tools too
}

BOOST_AUTO_TEST_CASE(renders_chatml_and_llama3) {
  const auto c = chat(R"([{"role": "system", "content": "S"}, {"role": "user", "content": " U "}])");
  BOOST_TEST(ChatTemplate::named("chatml").render(c, {true, std::nullopt}) ==
             "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n U <|im_end|>\n<|im_start|>assistant\n");
  BOOST_TEST(ChatTemplate::named("qwen3").render(c, {true, false}).find("assistant\n<think>\n\n</think>\n\n") !=
             std::string::npos);
  BOOST_TEST(
      ChatTemplate::named("llama3").render(c, {true, std::nullopt}) ==
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  // Only Qwen3 takes <think> blocks apart; plain ChatML and Qwen2.5 write the content as it is.
  const auto thought =
      chat(R"([{"role": "user", "content": "U"}, {"role": "assistant", "content": "<think>T</think>A"}])");
  BOOST_TEST(ChatTemplate::named("chatml").render(thought).find("assistant\n<think>T</think>A<|im_end|>") !=
             std::string::npos);
  BOOST_TEST(ChatTemplate::named("qwen3").render(thought).find("assistant\n<think>\nT\n</think>\n\nA<|im_end|>") !=
             std::string::npos);
  const auto no_system = chat(R"([{"role": "user", "content": "U"}])");
  BOOST_TEST(ChatTemplate::named("qwen2.5").render(no_system).find("You are Qwen") != std::string::npos);
  BOOST_TEST(ChatTemplate::named("llama3.1").render(no_system).find("Cutting Knowledge Date") != std::string::npos);
  BOOST_TEST(ChatTemplate::named("qwen2").render(no_system) ==
             "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
  BOOST_TEST(ChatTemplate::named("llama3.1").render(no_system).find("Today Date: 26 Jul 2024\n") != std::string::npos);
  char today[32];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  const std::string date(today, std::strftime(today, sizeof today, "%d %b %Y", &local));
  const std::string rendered = ChatTemplate::named("llama3.2").render(no_system);
  BOOST_TEST(rendered.find("Today Date: " + date + "\n") != std::string::npos, rendered);
}

// Qwen3's 2507 models: Instruct-2507 writes answers as given (no <think> handling, no enable_thinking) and Qwen3's
// tools block; Thinking-2507 writes Qwen3's <think> blocks and its prompt opens one.
BOOST_AUTO_TEST_CASE(qwen3_2507_models_write_think_blocks_their_way) {
  const auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  const ChatTemplate qwen3 = ChatTemplate::named("qwen3"), instruct = ChatTemplate::named("qwen3-instruct-2507"),
                     thinking = ChatTemplate::named("qwen3-thinking-2507");
  const auto answered = chat(R"([{"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}])");
  const std::string empty_block = "<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n";
  BOOST_TEST(ends_with(qwen3.render(answered), empty_block));
  BOOST_TEST(ends_with(thinking.render(answered), empty_block));
  BOOST_TEST(ends_with(instruct.render(answered), "<|im_start|>assistant\nA<|im_end|>\n"));
  const auto reasoned = chat(R"([{"role": "user", "content": "U"},
      {"role": "assistant", "content": "<think>\nR\n</think>A"}, {"role": "tool", "content": "5"},
      {"role": "assistant", "content": "B", "reasoning_content": "\nS"}])");
  const std::string tool_turn = "<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n";
  for (const ChatTemplate* t : {&qwen3, &thinking})
    BOOST_TEST(
        ends_with(t->render(reasoned), "<|im_start|>assistant\n<think>\nR\n</think>\n\nA<|im_end|>\n" + tool_turn +
                                           "<|im_start|>assistant\n<think>\nS\n</think>\n\nB<|im_end|>\n"),
        t->name);
  BOOST_TEST(ends_with(instruct.render(reasoned), "<|im_start|>assistant\n<think>\nR\n</think>A<|im_end|>\n" +
                                                      tool_turn + "<|im_start|>assistant\nB<|im_end|>\n"));
  // With tools and no system message, Qwen3's tools block opens the system turn with the tools; Qwen2.5's (and plain
  // ChatML's) write a system prompt, the default, first.
  const auto with_tools = chat(R"({"messages": [{"role": "user", "content": "U"}],
      "tools": [{"type": "function", "function": {"name": "f"}}]})");
  for (const ChatTemplate* t : {&qwen3, &instruct, &thinking})
    BOOST_TEST(t->render(with_tools).rfind("<|im_start|>system\n# Tools\n", 0) == 0, t->name);
  BOOST_TEST(ChatTemplate::named("chatml").render(with_tools).rfind("<|im_start|>system\n\n\n# Tools\n", 0) == 0);
  const auto asked = chat(R"([{"role": "user", "content": "U"}])");
  for (const std::optional<bool> enable : {std::optional<bool>(), std::optional<bool>(false)}) {
    BOOST_TEST(ends_with(instruct.render(asked, {true, enable}), "user\nU<|im_end|>\n<|im_start|>assistant\n"));
    BOOST_TEST(
        ends_with(thinking.render(asked, {true, enable}), "user\nU<|im_end|>\n<|im_start|>assistant\n<think>\n"));
  }
  BOOST_TEST((qwen3.reasons() && thinking.reasons() && !instruct.reasons()));
  BOOST_TEST((ChatTemplate::named("deepseek-r1").reasons() && !ChatTemplate::named("qwen2.5").reasons()));
}

// DeepSeek R1's template (the distilled Qwen and Llama models'), which has no reference here: the last system message
// alone, an answer's reasoning left out (the text after its last </think>, blanks kept), tool results as one block,
// and a generation prompt that opens <think>; no tool definitions, and calls refused (vLLM's objects fail it).
BOOST_AUTO_TEST_CASE(deepseek_r1_leaves_reasoning_out_and_opens_think) {
  const ChatTemplate r1 = ChatTemplate::named("deepseek-r1");
  BOOST_TEST(r1.opens_think);
  BOOST_TEST(!r1.think);
  const auto c = chat(R"([{"role": "system", "content": "S1"}, {"role": "system", "content": "S2"},
      {"role": "user", "content": "U"}, {"role": "assistant", "content": "<think>a</think>b</think>\n\nA"},
      {"role": "tool", "content": "5"}, {"role": "tool", "content": "6"}, {"role": "assistant", "content": "B"},
      {"role": "user", "content": "V"}])");
  BOOST_TEST(r1.render(c, {true, std::nullopt}) ==
             "<｜begin▁of▁sentence｜>S2<｜User｜>U<｜Assistant｜>\n\nA<｜end▁of▁sentence｜><｜tool▁outputs▁begin｜>"
             "<｜tool▁output▁begin｜>5<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>6<｜tool▁output▁end｜>"
             "<｜tool▁outputs▁end｜>B<｜end▁of▁sentence｜><｜User｜>V<｜Assistant｜><think>\n");
  // V3 joins the system messages, keeps the reasoning, and its prompt opens no <think>.
  BOOST_TEST(ChatTemplate::named("deepseek-v3").render(c, {true, std::nullopt}).find("S1\n\nS2<｜User｜>") !=
             std::string::npos);
  BOOST_TEST(ChatTemplate::named("deepseek-v3").render(c, {true, std::nullopt}).find("b</think>\n\nA") !=
             std::string::npos);
  // A prompt that ends in tool results gets no generation prompt: the model goes on after them.
  const auto after_tool = chat(R"([{"role": "user", "content": "U"}, {"role": "tool", "content": "5"}])");
  BOOST_TEST(r1.render(after_tool, {true, std::nullopt}) ==
             "<｜begin▁of▁sentence｜><｜User｜>U<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>5<｜tool▁output▁end｜>"
             "<｜tool▁outputs▁end｜>");
  BOOST_CHECK_THROW(r1.render(chat(R"({"messages": [{"role": "user", "content": "U"}], "tools": [{"type":
      "function", "function": {"name": "f"}}]})")),
                    UsageError);
  // Calls are written only where content is none, which it never is under vLLM: the content is.
  BOOST_TEST(r1.render(chat(R"([{"role": "user", "content": "U"}, {"role": "assistant", "content": "ok",
      "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}])")) ==
             "<｜begin▁of▁sentence｜><｜User｜>U<｜Assistant｜>ok<｜end▁of▁sentence｜>");
  // Recognised by what sets each apart from its kin (marker snippets, not the templates).
  const std::string deepseek = "{{'<｜User｜>'}}{{'<｜Assistant｜>'}}{% if message['content'] is none %}";
  const std::string r1_marks = deepseek +
                               "{% set ns.system_prompt = message['content'] %}{% set c = c.split('</think>')[-1] %}"
                               "{{'\\n<｜tool▁output▁begin｜>'}}{{'<｜Assistant｜><think>\\n'}}";
  BOOST_TEST(ChatTemplate::recognize(r1_marks, "x").name == "deepseek-r1");
  const std::string v3_marks = deepseek + "{% set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] %}";
  BOOST_TEST(ChatTemplate::recognize(v3_marks, "x").name == "deepseek-v3");
  // The full R1's (system messages joined: is_first_sp), V3-0324's (is_last_user), V3.1's thinking switch, an R1 whose
  // prompt opens no <think>: not built in.
  for (const std::string& other :
       {r1_marks + "{% if ns.is_first_sp %}", v3_marks + "{% set ns.is_last_user = true %}",
        deepseek + "{% if thinking %}<think>{% endif %}", deepseek + "{% set c = c.split('</think>')[-1] %}"})
    BOOST_CHECK_THROW(ChatTemplate::recognize(other, "x"), TokenizerFileError);
}

// An assistant turn's reasoning comes back under either name an OpenAI-style server answered it with (vLLM 0.11 gave
// "reasoning" and "reasoning_content", later versions "reasoning" only); where both are given, reasoning_content.
BOOST_AUTO_TEST_CASE(an_answers_reasoning_reads_under_either_name) {
  const auto with = [](const std::string& fields) {
    return ChatTemplate::named("qwen3").render(
        chat(R"([{"role": "user", "content": "U"}, {"role": "assistant", )" + fields + R"(, "content": "A"}])"));
  };
  const std::string expected = "assistant\n<think>\nR\n</think>\n\nA<|im_end|>";
  BOOST_TEST(with(R"("reasoning_content": "R")").find(expected) != std::string::npos);
  BOOST_TEST(with(R"("reasoning": "R")").find(expected) != std::string::npos);
  BOOST_TEST(with(R"("reasoning": "other", "reasoning_content": "R")").find(expected) != std::string::npos);
  BOOST_TEST(with(R"("reasoning_content": "R", "reasoning": "other")").find(expected) != std::string::npos);
}

// The tool definitions in Llama 3.1's user message are `tojson(indent=4)`: Python's json.dumps with an indent (the
// expected text is its output). The reference test's tools hold no numbers, and JavaScript writes 1.0 as 1.
BOOST_AUTO_TEST_CASE(llama3_tools_are_indented_as_python_json_dumps) {
  const std::string tool =
      "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"é ü \u2028 \\\"q\\\" \\\\ \\n\", "
      "\"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\", \"minimum\": -0.0, "
      "\"maximum\": 1e+100, \"multipleOf\": 1e-07, \"default\": 2.5, \"enum\": [1, 1.0, -3]}, \"e\": {}, \"l\": []}, "
      "\"required\": [\"x\"]}}}";
  const std::string indented =
      "{\n"
      "    \"type\": \"function\",\n"
      "    \"function\": {\n"
      "        \"name\": \"f\",\n"
      "        \"description\": \"é ü \u2028 \\\"q\\\" \\\\ \\n\",\n"
      "        \"parameters\": {\n"
      "            \"type\": \"object\",\n"
      "            \"properties\": {\n"
      "                \"x\": {\n"
      "                    \"type\": \"number\",\n"
      "                    \"minimum\": -0.0,\n"
      "                    \"maximum\": 1e+100,\n"
      "                    \"multipleOf\": 1e-07,\n"
      "                    \"default\": 2.5,\n"
      "                    \"enum\": [\n"
      "                        1,\n"
      "                        1.0,\n"
      "                        -3\n"
      "                    ]\n"
      "                },\n"
      "                \"e\": {},\n"
      "                \"l\": []\n"
      "            },\n"
      "            \"required\": [\n"
      "                \"x\"\n"
      "            ]\n"
      "        }\n"
      "    }\n"
      "}";
  const std::string text =
      ChatTemplate::named("llama3.1")
          .render(chat(R"({"messages": [{"role": "user", "content": "U"}], "tools": [)" + tool + "]}"));
  BOOST_TEST(text.find("Do not use variables.\n\n" + indented + "\n\nU<|eot_id|>") != std::string::npos, text);
}

// An empty list of tools is given tools to Llama 3.1's template ("tools is not none": its block, listing none, as
// transformers and vLLM render it); to Qwen's, none ("if tools"); absent, none.
BOOST_AUTO_TEST_CASE(an_empty_list_of_tools_is_rendered_as_each_template_renders_it) {
  const Conversation empty = chat(R"({"messages": [{"role": "user", "content": "U"}], "tools": []})");
  const Conversation absent = chat(R"({"messages": [{"role": "user", "content": "U"}]})");
  const std::string llama = ChatTemplate::named("llama3.1").render(empty);
  BOOST_TEST(llama.find("Environment: ipython\n") != std::string::npos, llama);
  BOOST_TEST(llama.find("Do not use variables.\n\nU<|eot_id|>") != std::string::npos, llama);
  BOOST_TEST(ChatTemplate::named("llama3.1").render(absent).find("ipython") == std::string::npos);
  BOOST_TEST(ChatTemplate::named("qwen2.5").render(empty) == ChatTemplate::named("qwen2.5").render(absent));
}

BOOST_AUTO_TEST_CASE(tool_calls_in_hermes_json) {
  const auto c = chat(R"({"messages": [{"role": "user", "content": "U"},
    {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
      "function": {"name": "f", "arguments": {"b": [1, 2.5], "a": "é"}}}]},
    {"role": "tool", "content": "R"}], "tools": [{"type": "function", "function": {"name": "f"}}]})");
  const std::string text = ChatTemplate::named("qwen3").render(c);
  BOOST_TEST(
      text.find("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"b\": [1, 2.5], \"a\": \"é\"}}\n</tool_call>") !=
      std::string::npos);
  BOOST_TEST(text.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n</tools>") !=
             std::string::npos);
  BOOST_TEST(text.find("<|im_start|>user\n<tool_response>\nR\n</tool_response><|im_end|>") != std::string::npos);
  BOOST_CHECK_THROW(ChatTemplate::named("llama3").render(c), UsageError);  // tool definitions: ChatML, Llama 3.1+
  // Llama 3.1 puts them in the first user message (tests/text/chat_template_reference.mjs compares its text with the
  // real template): with none, its template raises, and so do we.
  BOOST_TEST(ChatTemplate::named("llama3.1").render(c).find("Environment: ipython") != std::string::npos);
  Conversation system_only = c;
  system_only.messages = {{"system", "S", std::nullopt, {}, "", false}};
  BOOST_CHECK_THROW(ChatTemplate::named("llama3.1").render(system_only), UsageError);
  Conversation without_tools = c;
  without_tools.tools.clear();
  without_tools.tools_given = false;
  BOOST_TEST(
      ChatTemplate::named("llama3.1")
          .render(without_tools)
          .find("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"f\", \"parameters\": {\"b\": [1, 2.5], "
                "\"a\": \"é\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"R\"<|eot_id|>") !=
      std::string::npos);
}

// Arguments as text, as OpenAI's clients send them (compact here, as JavaScript's JSON.stringify writes them), are
// parsed and written as tojson writes a value, as vLLM parses them before rendering; text that is no JSON stays as
// given, and text nested deeper than the bound is no stack overflow.
BOOST_AUTO_TEST_CASE(tool_call_arguments_given_as_text_are_rendered_as_vllm_renders_them) {
  const auto with_arguments = [](const std::string& arguments) {
    return chat(R"({"messages": [{"role": "user", "content": "U"},
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
        "function": {"name": "f", "arguments": )" +
                arguments + R"(}}]}, {"role": "tool", "content": "R"}]})");
  };
  const auto c = with_arguments(R"("{\"b\":[1,2.5],\"a\":\"é\"}")");
  BOOST_TEST(ChatTemplate::named("qwen3").render(c).find(
                 "{\"name\": \"f\", \"arguments\": {\"b\": [1, 2.5], \"a\": \"é\"}}") != std::string::npos);
  BOOST_TEST(ChatTemplate::named("llama3.1")
                 .render(c)
                 .find("{\"name\": \"f\", \"parameters\": {\"b\": [1, 2.5], \"a\": \"é\"}}") != std::string::npos);
  // Llama 3.0's template writes an assistant message's content whatever calls it holds (`content | trim`).
  BOOST_TEST(ChatTemplate::named("llama3").render(c).find(
                 "<|start_header_id|>assistant<|end_header_id|>\n\n<|eot_id|>") != std::string::npos);
  // What Python takes for false as vLLM gives it to the template: {}.
  for (const char* none : {"null", R"("")", "[]", "0", "0.0", "false"}) {
    BOOST_TEST(ChatTemplate::named("qwen3").render(with_arguments(none)).find("{\"name\": \"f\", \"arguments\": {}}") !=
                   std::string::npos,
               none);
    BOOST_TEST(
        ChatTemplate::named("llama3.1").render(with_arguments(none)).find("{\"name\": \"f\", \"parameters\": {}}") !=
            std::string::npos,
        none);
  }
  const auto not_json = with_arguments(R"("{city: Paris")");
  BOOST_TEST(ChatTemplate::named("qwen3").render(not_json).find("\"arguments\": {city: Paris}") != std::string::npos);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const auto deep_text = with_arguments(json(deep).dump());
  BOOST_TEST(ChatTemplate::named("qwen3").render(deep_text).find(deep) != std::string::npos);  // as given
}

// Numbers as Python's json.dumps writes them (printed by Python 3.11): doubles from 1e15 to 1e16 in full.
BOOST_AUTO_TEST_CASE(tojson_writes_doubles_as_python_does) {
  BOOST_TEST(as_tojson(R"({"a": 1e15, "b": 1000000000000000.5, "c": -9999999999999998.0, "d": 1e16,)"
                       R"( "e": 123456789012345.6, "f": 0.00001, "g": 2, "h": -0.0, "i": 1.5e150})") ==
             R"({"a": 1000000000000000.0, "b": 1000000000000000.5, "c": -9999999999999998.0, "d": 1e+16,)"
             R"( "e": 123456789012345.6, "f": 1e-05, "g": 2, "h": -0.0, "i": 1.5e+150})");
}

BOOST_AUTO_TEST_CASE(bad_conversations_are_usage_errors) {
  for (const char* bad : {"not json", "{}", R"([{"content": "x"}])", R"([{"role": "robot", "content": "x"}])",
                          R"([{"role": "user", "content": 5}])", R"([{"role": "assistant", "tool_calls": [{}]}])",
                          R"([{"role": "user", "content": [{"type": "image"}]}])",
                          R"([{"role": "user", "content": "x", "n": 1e999}])",  // beyond a double
                          R"([{"role": "user", "content": [{"type": 5, "text": "x"}]}])"})
    BOOST_CHECK_THROW(parse_conversation(bad), UsageError);
  const auto parts =
      chat(R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])");
  BOOST_TEST(parts.messages[0].content == "a\nb");  // joined as vLLM joins a message's text parts
  // Nested 100,000 deep (tools, arguments): one UsageError, not a stack overflow in the rendering's tojson.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  BOOST_CHECK_THROW(parse_conversation(R"({"messages": [], "tools": )" + deep + "}"), UsageError);
  BOOST_CHECK_THROW(as_tojson(deep), UsageError);
}

BOOST_AUTO_TEST_CASE(loaded_from_a_model_directory) {
  TempDir dir;
  const auto write = [&](const json& config) { std::ofstream(dir.file("tokenizer_config.json")) << config.dump(); };
  write({{"chat_template", chatml_source}, {"eos_token", "<|im_end|>"}});
  BOOST_TEST(load_chat_template(dir.path).name == "chatml");
  BOOST_TEST(load_chat_template(dir.path).eos_token == "<|im_end|>");
  BOOST_TEST(load_chat_template(dir.path, "llama3").name == "llama3");
  write({{"chat_template",
          {{{"name", "tool_use"}, {"template", "?"}}, {{"name", "default"}, {"template", "<|start_header_id|>"}}}},
         {"bos_token", {{"content", "<BOS>"}}}});
  BOOST_TEST(load_chat_template(dir.path).bos_token == "<BOS>");
  write({{"eos_token", nullptr}});
  BOOST_CHECK_THROW(load_chat_template(dir.path), TokenizerFileError);  // no template anywhere
  std::ofstream(dir.file("chat_template.jinja")) << chatml_source;
  BOOST_TEST(load_chat_template(dir.path).name == "chatml");
  write({{"chat_template", "{{ messages }}"}});
  BOOST_CHECK_THROW(load_chat_template(dir.path), TokenizerFileError);  // not one it knows
  std::ofstream(dir.file("tokenizer_config.json")) << "{";
  BOOST_CHECK_THROW(load_chat_template(dir.path), TokenizerFileError);
  std::ofstream(dir.file("tokenizer_config.json")) << "{\"model_max_length\": 1e999}";  // beyond a double
  BOOST_CHECK_THROW(load_chat_template(dir.path), TokenizerFileError);
  write({{"chat_template", {{{"name", 1}, {"template", chatml_source}}}}});  // a name that is no string
  BOOST_CHECK_THROW(load_chat_template(dir.path), TokenizerFileError);
}

// Generation also stops at generation_config.json's eos_token_id, else config.json's, as transformers and vLLM do: a
// fine-tune's own end token, which no template names.
BOOST_AUTO_TEST_CASE(the_generation_configs_end_tokens_stop_too) {
  TempDir dir;
  std::ofstream(dir.file("tokenizer_config.json")) << json({{"chat_template", chatml_source}}).dump();
  const auto bytes = make_byte_tokenizer({"<|im_end|>", "<|endoftext|>"});
  BOOST_TEST(load_chat_template(dir.path).stop_ids(*bytes) == (std::vector<TokenId>{256, 257}));
  std::ofstream(dir.file("config.json")) << json({{"eos_token_id", 33}}).dump();
  BOOST_TEST(load_chat_template(dir.path).stop_ids(*bytes) == (std::vector<TokenId>{256, 257, 33}));
  std::ofstream(dir.file("generation_config.json")) << json({{"eos_token_id", {256, 10, 99999}}}).dump();
  // generation_config.json wins; an id beyond the vocabulary is none the model can draw
  BOOST_TEST(load_chat_template(dir.path).stop_ids(*bytes) == (std::vector<TokenId>{256, 257, 10}));
  std::ofstream(dir.file("generation_config.json")) << json({{"eos_token_id", "</s>"}}).dump();
  BOOST_CHECK_THROW(load_chat_template(dir.path), TokenizerFileError);
  std::ofstream(dir.file("generation_config.json")) << "{";
  BOOST_CHECK_THROW(load_chat_template(dir.path), TokenizerFileError);
}

BOOST_AUTO_TEST_CASE(stop_tokens_the_tokenizer_has) {
  const auto bytes = make_byte_tokenizer({"<|im_end|>", "<|endoftext|>", "<|eot_id|>"});
  ChatTemplate chatml = ChatTemplate::named("chatml");
  chatml.eos_token = "<|endoftext|>";
  BOOST_TEST(chatml.stop_ids(*bytes) == (std::vector<TokenId>{256, 257}));
  BOOST_TEST(ChatTemplate::named("llama3").stop_ids(*bytes) == (std::vector<TokenId>{258}));
  const auto c = chat(R"([{"role": "user", "content": "hi"}])");
  const auto ids = encode_chat(chatml, *bytes, c);
  BOOST_TEST(std::count(ids.begin(), ids.end(), 256) == 1);  // <|im_end|> in the text became its id
}

// Gemma 3's template, as its Jinja reads (checked against it in chat_template_reference.mjs): the system message's
// text (its first part's, untrimmed) and a blank line open the first turn; each part of a list trimmed alone; answers
// under "model" without their calls; the roles alternate, a tool turn written where an answer may stand.
BOOST_AUTO_TEST_CASE(gemma3_turns_parts_and_roles) {
  const ChatTemplate gemma = ChatTemplate::named("gemma3");
  const auto c =
      chat(R"([{"role": "system", "content": [{"type": "text", "text": " S "}, {"type": "text", "text": "T"}]},
      {"role": "user", "content": [{"type": "text", "text": " a "}, {"type": "text", "text": "\nb"}]},
      {"role": "assistant", "content": " A\n", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
      {"role": "user", "content": "  U"}])");
  BOOST_TEST(gemma.render(c, {true, std::nullopt}) ==
             "<bos><start_of_turn>user\n S \n\nab<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n"
             "<start_of_turn>user\nU<end_of_turn>\n<start_of_turn>model\n");
  // A tool result's parts joined by newlines first (vLLM joins them), then trimmed.
  BOOST_TEST(gemma.render(chat(R"([{"role": "user", "content": "U"}, {"role": "tool", "content": [{"type": "text",
      "text": "5 "}, {"type": "text", "text": " 6"}]}])")) ==
             "<bos><start_of_turn>user\nU<end_of_turn>\n<start_of_turn>tool\n5 \n 6<end_of_turn>\n");
  for (const char* refused :
       {R"([{"role": "assistant", "content": "A"}])", R"([{"role": "user", "content": "U"}, {"role": "user",
          "content": "V"}])",
        R"([{"role": "system", "content": []}, {"role": "user", "content": "U"}])",
        R"([{"role": "system", "content": null}, {"role": "user", "content": "U"}])",
        R"({"messages": [{"role": "user", "content": "U"}], "tools": [{"type": "function", "function": {"name":
          "f"}}]})"})
    BOOST_CHECK_THROW(gemma.render(chat(refused)), UsageError);
  const auto bytes = make_byte_tokenizer({"<end_of_turn>", "<eos>", "<bos>"});
  BOOST_TEST(gemma.stop_ids(*bytes) == (std::vector<TokenId>{256, 257}));
  // Recognised by how it writes the system message and the parts (marker snippets, not the template); others with
  // <start_of_turn> are not built in.
  const std::string marks =
      "{{ '<start_of_turn>' }}{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}"
      "{{ item['text'] | trim }}{%- set role = \"model\" -%}";
  BOOST_TEST(ChatTemplate::recognize(marks, "x").name == "gemma3");
  for (const std::string& other :
       {std::string("{{ '<start_of_turn>' }}{{ raise_exception('System role not supported') }}"),
        marks + "{% if tools %}"})
    BOOST_CHECK_THROW(ChatTemplate::recognize(other, "x"), TokenizerFileError);
}

// Gemma 2's template (Gemma 1.1's too), as its Jinja reads (checked against it in chat_template_reference.mjs): Gemma
// 3's turns without a system turn, which it refuses, and each content trimmed whole, its parts joined by newlines.
BOOST_AUTO_TEST_CASE(gemma2_turns_without_a_system_role) {
  const ChatTemplate gemma = ChatTemplate::named("gemma2");
  const auto c =
      chat(R"([{"role": "user", "content": [{"type": "text", "text": " a "}, {"type": "text", "text": "b "}]},
      {"role": "assistant", "content": " A\n", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
      {"role": "user", "content": "  U"}])");
  BOOST_TEST(gemma.render(c, {true, std::nullopt}) ==
             "<bos><start_of_turn>user\na \nb<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n"
             "<start_of_turn>user\nU<end_of_turn>\n<start_of_turn>model\n");
  BOOST_TEST(gemma.render(chat(R"([{"role": "user", "content": "U"}, {"role": "tool", "content": " 5 "}])")) ==
             "<bos><start_of_turn>user\nU<end_of_turn>\n<start_of_turn>tool\n5<end_of_turn>\n");
  // null content (an answer that only calls) as "", as vLLM hands it to the template (Python's Jinja would say None)
  BOOST_TEST(gemma.render(chat(R"([{"role": "user", "content": "U"}, {"role": "assistant", "content": null,
      "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}])")) ==
             "<bos><start_of_turn>user\nU<end_of_turn>\n<start_of_turn>model\n<end_of_turn>\n");
  BOOST_CHECK_EXCEPTION(
      gemma.render(chat(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])")), UsageError,
      [](const UsageError& e) { return std::string(e.what()).find("System role not supported") != std::string::npos; });
  for (const char* refused : {R"([{"role": "assistant", "content": "A"}])",
                              R"({"messages": [{"role": "user", "content": "U"}], "tools": [{"type": "function",
                                  "function": {"name": "f"}}]})"})
    BOOST_CHECK_THROW(gemma.render(chat(refused)), UsageError);
  const auto bytes = make_byte_tokenizer({"<end_of_turn>", "<eos>", "<bos>"});
  BOOST_TEST(gemma.stop_ids(*bytes) == (std::vector<TokenId>{256, 257}));
  // Recognised by the system role it refuses, the content trimmed whole and the alternation it checks (marker
  // snippets, not the template); one that writes tools, takes a system message or reads parts is not Gemma 2's.
  const std::string marks =
      "{{ bos_token }}{{ raise_exception('System role not supported') }}{{ raise_exception('Conversation roles must "
      "alternate user/assistant/user/assistant/...') }}{% set role = 'model' %}{{ '<start_of_turn>' + role + '\n' + "
      "message['content'] | trim + '<end_of_turn>\n' }}";
  BOOST_TEST(ChatTemplate::recognize(marks, "x").name == "gemma2");
  for (const std::string& other : {marks + "{% if tools %}", marks + "{% set first_user_prefix = '' %}",
                                   marks + "{% for item in message['content'] %}{{ item['text'] | trim }}"})
    BOOST_CHECK_THROW(ChatTemplate::recognize(other, "x"), TokenizerFileError);
}

// Mistral NeMo's template, as its Jinja reads (checked against it in chat_template_reference.mjs): the system message
// inside the last user turn only where that turn ends the conversation, tools before the last user turn, calls and
// results with 9-character ids, EOS after each assistant turn; the roles it refuses.
BOOST_AUTO_TEST_CASE(mistral_nemo_turns_tools_and_ids) {
  const std::string nemo_markers =
      "{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }} {{- \"[AVAILABLE_TOOLS][\" }} "
      "{{- '[TOOL_RESULTS]{\"content\": ' + content|string + \", \" }}";
  BOOST_TEST(ChatTemplate::recognize(nemo_markers, "x").name == "mistral-nemo");
  for (const std::string& other : {std::string("{{ '[INST] ' + message['content'] + ' [/INST]' }}"),
                                   nemo_markers + " [SYSTEM_PROMPT]"})  // v0.3's spaces; v7's system turn
    BOOST_CHECK_EXCEPTION(ChatTemplate::recognize(other, "x"), TokenizerFileError, [](const TokenizerFileError& e) {
      return std::string(e.what()).find("other than Mistral NeMo") != std::string::npos;
    });
  const ChatTemplate nemo = ChatTemplate::named("mistral-nemo");
  const auto c = chat(R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
      {"role": "assistant", "content": "ignored", "tool_calls": [{"id": "abcdefghi", "type": "function",
        "function": {"name": "f", "arguments": "{\"x\":1}"}}]},
      {"role": "tool", "content": "R \"q\"", "tool_call_id": "abcdefghi"},
      {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "say \"hi\"", "parameters": {"a": 1},
      "return": "x"}}]})");
  BOOST_TEST(nemo.render(c, {true, std::nullopt}) ==
             "<s>[INST]U1[/INST][TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\": 1}, \"id\": \"abcdefghi\"}]</s>"
             "[TOOL_RESULTS]{\"content\": R \"q\", \"call_id\": \"abcdefghi\"}[/TOOL_RESULTS]A1</s>"
             "[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"say "
             "\"hi\"\", \"parameters\": {\"a\": 1}}}][/AVAILABLE_TOOLS][INST]S\n\nU2[/INST]");
  // Ending with the assistant: the system message is written nowhere, as the template has it.
  const auto answered = chat(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                                 {"role": "assistant", "content": "A"}])");
  BOOST_TEST(nemo.render(answered) == "<s>[INST]U[/INST]A</s>");
  BOOST_TEST(nemo.stop_ids(*make_byte_tokenizer({"</s>", "<|im_end|>"})) == (std::vector<TokenId>{256}));
  const auto refused = [&](const std::string& messages, const std::string& why) {
    BOOST_CHECK_EXCEPTION(nemo.render(chat(messages)), UsageError,
                          [&](const UsageError& e) { return std::string(e.what()).find(why) != std::string::npos; });
  };
  refused(R"([{"role": "user", "content": "U"}, {"role": "user", "content": "U"}])", "must alternate");
  refused(R"([{"role": "assistant", "content": "A"}])", "must alternate");
  refused(R"([{"role": "user", "content": "U"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "short",
             "function": {"name": "f", "arguments": {}}}]}])",
          "length 9");
  refused(R"([{"role": "user", "content": "U"}, {"role": "tool", "content": "R"}])", "length 9");
  refused(R"([{"role": "user", "content": "U"}, {"role": "assistant", "content": "A", "tool_calls": []}])",
          "empty list of tool_calls");
  BOOST_TEST(nemo.render(chat(R"([{"role": "user", "content": "U"}, {"role": "assistant", "content": "A",
                                  "tool_calls": null}])")) == "<s>[INST]U[/INST]A</s>");  // null: none given
  refused(R"([{"role": "user", "content": "U"}, {"role": "system", "content": "S"}])",    // in an assistant's place
          "initial optional system message");
}

BOOST_AUTO_TEST_SUITE_END()
