// Tool calls read back from a model's answer (Hermes/Qwen form, Llama 3.1's JSON, Mistral's list): a pure function of
// the text.
#include "tool_calls.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <random>

using namespace arclight::serve;

namespace {
const std::string add_call = R"(<tool_call>
{"name": "add", "arguments": {"a": 1}}
</tool_call>)";
}  // namespace

BOOST_AUTO_TEST_SUITE(tool_calls)

BOOST_AUTO_TEST_CASE(calls_after_the_text_are_read_in_order) {
  const auto answer = parse_tool_calls("Let me add.\n" + add_call + "\n" + add_call);
  BOOST_REQUIRE(answer);
  BOOST_TEST(answer->content == "Let me add.");
  // The blanks the text begins with stay in it (a stream has sent them), those before the call do not.
  BOOST_TEST(parse_tool_calls("\n Let me add. \n" + add_call)->content == "\n Let me add.");
  BOOST_TEST(answer->calls.size() == 2u);
  BOOST_TEST(answer->calls[1].name == "add");
  BOOST_TEST(answer->calls[1].arguments == R"({"a": 1})");
  // Text between or after the calls is dropped, as vLLM's Hermes parser drops it: the calls stand.
  const auto chatty = parse_tool_calls("Sum:" + add_call + "\nand\n" + add_call + "\nLet me know.");
  BOOST_REQUIRE(chatty);
  BOOST_TEST(chatty->content == "Sum:");
  BOOST_TEST(chatty->calls.size() == 2u);
  // Unless a call after it is malformed: then all of it is text.
  BOOST_TEST(!parse_tool_calls(add_call + " then <tool_call>{\"name\": add}</tool_call>"));
}

// Each of these was answered as plain text (finish "stop") though the model made a well-formed call.
BOOST_AUTO_TEST_CASE(a_tag_in_the_reasoning_an_argument_or_a_stopped_end_still_reads) {
  const auto thought = parse_tool_calls("<think>\nthe format is <tool_call> then JSON\n</think>\n\n" + add_call);
  BOOST_REQUIRE(thought);
  BOOST_TEST(thought->calls.size() == 1u);
  BOOST_TEST(thought->content == "<think>\nthe format is <tool_call> then JSON\n</think>");
  const auto quoted =
      parse_tool_calls(R"(<tool_call>{"name": "say", "arguments": {"text": "</tool_call>"}}</tool_call>)");
  BOOST_REQUIRE(quoted);
  BOOST_TEST(quoted->calls.at(0).arguments == R"({"text": "</tool_call>"})");
  const auto stopped = parse_tool_calls(add_call + "\n<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n");
  BOOST_REQUIRE(stopped);  // generation stopped at the close tag (a client's stop string)
  BOOST_TEST(stopped->calls.size() == 2u);
}

BOOST_AUTO_TEST_CASE(malformed_calls_are_plain_text) {
  BOOST_TEST(!parse_tool_calls("no call here"));
  BOOST_TEST(!parse_tool_calls(R"(<tool_call>{"name": add}</tool_call>)"));
  BOOST_TEST(!parse_tool_calls(R"(<tool_call>{"arguments": {}}</tool_call>)"));
  BOOST_TEST(!parse_tool_calls(R"(<tool_call>{"name": "add", "arguments": {)"));  // cut short, not whole JSON
  BOOST_TEST(!parse_tool_calls("<think>planning</think> no call"));
  // Inside a <think> never closed, a call is the reasoning's (vLLM gives that block to reasoning_content).
  BOOST_TEST(!parse_tool_calls("<think>maybe " + add_call));
}

// What a stream may show of an answer under way: up to its first tag, less a tail that may begin one.
BOOST_AUTO_TEST_CASE(text_before_tool_calls_stops_at_a_tag_or_what_may_begin_one) {
  BOOST_TEST(text_before_tool_calls("plain text") == 10u);
  BOOST_TEST(text_before_tool_calls("a <") == 2u);
  BOOST_TEST(text_before_tool_calls("a <tool_cal") == 2u);
  BOOST_TEST(text_before_tool_calls("a <b>") == 5u);
  BOOST_TEST(text_before_tool_calls("a " + add_call) == 2u);
  // Reasoning under way shows as it comes, the tag it names too (a Qwen3 model planning a call held the stream to its
  // end); past its end, up to the first tag again.
  BOOST_TEST(text_before_tool_calls("<think><tool_call> maybe") == 24u);
  BOOST_TEST(text_before_tool_calls("<think><tool_call> maybe</think>") == 32u);
  BOOST_TEST(text_before_tool_calls("<think><tool_call></think> x <tool") == 29u);
  BOOST_TEST(text_before_tool_calls("") == 0u);
  BOOST_TEST(tool_calls_start("<think><tool_call></think>x " + add_call) == 28u);
  BOOST_TEST(tool_calls_start("no call") == std::string_view::npos);
}

