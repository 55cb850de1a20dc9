#include "arclight/core/crc32c.hpp"

#include <algorithm>
#include <cstring>

namespace arclight {
namespace {

constexpr std::uint32_t reflected_polynomial = 0x82F63B78u;

std::uint32_t crc32c_table(std::uint32_t crc, const unsigned char* p, std::size_t size) {
  static const auto table = [] {
    struct T {
      std::uint32_t e[256];
    } t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ reflected_polynomial : c >> 1;
      t.e[i] = c;
    }
    return t;
  }();
  for (std::size_t i = 0; i < size; ++i) crc = table.e[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// a * b modulo the polynomial, both in the checksum's bit-reflected form (bit 31 is x^0).
std::uint32_t multiply_modulo(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (std::uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ reflected_polynomial : b >> 1;
  }
  return product;
}

// x^(8 n) modulo the polynomial: multiplying a checksum by it appends n zero bytes.
std::uint32_t zero_bytes_operator(std::size_t n) {
  std::uint32_t one = 1u << 31;
  const unsigned char zero[64] = {};
  for (; n > 0; n -= std::min(n, sizeof zero)) one = crc32c_table(one, zero, std::min(n, sizeof zero));
  return one;
}

// The instruction takes 3 cycles and can start one a cycle: three independent streams over
// thirds of a block keep it busy, and their checksums are joined by shifting the first two
// past the bytes that follow them (crc(a b) = crc(a) x^(8|b|) + crc(0, b)).
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t crc, const unsigned char* p,
                                                             std::size_t size) {
  constexpr std::size_t stream = 4096;  // bytes of each stream in a block
  static const std::uint32_t past_one = zero_bytes_operator(stream), past_two = zero_bytes_operator(2 * stream);
  const auto word_at = [](const unsigned char* at) {
    std::uint64_t word;
    std::memcpy(&word, at, sizeof word);
    return word;
  };
  std::uint64_t c = crc;
  for (; size >= 3 * stream; size -= 3 * stream, p += 3 * stream) {
    std::uint64_t second = 0, third = 0;
    for (std::size_t i = 0; i < stream; i += 8) {
      c = __builtin_ia32_crc32di(c, word_at(p + i));
      second = __builtin_ia32_crc32di(second, word_at(p + stream + i));
      third = __builtin_ia32_crc32di(third, word_at(p + 2 * stream + i));
    }
    c = multiply_modulo(static_cast<std::uint32_t>(c), past_two) ^
        multiply_modulo(static_cast<std::uint32_t>(second), past_one) ^ static_cast<std::uint32_t>(third);
  }
  for (; size >= 8; size -= 8, p += 8) c = __builtin_ia32_crc32di(c, word_at(p));
  std::uint32_t c32 = static_cast<std::uint32_t>(c);
  for (; size > 0; --size, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return c32;
}
#endif

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  if (hardware) return crc32c_sse42(crc ^ 0xFFFFFFFFu, p, size) ^ 0xFFFFFFFFu;
#endif
  return crc32c_table(crc ^ 0xFFFFFFFFu, p, size) ^ 0xFFFFFFFFu;
}

std::uint32_t crc32c(const void* data, std::size_t size) { return crc32c_extend(0, data, size); }

}  // namespace arclight
