#pragma once
// safetensors, Hugging Face's format for model weights: 8 bytes of little-endian header length N, N bytes of JSON
// giving each tensor's dtype, shape and [begin, end) in the data section that follows, then that data section.
// No LibTorch and no MPI here: the header parser is a plain function that the tests and the fuzzer drive directly,
// and the reader hands out the bytes of a tensor, mapped from the file, for the caller to wrap.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arclight/core/error.hpp"

namespace arclight::model {

// A model file that cannot be used as it is: truncated, malformed, inconsistent. The message names the file and,
// where there is one, the tensor.
class ModelFileError : public UsageError {
 public:
  explicit ModelFileError(const std::string& what) : UsageError(what) {}
};

// The safetensors dtypes whose elements are whole bytes (the sub-byte F4/F6 kinds are refused as unknown).
enum class DType : std::uint8_t {
  boolean,
  u8,
  i8,
  f8_e5m2,
  f8_e4m3,
  f8_e8m0,
  i16,
  u16,
  f16,
  bf16,
  i32,
  u32,
  f32,
  i64,
  u64,
  f64
};

std::size_t element_size(DType dtype);
std::string_view dtype_name(DType dtype);  // as the header spells it: "F32", "BF16", "BOOL", ...
std::optional<DType> parse_dtype(std::string_view name);
// The bytes a tensor of this dtype and shape takes; nullopt for a negative dimension or an overflow.
std::optional<std::uint64_t> tensor_bytes(DType dtype, const std::vector<std::int64_t>& shape);

struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;   // [] for a scalar
  std::uint64_t begin = 0, end = 0;  // [begin, end) in the data section
};

struct SafetensorsHeader {
  std::vector<TensorEntry> tensors;             // in the order of their data (empty ones at one offset: by name)
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::uint64_t data_offset = 0;                // where the data section starts in the file: 8 + N
};

// The reference implementation's bound on N: a header past it is refused before it is parsed.
inline constexpr std::uint64_t max_header_bytes = 100'000'000;

// Parses and checks the header of a file of `file_size` bytes whose first bytes are `prefix` (the whole file, or at
// least its first 8 + N bytes). Checks the length prefix against the file's size before reading the JSON, and every
// tensor's dtype, shape and offsets against each other and the data section, which the tensors must cover exactly:
// no overlap, no hole. Throws ModelFileError, naming `file` and the tensor, at the first problem.
SafetensorsHeader parse_safetensors_header(std::string_view prefix, std::uint64_t file_size,
                                           std::string_view file = "safetensors data");

// A safetensors file mapped read-only; the header is checked when it is opened, before any tensor's bytes are used.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const TensorEntry* find(std::string_view name) const;  // nullptr when the file has no such tensor
  // The tensor's bytes in the mapping, valid while this object lives. Throws ModelFileError for an entry that does
  // not lie in this file's data section.
  std::string_view bytes(const TensorEntry& tensor) const;
  // Drops the pages under `bytes` (a view of some mapping of this class) from the process's resident set: a loader
  // calls it on what it has copied, so the mapping's pages do not stay counted next to the copy. The pages read back
  // from the file if touched again. Advisory: errors are ignored.
  static void release(std::string_view bytes);

 private:
  SafetensorsFile() = default;
  void unmap();

  std::string path_;
  const char* mapping_ = nullptr;
  std::size_t size_ = 0;
  SafetensorsHeader header_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in header_.tensors
};

struct TensorToWrite {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;  // the bytes, or null where `fill` makes them
  std::size_t bytes = 0;       // must be the shape's element count times the dtype's size
  // Writes bytes [offset, offset + size) of the tensor to `out`, a piece of a few MiB at offsets that are multiples of
  // the dtype's size: a tensor converted as it is written, never whole in memory.
  std::function<void(std::size_t offset, std::size_t size, void* out)> fill = nullptr;
};

// Writes `tensors`, in the order given and contiguous, with `metadata` as "__metadata__" (left out when empty). The
// header is padded with spaces to a multiple of 8 bytes so that the data starts 8-aligned. Atomic: written under a
// temporary name, fsynced, then renamed over `path`. Bad input (a duplicate name, bytes that do not match the shape)
// throws ModelFileError before anything is written; an I/O failure throws Error.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace arclight::model
