#include <boost/test/unit_test.hpp>

#include <string>

#include "arclight/core/utf8.hpp"

using namespace arclight;

BOOST_AUTO_TEST_SUITE(utf8)

BOOST_AUTO_TEST_CASE(sequences_are_measured_and_malformed_ones_refused) {
  BOOST_TEST(utf8_sequence_length("a", 0) == 1u);
  BOOST_TEST(utf8_sequence_length("\xc3\xa9", 0) == 2u);          // é
  BOOST_TEST(utf8_sequence_length("\xe2\x82\xac", 0) == 3u);      // €
  BOOST_TEST(utf8_sequence_length("\xf0\x9f\x98\x80", 0) == 4u);  // 😀
  BOOST_TEST(utf8_sequence_length("\x80", 0) == 0u);              // a continuation byte alone
  BOOST_TEST(utf8_sequence_length("\xc0\xaf", 0) == 0u);          // an overlong '/'
  BOOST_TEST(utf8_sequence_length("\xe0\x80\xaf", 0) == 0u);      // overlong too
  BOOST_TEST(utf8_sequence_length("\xed\xa0\x80", 0) == 0u);      // a surrogate
  BOOST_TEST(utf8_sequence_length("\xf4\x90\x80\x80", 0) == 0u);  // past U+10FFFF
  BOOST_TEST(utf8_sequence_length("\xe2\x82", 0) == 0u);          // cut short
  BOOST_TEST(valid_utf8("plain, é, €, 😀"));
  BOOST_TEST(!valid_utf8("a\xff"));
  BOOST_TEST(valid_utf8(""));
}

BOOST_AUTO_TEST_CASE(printable_text_keeps_characters_and_marks_controls_and_malformed_bytes) {
  BOOST_TEST(printable("été 😀\ttab") == "été 😀\ttab");
  BOOST_TEST(printable(std::string("a\0b\x1b\x7f", 5)) == "a?b??");
  // C1 controls, encoded (U+009B, a CSI of its own) and as raw bytes (a terminal in 8-bit mode reads 0x9B as CSI)
  BOOST_TEST(printable("\xc2\x9b"
                       "31m\xc2\xa0") == "?31m\xc2\xa0");  // U+00A0 stays
  BOOST_TEST(printable("\x9b"
                       "31m") == "?31m");
  BOOST_TEST(printable("x\xe2\x82y\xff") == "x??y?");  // a sequence cut short: each byte
  // U+2028 and U+2029 (a new line to some viewers), the bidirectional controls (U+202E shows "gpj.exe" as
  // "exe.jpg"), U+061C; their neighbours U+2027, U+202F, U+2065, U+206A and U+061B stay.
  BOOST_TEST(printable("a\u2028b\u2029c") == "a?b?c");
  BOOST_TEST(printable("\u202egpj.exe \u200e\u200f\u202a\u202b\u202c\u202d \u2066\u2067\u2068\u2069 \u061c") ==
             "?gpj.exe ?????? ???? ?");
  BOOST_TEST(printable("\u2027\u202f\u2065\u206a\u061b\u200d") == "\u2027\u202f\u2065\u206a\u061b\u200d");
  const std::string shown = printable("\xc0\xaf\xed\xa0\x80");
  BOOST_TEST(shown == "?????");
  BOOST_TEST(valid_utf8(printable("\xe2\x82\xac\xe2\x82 \x80\xf4\x90\x80\x80")));
}

BOOST_AUTO_TEST_CASE(printable_text_is_cut_between_characters) {
  BOOST_TEST(printable("ab€cd", 4) == "ab");  // the euro's three bytes do not fit after "ab" in 4
  BOOST_TEST(printable("ab€cd", 5) == "ab€");
  BOOST_TEST(printable("abc", 0) == "");
  BOOST_TEST(printable(std::string(5000, 'x'), 1000).size() == 1000u);
}

BOOST_AUTO_TEST_SUITE_END()
