// Tool calls read back from a model's answer (Hermes/Qwen form): a pure function of the text.
#include "tool_calls.hpp"

#include <boost/test/unit_test.hpp>

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
  BOOST_TEST(answer->calls.size() == 2u);
  BOOST_TEST(answer->calls[1].name == "add");
  BOOST_TEST(answer->calls[1].arguments == R"({"a": 1})");
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

BOOST_AUTO_TEST_CASE(malformed_calls_or_text_between_them_are_plain_text) {
  BOOST_TEST(!parse_tool_calls("no call here"));
  BOOST_TEST(!parse_tool_calls(R"(<tool_call>{"name": add}</tool_call>)"));
  BOOST_TEST(!parse_tool_calls(R"(<tool_call>{"arguments": {}}</tool_call>)"));
  BOOST_TEST(!parse_tool_calls(R"(<tool_call>{"name": "add", "arguments": {)"));  // cut short, not whole JSON
  BOOST_TEST(!parse_tool_calls(add_call + " and then some text"));
  BOOST_TEST(!parse_tool_calls("<think>planning</think> no call"));
}

// What a stream may show of an answer under way: up to its first tag, less a tail that may begin one.
BOOST_AUTO_TEST_CASE(text_before_tool_calls_stops_at_a_tag_or_what_may_begin_one) {
  BOOST_TEST(text_before_tool_calls("plain text") == 10u);
  BOOST_TEST(text_before_tool_calls("a <") == 2u);
  BOOST_TEST(text_before_tool_calls("a <tool_cal") == 2u);
  BOOST_TEST(text_before_tool_calls("a <b>") == 5u);
  BOOST_TEST(text_before_tool_calls("a " + add_call) == 2u);
  BOOST_TEST(text_before_tool_calls("<think><tool_call> maybe</think>") == 7u);  // not yet known to be no call
  BOOST_TEST(text_before_tool_calls("") == 0u);
  BOOST_TEST(tool_calls_start("<think><tool_call></think>x " + add_call) == 28u);
  BOOST_TEST(tool_calls_start("no call") == std::string_view::npos);
}

BOOST_AUTO_TEST_SUITE_END()