// A stream asks after every token: the scan that reads only the new text answers as the whole text's function does, for
// every prefix of answers made of tags, parts of tags and text, given in pieces of any length (none, a byte, a whole
// tag: a Qwen model's <tool_call> is one token) and split in two at every byte.
BOOST_AUTO_TEST_CASE(a_streamed_answer_is_scanned_as_the_whole_text_is) {
  const std::vector<std::string> parts = {
      "<think>", "</think>", "<tool_call>", "</tool_call>",     "<tool", "_call>", "</th", "ink>", "<",
      "x",       " ",        "\n",          "{\"name\": \"f\"}"};
  const auto scans_alike = [](const std::string& text, const std::vector<std::size_t>& ends) {
    StreamedToolCalls stream(ToolFormat::hermes);
    for (const std::size_t end : ends) {
      const std::string_view so_far = std::string_view(text).substr(0, end);
      if (stream.text_before(so_far) != text_before_tool_calls(so_far)) return false;
    }
    return true;
  };
  std::mt19937 random(7);
  for (int answer = 0; answer < 2000; ++answer) {
    std::string text;
    for (int i = std::uniform_int_distribution<int>(1, 12)(random); i > 0; --i)
      text += parts[std::uniform_int_distribution<std::size_t>(0, parts.size() - 1)(random)];
    std::vector<std::size_t> pieces{0}, bytes;
    while (pieces.back() < text.size())
      pieces.push_back(
          std::min(text.size(), pieces.back() + std::uniform_int_distribution<std::size_t>(0, 30)(random)));
    for (std::size_t end = 1; end <= text.size(); ++end) bytes.push_back(end);
    BOOST_TEST_REQUIRE(scans_alike(text, pieces), text);
    BOOST_TEST_REQUIRE(scans_alike(text, bytes), text);
    for (std::size_t split = 0; split <= text.size(); ++split)
      BOOST_TEST_REQUIRE(scans_alike(text, {split, text.size()}), text << " split at " << split);
  }
}

// Llama 3.1 answers a call with nothing but its JSON, "parameters" for the arguments, several apart by ";" (vLLM's
// llama3_json parser); anything else is text.
BOOST_AUTO_TEST_CASE(llama3_calls_are_the_whole_answer_in_json) {
  constexpr ToolFormat llama = ToolFormat::llama3_json;
  const auto one = parse_tool_calls(" {\"name\": \"add\", \"parameters\": {\"a\": 1, \"s\": \"}; {\\\"\"}}\n", llama);
  BOOST_REQUIRE(one);
  BOOST_TEST(one->content.empty());
  BOOST_REQUIRE(one->calls.size() == 1u);
  BOOST_TEST(one->calls[0].name == "add");
  BOOST_TEST(one->calls[0].arguments == "{\"a\": 1, \"s\": \"}; {\\\"\"}");
  const auto two = parse_tool_calls(
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"x\": [1]}}", llama);
  BOOST_REQUIRE(two);
  BOOST_REQUIRE(two->calls.size() == 2u);
  BOOST_TEST(two->calls[1].name == "b");
  BOOST_TEST(two->calls[1].arguments == "{\"x\": [1]}");
  BOOST_TEST(!parse_tool_calls("The answer is {\"name\": \"add\", \"parameters\": {}}", llama));  // text first
  BOOST_TEST(!parse_tool_calls("{\"name\": \"add\", \"parameters\": {}} and some text", llama));
  BOOST_TEST(!parse_tool_calls("{\"name\": \"add\", \"parameters\": {", llama));  // cut short
  BOOST_TEST(!parse_tool_calls("{\"parameters\": {}}", llama));                   // no name
  BOOST_TEST(!parse_tool_calls("{\"name\": \"Ada\", \"age\": 36}", llama));  // JSON the user asked for: no arguments
  BOOST_TEST(!parse_tool_calls("   ", llama));
  BOOST_TEST(!parse_tool_calls("<tool_call>{\"name\": \"add\"}</tool_call>", llama));  // another model's form
  BOOST_TEST(tool_calls_start("\n{\"name\": \"a\", \"parameters\": {}}", llama) == 1u);
  BOOST_TEST(tool_calls_start("{\"json\": \"content\"}", llama) == std::string_view::npos);
  // Held while it may be a call: blanks, "{" first, what may begin <|python_tag|>; otherwise all of it is text.
  BOOST_TEST(text_before_tool_calls(" \n", llama) == 0u);
  BOOST_TEST(text_before_tool_calls(" {\"na", llama) == 0u);
  BOOST_TEST(text_before_tool_calls("<|pyth", llama) == 0u);
  BOOST_TEST(text_before_tool_calls("Sure, {x}", llama) == 9u);
}

