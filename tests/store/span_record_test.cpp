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

BOOST_AUTO_TEST_CASE(every_truncation_is_refused) {
  Span span;
  span.name = "x";
  span.attributes = {{"ids", TokenIds{1, 2, 3}}, {"s", std::string("abc")}};
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
