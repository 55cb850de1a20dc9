#include "arclight/core/bytes.hpp"

#include <boost/test/unit_test.hpp>
#include <vector>

using namespace arclight;

BOOST_AUTO_TEST_SUITE(bytes)

BOOST_AUTO_TEST_CASE(scalars_and_strings_round_trip) {
  std::string buf;
  ByteWriter w(buf);
  w.u8(250);
  w.u16(65000);
  w.u32(4000000000u);
  w.u64(1ull << 60);
  w.i64(-5);
  w.f32(1.5f);
  w.f64(-2.25);
  w.boolean(true);
  w.bytes("hello");
  BOOST_TEST(buf.size() == 1u + 2 + 4 + 8 + 8 + 4 + 8 + 1 + 4 + 5);
  ByteReader r(buf);
  BOOST_TEST(r.u8() == 250);
  BOOST_TEST(r.u16() == 65000);
  BOOST_TEST(r.u32() == 4000000000u);
  BOOST_TEST(r.u64() == 1ull << 60);
  BOOST_TEST(r.i64() == -5);
  BOOST_TEST(r.f32() == 1.5f);
  BOOST_TEST(r.f64() == -2.25);
  BOOST_TEST(r.boolean());
  BOOST_TEST(r.bytes() == "hello");
  r.expect_end();
}

BOOST_AUTO_TEST_CASE(reading_past_the_end_throws) {
  std::string buf;
  ByteWriter w(buf);
  w.u32(100);  // claims 100 bytes follow
  w.raw("ab", 2);
  ByteReader r(buf);
  BOOST_CHECK_THROW(r.bytes(), DecodeError);
  ByteReader empty("");
  BOOST_CHECK_THROW(empty.u8(), DecodeError);
  ByteReader bad_bool("\x02");
  BOOST_CHECK_THROW(bad_bool.boolean(), DecodeError);
  ByteReader trailing("ab");
  trailing.u8();
  BOOST_CHECK_THROW(trailing.expect_end(), DecodeError);
}

BOOST_AUTO_TEST_SUITE_END()

#include "arclight/core/crc32c.hpp"

BOOST_AUTO_TEST_SUITE(crc)

BOOST_AUTO_TEST_CASE(crc32c_known_values) {
  // The standard check value of CRC-32C, and lengths that exercise both the 8-byte and byte paths.
  BOOST_TEST(arclight::crc32c("123456789", 9) == 0xE3069283u);
  BOOST_TEST(arclight::crc32c("", 0) == 0u);
  std::string zeros(32, '\0');
  BOOST_TEST(arclight::crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
}

BOOST_AUTO_TEST_CASE(crc32c_extends_over_pieces) {
  // Any split of the bytes, the pieces' checksum extended in turn, gives the whole's.
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>(i * 7 + 3);
  const std::uint32_t whole = arclight::crc32c(text.data(), text.size());
  for (std::size_t cut : {std::size_t(0), std::size_t(1), std::size_t(9), std::size_t(500), text.size()}) {
    const std::uint32_t first = arclight::crc32c(text.data(), cut);
    BOOST_TEST(arclight::crc32c_extend(first, text.data() + cut, text.size() - cut) == whole);
  }
  BOOST_TEST(arclight::crc32c_extend(0, "123456789", 9) == 0xE3069283u);
}

// The definition, a bit at a time: no table, no instruction, no streams joined.
std::uint32_t crc32c_by_bits(const unsigned char* p, std::size_t size) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}

BOOST_AUTO_TEST_CASE(crc32c_agrees_with_the_definition_over_long_buffers) {
  // Lengths around the blocks that the instruction's three streams take (3 x 4096 bytes), at
  // every alignment of the start, whole and extended over two pieces.
  std::vector<unsigned char> bytes(3 * 3 * 4096 + 64);
  std::uint32_t state = 12345;
  for (unsigned char& b : bytes) b = static_cast<unsigned char>((state = state * 1103515245u + 12345u) >> 16);
  for (std::size_t length :
       {std::size_t(12287), std::size_t(12288), std::size_t(12289), std::size_t(24576 + 7), std::size_t(3 * 3 * 4096)})
    for (std::size_t start : {0, 1, 3, 7}) {
      const unsigned char* p = bytes.data() + start;
      const std::uint32_t expected = crc32c_by_bits(p, length);
      BOOST_TEST(arclight::crc32c(p, length) == expected, "length " << length << " from " << start);
      const std::size_t cut = length / 3 + start;
      BOOST_TEST(arclight::crc32c_extend(arclight::crc32c(p, cut), p + cut, length - cut) == expected);
    }
}

BOOST_AUTO_TEST_SUITE_END()
