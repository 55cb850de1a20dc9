// libFuzzer target for the safetensors header parser. Each input is tried twice: as a whole file, and as a header
// under a correct length prefix (its first byte giving the size of a data section of zeros), so that the fuzzer
// reaches the entry and layout checks without first having to guess the length prefix.
// Whatever the parser accepts must hold its promise: every tensor inside the data section, the data covered exactly.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "arclight/model/safetensors.hpp"

using namespace arclight::model;

namespace {

void check(const SafetensorsHeader& header, std::uint64_t file_size) {
  std::uint64_t covered = 0;
  for (const TensorEntry& t : header.tensors) {
    const auto bytes = tensor_bytes(t.dtype, t.shape);
    if (t.begin != covered || t.end < t.begin || !bytes || *bytes != t.end - t.begin) std::abort();
    covered = t.end;
  }
  if (header.data_offset + covered != file_size) std::abort();
}

void try_file(std::string_view bytes) {
  try {
    check(parse_safetensors_header(bytes, bytes.size()), bytes.size());
  } catch (const ModelFileError&) {
    // refused, as it should be; any other exception escapes and libFuzzer reports it
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try_file(input);
  if (size >= 1) {
    const std::string_view header = input.substr(1);
    std::string file;
    for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>(static_cast<std::uint64_t>(header.size()) >> (8 * i)));
    file.append(header);
    file.append(data[0], '\0');
    try_file(file);
  }
  return 0;
}
