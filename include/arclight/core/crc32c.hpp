#pragma once
#include <cstddef>
#include <cstdint>

namespace arclight {

// CRC-32C (Castagnoli), as TFRecord files and checkpoint checksums use: the SSE4.2
// instruction where the processor has it, a table otherwise.
std::uint32_t crc32c(const void* data, std::size_t size);

}  // namespace arclight
