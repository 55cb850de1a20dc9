#include "arclight/model/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "arclight/core/files.hpp"
#include "arclight/core/log.hpp"

namespace arclight::model {

// safetensors holds little-endian values, which the loaders take as they lie in the mapped file (torch::from_blob).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors files are read in place: a little-endian host");

namespace {

using json = nlohmann::json;

constexpr std::uint64_t length_bytes = 8;  // the header length prefix
// A header is {name: {"shape": [...], ...}, "__metadata__": {...}}: containers three deep at most.
constexpr int max_json_depth = 3;

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};
// In the enum's order, so that a DType indexes it.
constexpr std::array<DTypeInfo, 16> dtypes{{
    {DType::boolean, "BOOL", 1},
    {DType::u8, "U8", 1},
    {DType::i8, "I8", 1},
    {DType::f8_e5m2, "F8_E5M2", 1},
    {DType::f8_e4m3, "F8_E4M3", 1},
    {DType::f8_e8m0, "F8_E8M0", 1},
    {DType::i16, "I16", 2},
    {DType::u16, "U16", 2},
    {DType::f16, "F16", 2},
    {DType::bf16, "BF16", 2},
    {DType::i32, "I32", 4},
    {DType::u32, "U32", 4},
    {DType::f32, "F32", 4},
    {DType::i64, "I64", 8},
    {DType::u64, "U64", 8},
    {DType::f64, "F64", 8},
}};
constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < dtypes.size(); ++i)
    if (static_cast<std::size_t>(dtypes[i].dtype) != i) return false;
  return true;
}
static_assert(in_enum_order(), "dtypes must list every DType in the enum's order");

const DTypeInfo& info_of(DType dtype) { return dtypes[static_cast<std::size_t>(dtype)]; }

[[noreturn]] void fail(std::string_view file, const std::string& what) {
  throw ModelFileError(log::concat(file, ": ", what));
}
[[noreturn]] void fail(std::string_view file, std::string_view tensor, const std::string& what) {
  fail(file, log::concat("tensor '", tensor, "': ", what));
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// ---- reading: the length prefix, the JSON, each entry, the layout -------------------------------------------------

// N, checked against the file's size (and the bytes given) before a byte of the header is looked at.
std::uint64_t header_length(std::string_view prefix, std::uint64_t file_size, std::string_view file) {
  if (file_size < length_bytes)
    fail(file, log::concat("only ", file_size, " bytes, fewer than the 8 of the header length"));
  if (prefix.size() < length_bytes) fail(file, "fewer than its first 8 bytes given to the header parser");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(prefix[i]);
  if (n > max_header_bytes)
    fail(file, log::concat("header length ", n, " over the limit of ", max_header_bytes, " bytes"));
  if (n > file_size - length_bytes)
    fail(file, log::concat("header length ", n, " runs past the end of the file (", file_size, " bytes)"));
  if (prefix.size() - length_bytes < n)
    fail(file, log::concat("only ", prefix.size(), " bytes given to the header parser, fewer than the header's ",
                           n + length_bytes));
  return n;
}

// A first pass over the header with nlohmann's SAX interface, building nothing. nlohmann's DOM keeps the last of two
// equal keys without a word (RFC 8259 leaves it to the parser) and the format forbids duplicates, so this pass sees
// every key of every object and refuses a second one; it also refuses nesting deeper than a header has, so that a
// crafted header cannot make the second pass build a deep tree. (A parser callback could see the keys too, but
// nlohmann's callback parser rescans the enclosing object at the end of each one: quadratic in the tensors.)
class HeaderShapeCheck : public nlohmann::json_sax<json> {
 public:
  explicit HeaderShapeCheck(std::string_view file) : file_(file) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    enter();
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& key) override {
    if (!keys_.back().insert(key).second)
      fail(file_, log::concat("header has the key \"", key, "\" twice in one object"));
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    enter();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) override {
    fail(file_, log::concat("header is not JSON: ", e.what()));
  }

 private:
  void enter() {
    if (++depth_ > max_json_depth) fail(file_, "header nests deeper than a safetensors header does");
  }
  std::string_view file_;
  int depth_ = 0;
  std::vector<std::set<std::string>> keys_;
};

