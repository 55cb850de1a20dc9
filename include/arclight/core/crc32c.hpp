#pragma once
#include <cstddef>
#include <cstdint>

namespace arclight {

// CRC-32C (Castagnoli), as TFRecord files and checkpoint checksums use: the SSE4.2
// instruction where the processor has it, a table otherwise.
std::uint32_t crc32c(const void* data, std::size_t size);
// The checksum of bytes that follow those whose checksum is `crc`: a checksum computed over
// pieces as they arrive. crc32c_extend(crc32c(a), b) == crc32c(a followed by b).
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);

}  // namespace arclight
