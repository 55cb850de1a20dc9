#include "arclight/store/span_record.hpp"

#include <boost/test/unit_test.hpp>

using namespace arclight;
using namespace arclight::store;

BOOST_AUTO_TEST_SUITE(span_record)

BOOST_AUTO_TEST_CASE(round_trips_every_attribute_type) {
  Span span;
  span.trace_id = "0123456789abcdef";
  span.span_id = "s1";
  span.parent_id = "s0";
  span.name = "llm.generate";
  span.status = SpanStatus::error;
  span.start_time = 1.25;
  span.end_time = 2.5;
  span.attributes = {
      {"text", std::string("hello")}, {"n", 3.5},           {"flag", false}, {"ids", TokenIds{7, -1, 1 << 30}},
      {"lp", Floats{-0.25f, 0.f}},    {"empty", TokenIds{}}};
  std::string bytes;
  ByteWriter out(bytes);
  encode_span_body(out, span);
  Span back;
  ByteReader in(bytes);
  decode_span_body(in, back);
  in.expect_end();
  BOOST_TEST(back.trace_id == span.trace_id);
  BOOST_TEST(back.parent_id == "s0");
  BOOST_TEST(back.name == span.name);
  BOOST_TEST((back.status == SpanStatus::error));
  BOOST_TEST(back.end_time == 2.5);
  BOOST_TEST((back.attributes == span.attributes));
  BOOST_TEST(std::get<TokenIds>(*back.find("ids")).at(2) == 1 << 30);
}

BOOST_AUTO_TEST_CASE(an_extra_json_round_trips_and_a_span_without_one_is_encoded_as_before_it_existed) {
  Span span;
  span.name = "tool";
  span.status = SpanStatus::error;
  span.attributes = {{"n", 3.0}};
  std::string plain;
  ByteWriter plain_out(plain);
  encode_span_body(plain_out, span);
  // trace, span and parent ids and name (uint32 lengths and bytes), then the status byte: the status alone
  BOOST_TEST(int(std::uint8_t(plain.at(4 * 4 + 4))) == int(SpanStatus::error));

  span.extra_json = R"({"events":[]})";
  std::string bytes;
  ByteWriter out(bytes);
  encode_span_body(out, span);
  BOOST_TEST(bytes.size() == plain.size() + 4 + span.extra_json.size());
  ByteReader taken(bytes);
  BOOST_TEST(take_span_body(taken).size() == bytes.size());
  Span back;
  ByteReader in(bytes);
  decode_span_body(in, back);
  in.expect_end();
  BOOST_TEST(back.extra_json == span.extra_json);
  BOOST_TEST((back.status == SpanStatus::error));
  BOOST_TEST((back.attributes == span.attributes));
  // decoding into a span that held one clears it
  ByteReader again(plain);
  decode_span_body(again, back);
  BOOST_TEST(back.extra_json.empty());
}

BOOST_AUTO_TEST_CASE(a_flagged_extra_json_that_is_empty_is_refused) {
  Span span;
  span.name = "x";
  span.extra_json = "{}";
  std::string bytes;
  ByteWriter out(bytes);
  encode_span_body(out, span);
  bytes.resize(bytes.size() - 6);  // the extra JSON's length and bytes
  bytes.append(4, '\0');           // an empty string where it was
  Span back;
  ByteReader in(bytes);
  BOOST_CHECK_THROW(decode_span_body(in, back), DecodeError);
  ByteReader taken(bytes);
  BOOST_CHECK_THROW(take_span_body(taken), DecodeError);
}

BOOST_AUTO_TEST_CASE(every_truncation_is_refused) {
  Span span;
  span.name = "x";
  span.attributes = {{"ids", TokenIds{1, 2, 3}}, {"s", std::string("abc")}};
  span.extra_json = R"({"links":[]})";
  std::string bytes;
  ByteWriter out(bytes);
  encode_span_body(out, span);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    Span back;
    ByteReader in(std::string_view(bytes).substr(0, cut));
    BOOST_CHECK_THROW(decode_span_body(in, back), DecodeError);
  }
}

BOOST_AUTO_TEST_CASE(a_huge_count_is_refused_before_allocating) {
  std::string bytes;
  ByteWriter out(bytes);
  for (int i = 0; i < 4; ++i) out.bytes("");
  out.u8(0);
  out.f64(0);
  out.f64(0);
  out.u32(0xFFFFFFFF);  // attribute count
  Span back;
  ByteReader in(bytes);
  BOOST_CHECK_THROW(decode_span_body(in, back), DecodeError);
}

BOOST_AUTO_TEST_SUITE_END()