json parse_json(std::string_view text, std::string_view file) {
  // The header is an object starting at its first byte (the reference implementation's newer versions say so too).
  if (text.empty() || text.front() != '{') fail(file, "header does not start with '{'");
  // JSON has no raw NUL anywhere, and nlohmann takes one for the end of its input: "{}\0anything" would parse as {}.
  if (text.find('\0') != std::string_view::npos) fail(file, "header has a NUL byte");
  HeaderShapeCheck check(file);
  json::sax_parse(text.begin(), text.end(), &check);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // the first pass has seen the same text parse: not expected
    fail(file, log::concat("header is not JSON: ", e.what()));
  }
}

const json& field(const json& entry, const char* key, std::string_view file, std::string_view tensor) {
  auto it = entry.find(key);
  if (it == entry.end()) fail(file, tensor, log::concat("no \"", key, "\""));
  return *it;
}

DType dtype_of(const json& entry, std::string_view file, std::string_view tensor) {
  const json& value = field(entry, "dtype", file, tensor);
  if (!value.is_string()) fail(file, tensor, "\"dtype\" is not a string");
  const auto& name = value.get_ref<const std::string&>();
  auto dtype = parse_dtype(name);
  if (!dtype) fail(file, tensor, log::concat("unknown dtype \"", name, "\""));
  return *dtype;
}

std::vector<std::int64_t> shape_of(const json& entry, std::string_view file, std::string_view tensor) {
  const json& value = field(entry, "shape", file, tensor);
  if (!value.is_array()) fail(file, tensor, "\"shape\" is not an array");
  std::vector<std::int64_t> shape;
  shape.reserve(value.size());  // the array is parsed already: its size is no claim of the header's
  for (const json& dim : value) {
    if (dim.is_number_integer() && !dim.is_number_unsigned()) fail(file, tensor, "a negative dimension in \"shape\"");
    if (!dim.is_number_unsigned()) fail(file, tensor, "a dimension of \"shape\" is not an integer");
    const auto d = dim.get<std::uint64_t>();
    if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail(file, tensor, log::concat("dimension ", d, " is too large"));
    shape.push_back(static_cast<std::int64_t>(d));
  }
  return shape;
}

std::pair<std::uint64_t, std::uint64_t> offsets_of(const json& entry, std::string_view file, std::string_view tensor) {
  const json& value = field(entry, "data_offsets", file, tensor);
  if (!value.is_array() || value.size() != 2 || !value[0].is_number_unsigned() || !value[1].is_number_unsigned())
    fail(file, tensor, "\"data_offsets\" is not [begin, end] of two non-negative integers");
  const auto begin = value[0].get<std::uint64_t>(), end = value[1].get<std::uint64_t>();
  if (begin > end) fail(file, tensor, log::concat("\"data_offsets\" [", begin, ", ", end, "] end before they begin"));
  return {begin, end};
}

TensorEntry entry_of(const std::string& name, const json& value, std::string_view file) {
  if (!value.is_object()) fail(file, name, "not an object of dtype, shape and data_offsets");
  TensorEntry t;
  t.name = name;
  t.dtype = dtype_of(value, file, name);
  t.shape = shape_of(value, file, name);
  std::tie(t.begin, t.end) = offsets_of(value, file, name);
  const auto bytes = tensor_bytes(t.dtype, t.shape);
  if (!bytes) fail(file, name, log::concat("shape ", shape_text(t.shape), " overflows"));
  if (*bytes != t.end - t.begin)
    fail(file, name,
         log::concat("\"data_offsets\" [", t.begin, ", ", t.end, "] hold ", t.end - t.begin, " bytes, but ",
                     dtype_name(t.dtype), " ", shape_text(t.shape), " takes ", *bytes));
  return t;
}