// Mistral writes [TOOL_CALLS] and a JSON list of calls (vLLM's mistral parser): the text before it is the content,
// other markers are left out, text around the list falls back to the span from the first "[{" to the last "}]";
// anything else is text. Its ids are 9 letters and digits, as vLLM's (its template refuses ids of another length).
BOOST_AUTO_TEST_CASE(mistral_calls_follow_their_marker) {
  constexpr ToolFormat mistral = ToolFormat::mistral;
  const auto two = parse_tool_calls(
      "Checking. [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"s\": \"}]\"}}, "
      "{\"name\": \"b\", \"arguments\": {}}]",
      mistral);
  BOOST_REQUIRE(two);
  BOOST_TEST(two->content == "Checking.");
  BOOST_REQUIRE(two->calls.size() == 2u);
  BOOST_TEST(two->calls[0].name == "a");
  BOOST_TEST(two->calls[0].arguments == "{\"s\": \"}]\"}");
  BOOST_TEST(two->calls[1].arguments == "{}");
  const auto marked_twice = parse_tool_calls("[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}[TOOL_CALLS]]", mistral);
  BOOST_REQUIRE(marked_twice);
  BOOST_TEST(marked_twice->calls.size() == 1u);
  const auto around = parse_tool_calls("[TOOL_CALLS] sure: [{\"name\": \"a\", \"arguments\": {}}] done", mistral);
  BOOST_REQUIRE(around);
  BOOST_TEST(around->calls[0].name == "a");
  BOOST_TEST(!parse_tool_calls("[{\"name\": \"a\", \"arguments\": {}}]", mistral));           // no marker
  BOOST_TEST(!parse_tool_calls("[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {", mistral));  // cut short
  BOOST_TEST(!parse_tool_calls("[TOOL_CALLS][{\"arguments\": {}}]", mistral));                // no name
  BOOST_TEST(!parse_tool_calls("[TOOL_CALLS][]", mistral));
  BOOST_TEST(!parse_tool_calls("[TOOL_CALLS][{\"name\": \"a\", \"parameters\": {}}]", mistral));  // Llama's key
  BOOST_TEST(!parse_tool_calls("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>", mistral));
  BOOST_TEST(tool_calls_start("ok [TOOL_CALLS][", mistral) == 3u);
  BOOST_TEST(text_before_tool_calls("ok [TOOL", mistral) == 3u);  // may begin the marker: held
  BOOST_TEST(text_before_tool_calls("ok [TOOL_CALLS][{", mistral) == 3u);
  BOOST_TEST(text_before_tool_calls("[1] and [2]", mistral) == 11u);
  // Streamed in pieces, the same as the whole text at every step.
  const std::string text = "a [TOOL x [TOOL_CALLS][{\"name\": \"f\"} [TOOL_CALLS]";
  for (std::size_t step = 1; step <= 5; ++step) {
    StreamedToolCalls stream(mistral);
    for (std::size_t end = 0;; end = std::min(text.size(), end + step)) {
      const std::string_view so_far = std::string_view(text).substr(0, end);
      BOOST_TEST_REQUIRE(stream.text_before(so_far) == text_before_tool_calls(so_far, mistral), end);
      if (end == text.size()) break;
    }
  }
  const std::string id = new_tool_call_id(mistral);
  BOOST_TEST(id.size() == 9u);
  BOOST_TEST(std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }));
  BOOST_TEST(new_tool_call_id().rfind("call_", 0) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
