// JSON from outside: its depth bounded before it is parsed, strings' brackets not counted.
#include "arclight/text/json_input.hpp"

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>
#include <string>

using arclight::text::max_json_depth;
using arclight::text::parse_json;
using json = nlohmann::json;

BOOST_AUTO_TEST_SUITE(json_input)

BOOST_AUTO_TEST_CASE(nesting_past_the_bound_is_refused_and_brackets_in_strings_do_not_count) {
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  BOOST_TEST(!parse_json<json>(nested(max_json_depth)).is_discarded());
  BOOST_TEST(parse_json<json>(nested(max_json_depth + 1)).is_discarded());
  BOOST_TEST(parse_json<json>(nested(100000)).is_discarded());
  // A string of brackets, an escaped quote inside it that does not end it, a backslash that ends in an escape.
  const std::string strings = R"({"a": ")" + std::string(1000, '[') + R"(\"[[", "b": "\\", "c": [1]})";
  const json value = parse_json<json>(strings);
  BOOST_REQUIRE(!value.is_discarded());
  BOOST_TEST(value["a"].get<std::string>() == std::string(1000, '[') + "\"[[");
  BOOST_TEST(value["b"] == "\\");
  BOOST_TEST(value["c"][0] == 1);
  BOOST_TEST(parse_json<json>("{\"a\": [1, 2}").is_discarded());
  BOOST_TEST(parse_json<json>("]]]").is_discarded());
  BOOST_TEST(parse_json<json>("").is_discarded());
}

// Many objects side by side parse whole (with a callback, nlohmann's parser looked over the enclosing array at every
// object's end: 160,000 of them took 19 s).
BOOST_AUTO_TEST_CASE(many_objects_side_by_side_parse) {
  std::string many = "{\"messages\": [";
  for (int i = 0; i < 200000; ++i) many += i ? ",{}" : "{}";
  many += "]}";
  const json value = parse_json<json>(many);
  BOOST_REQUIRE(!value.is_discarded());
  BOOST_TEST(value["messages"].size() == 200000u);
}

BOOST_AUTO_TEST_SUITE_END()