std::map<std::string, std::string> metadata_of(const json& value, std::string_view file) {
  if (!value.is_object()) fail(file, "\"__metadata__\" is not an object");
  std::map<std::string, std::string> metadata;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it->is_string()) fail(file, log::concat("\"__metadata__\" value of \"", it.key(), "\" is not a string"));
    metadata.emplace(it.key(), it->get<std::string>());
  }
  return metadata;
}

// Every tensor inside the data section, then (sorted by offsets) covering it exactly: the format forbids overlap, and
// holes too (bytes no tensor owns would let a file carry a second meaning).
void check_layout(std::vector<TensorEntry>& tensors, std::uint64_t data_size, std::string_view file) {
  for (const TensorEntry& t : tensors)
    if (t.end > data_size)
      fail(file, t.name, log::concat("ends at byte ", t.end, ", beyond the data section's ", data_size, " bytes"));
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  std::uint64_t covered = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& t : tensors) {
    if (t.begin < covered) fail(file, t.name, log::concat("overlaps tensor '", previous->name, "'"));
    if (t.begin > covered) fail(file, t.name, log::concat("leaves a hole of ", t.begin - covered, " bytes before it"));
    covered = t.end;
    previous = &t;
  }
  if (covered != data_size)
    fail(file, log::concat("the tensors cover ", covered, " of the data section's ", data_size, " bytes"));
}

// ---- writing ----------------------------------------------------------------------------------------------------

// The header's JSON, padded with spaces so that the data section starts 8-aligned. Checks every tensor first.
std::string header_text(const std::vector<TensorToWrite>& tensors, const std::map<std::string, std::string>& metadata,
                        const std::string& path) {
  json root = json::object();
  std::uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name == "__metadata__" || root.contains(t.name)) fail(path, t.name, "a reserved or repeated name");
    const auto bytes = tensor_bytes(t.dtype, t.shape);
    if (!bytes)
      fail(path, t.name, log::concat("shape ", shape_text(t.shape), " has a negative dimension or overflows"));
    if (*bytes != t.bytes || (t.bytes > 0 && t.data == nullptr && !t.fill))
      fail(path, t.name,
           log::concat("given ", t.bytes, " bytes, but ", dtype_name(t.dtype), " ", shape_text(t.shape), " takes ",
                       *bytes));
    root[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                    {"shape", t.shape},
                    {"data_offsets", json::array({offset, offset + t.bytes})}};
    offset += t.bytes;
  }
  if (!metadata.empty()) root["__metadata__"] = metadata;
  std::string text;
  try {
    text = root.dump();
  } catch (const json::exception& e) {  // a name or metadata string that is not UTF-8
    fail(path, log::concat("cannot write the header: ", e.what()));
  }
  text.append((length_bytes - text.size() % length_bytes) % length_bytes, ' ');
  return text;
}

struct Descriptor {
  int fd;
  explicit Descriptor(int fd) : fd(fd) {}
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int release() { return std::exchange(fd, -1); }
};

[[noreturn]] void io_failure(const std::string& path, std::string_view what) {
  throw Error(log::concat(path, ": cannot ", what, ": ", std::strerror(errno)));
}

