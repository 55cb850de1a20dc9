#include "arclight/core/crc32c.hpp"

#include <cstring>

namespace arclight {
namespace {

std::uint32_t crc32c_table(std::uint32_t crc, const unsigned char* p, std::size_t size) {
  static const auto table = [] {
    struct T {
      std::uint32_t e[256];
    } t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t.e[i] = c;
    }
    return t;
  }();
  for (std::size_t i = 0; i < size; ++i) crc = table.e[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t crc, const unsigned char* p,
                                                             std::size_t size) {
  std::uint64_t c = crc;
  for (; size >= 8; size -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, sizeof word);
    c = __builtin_ia32_crc32di(c, word);
  }
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
