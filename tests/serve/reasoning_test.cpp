// An answer's reasoning told apart from its content (runner.reasoning_parser qwen3): whole, and as a stream gives it.
#include "reasoning.hpp"

#include <boost/test/unit_test.hpp>

#include <random>
#include <vector>

using namespace arclight::serve;

namespace {

// The split a stream gives for `text` cut at `cuts`: each piece taken in turn, the held tail at the end.
ReasoningSplit streamed(const std::string& text, const std::vector<std::size_t>& cuts) {
  StreamedReasoning stream;
  ReasoningSplit out;
  std::string content;
  std::size_t from = 0;
  for (std::size_t cut : cuts) {
    stream.take(text.substr(from, cut - from), out.reasoning, content);
    from = cut;
  }
  stream.take(text.substr(from), out.reasoning, content);
  out.reasoning += stream.rest();
  if (!content.empty()) out.content = content;
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reasoning)

BOOST_AUTO_TEST_CASE(the_reasoning_ends_at_the_first_close_tag) {
  // Qwen3's answer: <think> first, the blanks around the reasoning kept as vLLM's parser keeps them.
  ReasoningSplit s = split_reasoning("<think>\nAdd them.\n</think>\n\nFour. </think>");
  BOOST_TEST(s.reasoning == "\nAdd them.\n");
  BOOST_REQUIRE(s.content);
  BOOST_TEST(*s.content == "\n\nFour. </think>");
  // Qwen3 2507's thinking models have <think> in the prompt: the answer has only the close.
  s = split_reasoning("Add them.</think>Four.");
  BOOST_TEST(s.reasoning == "Add them.");
  BOOST_TEST(s.content.value_or("?") == "Four.");
  // Nothing after the close: no content (null in the message), an empty reasoning is still one.
  s = split_reasoning("<think></think>");
  BOOST_TEST(s.reasoning == "");
  BOOST_TEST(!s.content);
}

BOOST_AUTO_TEST_CASE(an_answer_cut_short_is_all_reasoning) {
  ReasoningSplit s = split_reasoning("<think>\nFirst, the tens: <tool_call> maybe </thi");
  BOOST_TEST(s.reasoning == "\nFirst, the tens: <tool_call> maybe </thi");
  BOOST_TEST(!s.content);
  BOOST_TEST(split_reasoning("<thi").reasoning == "<thi");  // not the tag after all
  BOOST_TEST(split_reasoning("").reasoning == "");
  // A <think> that does not begin the answer is reasoning's text.
  s = split_reasoning("so <think> again</think>done");
  BOOST_TEST(s.reasoning == "so <think> again");
  BOOST_TEST(s.content.value_or("?") == "done");
}

BOOST_AUTO_TEST_CASE(a_stream_gives_what_the_whole_answer_gives_wherever_it_is_cut) {
  const std::vector<std::string> answers = {"<think>\nAdd them.\n</think>\n\nFour.",
                                            "Add them.</think>Four.",
                                            "<think>\nnever closed </thi",
                                            "<th",
                                            "<think></think>",
                                            "<<think>></think></think>x",
                                            "a</th</think>b",
                                            "\xC3\xA9<think>\xF0\x9F\x98\x80</think>"};
  std::mt19937 random(7);
  for (const std::string& answer : answers) {
    const ReasoningSplit whole = split_reasoning(answer);
    std::vector<std::size_t> every;  // a piece a byte, as a byte-level tokenizer gives them
    for (std::size_t i = 1; i < answer.size(); ++i) every.push_back(i);
    const ReasoningSplit by_byte = streamed(answer, every);
    BOOST_TEST(by_byte.reasoning == whole.reasoning, answer);
    BOOST_TEST((by_byte.content == whole.content), answer);
    for (int round = 0; round < 50; ++round) {
      std::vector<std::size_t> cuts;
      for (std::size_t i = 1; i < answer.size(); ++i)
        if (random() % 3 == 0) cuts.push_back(i);
      const ReasoningSplit s = streamed(answer, cuts);
      BOOST_TEST(s.reasoning == whole.reasoning, answer);
      BOOST_TEST((s.content == whole.content), answer);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_tail_that_may_begin_the_close_is_held_until_it_tells) {
  StreamedReasoning stream;
  std::string reasoning, content;
  stream.take("<th", reasoning, content);  // may be <think>
  BOOST_TEST(reasoning == "");
  stream.take("ink>plan</th", reasoning, content);
  BOOST_TEST(reasoning == "plan");  // "</th" held
  stream.take("ing", reasoning, content);
  BOOST_TEST(reasoning == "plan</thing");  // not the close: given
  stream.take("</think>ok", reasoning, content);
  BOOST_TEST(reasoning == "plan</thing");
  BOOST_TEST(content == "ok");
  stream.take(" </think>", reasoning, content);  // past the close everything is content
  BOOST_TEST(content == "ok </think>");
  BOOST_TEST(stream.rest() == "");
}

BOOST_AUTO_TEST_SUITE_END()