void write_all(int fd, const void* data, std::size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min<std::size_t>(size, 1u << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_failure(path, "write");
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void write_file(const std::string& path, const std::string& header, const std::vector<TensorToWrite>& tensors) {
  Descriptor file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (file.fd < 0) io_failure(path, "create");
  std::array<unsigned char, length_bytes> length{};
  for (std::size_t i = 0; i < length.size(); ++i) length[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  write_all(file.fd, length.data(), length.size(), path);
  write_all(file.fd, header.data(), header.size(), path);
  std::vector<char> piece;
  for (const TensorToWrite& t : tensors) {
    if (t.data) {
      write_all(file.fd, t.data, t.bytes, path);
      continue;
    }
    constexpr std::size_t piece_bytes = std::size_t{8} << 20;  // a multiple of every dtype's size
    piece.resize(std::min(piece_bytes, t.bytes));
    for (std::size_t offset = 0; offset < t.bytes; offset += piece_bytes) {
      const std::size_t size = std::min(piece_bytes, t.bytes - offset);
      t.fill(offset, size, piece.data());
      write_all(file.fd, piece.data(), size, path);
    }
  }
  if (::fsync(file.fd) != 0) io_failure(path, "fsync");
  if (::close(file.release()) != 0) io_failure(path, "close");
}

}  // namespace

// ---- dtypes -------------------------------------------------------------------------------------------------------

std::size_t element_size(DType dtype) { return info_of(dtype).size; }
std::string_view dtype_name(DType dtype) { return info_of(dtype).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeInfo& d : dtypes)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

std::optional<std::uint64_t> tensor_bytes(DType dtype, const std::vector<std::int64_t>& shape) {
  std::uint64_t bytes = element_size(dtype);
  for (std::int64_t dim : shape)
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(dim), &bytes)) return std::nullopt;
  return bytes;
}

// ---- the header ---------------------------------------------------------------------------------------------------

SafetensorsHeader parse_safetensors_header(std::string_view prefix, std::uint64_t file_size, std::string_view file) {
  const std::uint64_t n = header_length(prefix, file_size, file);
  const json root = parse_json(prefix.substr(length_bytes, n), file);
  SafetensorsHeader header;
  header.data_offset = length_bytes + n;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__")
      header.metadata = metadata_of(*it, file);
    else
      header.tensors.push_back(entry_of(it.key(), *it, file));
  }
  check_layout(header.tensors, file_size - header.data_offset, file);
  return header;
}

// ---- the file -----------------------------------------------------------------------------------------------------

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  file.path_ = path;
  Descriptor d(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO would block the open
  if (d.fd < 0) fail(path, log::concat("cannot open: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(d.fd, &st) != 0 || !S_ISREG(st.st_mode)) fail(path, "not a regular file");
  file.size_ = static_cast<std::size_t>(st.st_size);
  if (file.size_ > 0) {  // mmap refuses an empty mapping; the parser refuses the empty file
    void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, d.fd, 0);
    if (p == MAP_FAILED) fail(path, log::concat("cannot map: ", std::strerror(errno)));
    file.mapping_ = static_cast<const char*>(p);
  }
  file.header_ = parse_safetensors_header({file.mapping_, file.size_}, file.size_, path);
  for (std::size_t i = 0; i < file.header_.tensors.size(); ++i) file.index_.emplace(file.header_.tensors[i].name, i);
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    size_ = std::exchange(other.size_, 0);
    header_ = std::exchange(other.header_, {});
    index_ = std::exchange(other.index_, {});
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() {
  if (mapping_) ::munmap(const_cast<char*>(mapping_), size_);
  mapping_ = nullptr;
  size_ = 0;
}

const TensorEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::string_view SafetensorsFile::bytes(const TensorEntry& tensor) const {
  // The entry may come from elsewhere: checked against this file's data section before the view is made.
  const std::uint64_t data_size = size_ >= header_.data_offset ? size_ - header_.data_offset : 0;
  if (mapping_ == nullptr || tensor.begin > tensor.end || tensor.end > data_size)
    fail(path_, tensor.name, "not in this file's data section");
  return {mapping_ + header_.data_offset + tensor.begin, static_cast<std::size_t>(tensor.end - tensor.begin)};
}

void SafetensorsFile::release(std::string_view bytes) {
  if (bytes.empty()) return;
  // Whole pages covering the view (the mapping is read-only and private, never written, so a neighbour's pages in
  // the same page only read back from the file).
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data()) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size();
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// ---- writing ------------------------------------------------------------------------------------------------------

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = header_text(tensors, metadata, path);
  const std::string temporary = log::concat(path, ".tmp.", ::getpid());
  try {
    write_file(temporary, header, tensors);
    if (::rename(temporary.c_str(), path.c_str()) != 0) io_failure(path, "rename the temporary file into place");
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  sync_to_disk(dir.empty() ? "." : dir, true);
}

}  // namespace arclight::model
