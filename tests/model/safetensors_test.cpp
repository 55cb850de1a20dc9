// safetensors: written then read back for every dtype; the writer's bytes and the spec's own example checked byte
// by byte; every malformed header, built by hand, refused with ModelFileError naming the file (and the tensor).
#include "arclight/model/safetensors.hpp"
#include "../temp_dir.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

using namespace arclight;
using namespace arclight::model;
namespace fs = std::filesystem;

namespace {

const std::vector<DType> every_dtype = {
    DType::boolean, DType::u8,   DType::i8,  DType::f8_e5m2, DType::f8_e4m3, DType::f8_e8m0, DType::i16, DType::u16,
    DType::f16,     DType::bf16, DType::i32, DType::u32,     DType::f32,     DType::i64,     DType::u64, DType::f64};

std::string le64(std::uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  return out;
}

// A file as the spec lays it out: 8 bytes of little-endian N, N bytes of JSON, the data section.
std::string file_of(std::string_view header, std::string_view data = "") {
  return le64(header.size()) + std::string(header) + std::string(data);
}

std::string entry(std::string_view dtype, std::string_view shape, std::string_view offsets) {
  return "{\"dtype\":\"" + std::string(dtype) + "\",\"shape\":" + std::string(shape) +
         ",\"data_offsets\":" + std::string(offsets) + "}";
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool mentions(const ModelFileError& e, const std::string& fragment) {
  const std::string what = e.what();
  const bool ok = what.find(fragment) != std::string::npos && e.exit_code() == exit_usage;
  if (!ok) BOOST_TEST_MESSAGE("error \"" << what << "\" lacks \"" << fragment << "\"");
  return ok;
}

// `bytes` refused, with `fragment` and the file's name in the message, by the parser and by the mapped file.
void expect_refused(const std::string& bytes, const std::string& fragment) {
  BOOST_TEST_CONTEXT("expecting \"" << fragment << "\"") {
    BOOST_CHECK_EXCEPTION(
        parse_safetensors_header(bytes, bytes.size(), "bad.safetensors"), ModelFileError,
        [&](const ModelFileError& e) { return mentions(e, "bad.safetensors: ") && mentions(e, fragment); });
    TempDir dir;
    write_bytes(dir.file("bad.safetensors"), bytes);
    BOOST_CHECK_EXCEPTION(SafetensorsFile::open(dir.file("bad.safetensors")), ModelFileError,
                          [&](const ModelFileError& e) { return mentions(e, fragment); });
  }
}

// Bytes that differ from tensor to tensor and from dtype to dtype.
std::vector<unsigned char> pattern(std::size_t size, unsigned seed) {
  std::vector<unsigned char> out(size);
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<unsigned char>(seed * 31 + i * 7 + 1);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors)

BOOST_AUTO_TEST_CASE(dtype_names_and_sizes) {
  BOOST_TEST(every_dtype.size() == 16u);
  for (DType d : every_dtype) BOOST_TEST((parse_dtype(dtype_name(d)) == d));
  BOOST_TEST(element_size(DType::bf16) == 2u);
  BOOST_TEST(element_size(DType::f64) == 8u);
  BOOST_TEST(element_size(DType::f8_e4m3) == 1u);
  BOOST_TEST(!parse_dtype("F4").has_value());
  BOOST_TEST(!parse_dtype("f32").has_value());
  BOOST_TEST(tensor_bytes(DType::f32, {}).value() == 4u);  // a scalar
  BOOST_TEST(tensor_bytes(DType::f32, {3, 0}).value() == 0u);
  BOOST_TEST(!tensor_bytes(DType::f32, {-1}).has_value());
  BOOST_TEST(!tensor_bytes(DType::f64, {1ll << 31, 1ll << 31, 1ll << 2}).has_value());
}

BOOST_AUTO_TEST_CASE(every_dtype_a_scalar_and_an_empty_tensor_round_trip) {
  std::vector<std::vector<unsigned char>> data;
  std::vector<TensorToWrite> tensors;
  for (std::size_t i = 0; i < every_dtype.size(); ++i) {
    const DType d = every_dtype[i];
    data.push_back(pattern(2 * 3 * element_size(d), static_cast<unsigned>(i)));
    tensors.push_back({"layer." + std::string(dtype_name(d)), d, {2, 3}, data.back().data(), data.back().size()});
  }
  data.push_back(pattern(4, 99));
  tensors.push_back({"scalar", DType::f32, {}, data.back().data(), 4});
  tensors.push_back({"empty", DType::bf16, {0, 5}, nullptr, 0});
  tensors.push_back({"after_empty", DType::u8, {1}, data.back().data(), 1});

  TempDir dir;
  write_safetensors(dir.file("m.safetensors"), tensors);
  const SafetensorsFile file = SafetensorsFile::open(dir.file("m.safetensors"));
  BOOST_TEST(file.header().data_offset % 8 == 0u);
  BOOST_TEST(file.header().metadata.empty());
  BOOST_REQUIRE_EQUAL(file.header().tensors.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorEntry& read = file.header().tensors[i];  // in the data's order, which is the order written
    BOOST_TEST_CONTEXT(tensors[i].name) {
      BOOST_TEST(read.name == tensors[i].name);
      BOOST_TEST((read.dtype == tensors[i].dtype));
      BOOST_TEST(read.shape == tensors[i].shape);
      BOOST_TEST(file.find(read.name) == &read);
      const std::string_view bytes = file.bytes(read);
      BOOST_TEST(bytes.size() == tensors[i].bytes);
      BOOST_TEST((bytes.empty() || std::memcmp(bytes.data(), tensors[i].data, bytes.size()) == 0));
    }
  }
  BOOST_TEST(file.find("missing") == nullptr);
  BOOST_TEST(file.find("scalar")->shape.empty());
}

// A tensor larger than the writer's piece, made piece by piece as it is written (export's conversion): every piece
// asked once, in order, at offsets that are multiples of the dtype's size, and the bytes land where they belong.
BOOST_AUTO_TEST_CASE(a_filled_tensor_is_written_piece_by_piece) {
  const std::int64_t elements = (std::int64_t{9} << 20) / 2 + 3;  // bf16: past one 8 MiB piece, by an odd amount
  const auto byte_at = [](std::size_t i) { return static_cast<char>((i * 7 + i / 4099) & 0xff); };
  std::vector<std::pair<std::size_t, std::size_t>> asked;
  TensorToWrite big{"big", DType::bf16, {elements}, nullptr, static_cast<std::size_t>(elements) * 2};
  big.fill = [&](std::size_t offset, std::size_t size, void* out) {
    asked.emplace_back(offset, size);
    for (std::size_t i = 0; i < size; ++i) static_cast<char*>(out)[i] = byte_at(offset + i);
  };
  const float after = 2.5f;
  TempDir dir;
  write_safetensors(dir.file("m.safetensors"), {big, {"after", DType::f32, {1}, &after, 4}});
  const std::vector<std::pair<std::size_t, std::size_t>> pieces = {{0, 8u << 20}, {8u << 20, big.bytes - (8u << 20)}};
  BOOST_TEST((asked == pieces));
  const SafetensorsFile file = SafetensorsFile::open(dir.file("m.safetensors"));
  const std::string_view bytes = file.bytes(*file.find("big"));
  BOOST_REQUIRE_EQUAL(bytes.size(), big.bytes);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) wrong += bytes[i] != byte_at(i);
  BOOST_TEST(wrong == 0u);
  BOOST_TEST(std::memcmp(file.bytes(*file.find("after")).data(), &after, 4) == 0);
}

BOOST_AUTO_TEST_CASE(metadata_round_trips) {
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "quotes \" and a\nnewline"}, {"unicode", "\xc3\xbc\xe2\x82\xac"}, {"empty", ""}};
  const float one = 1.0f;
  TempDir dir;
  write_safetensors(dir.file("m.safetensors"), {{"w", DType::f32, {1}, &one, 4}}, metadata);
  BOOST_TEST((SafetensorsFile::open(dir.file("m.safetensors")).header().metadata == metadata));
}

// The writer's bytes, read by the spec rather than by our reader: N little-endian, N a multiple of 8 padded with
// spaces, the JSON, then the tensors' bytes in the order given and contiguous.
BOOST_AUTO_TEST_CASE(written_bytes_follow_the_spec) {
  const std::vector<unsigned char> a = pattern(24, 1), b = pattern(2, 2);
  TempDir dir;
  write_safetensors(dir.file("m.safetensors"),
                    {{"b", DType::f32, {2, 3}, a.data(), 24}, {"a", DType::i16, {1}, b.data(), 2}}, {{"format", "pt"}});
  const std::string bytes = read_bytes(dir.file("m.safetensors"));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(bytes[i]);
  BOOST_TEST(n % 8 == 0u);
  BOOST_REQUIRE(bytes.size() == 8 + n + 26);
  const std::string header = bytes.substr(8, n);
  const std::string json = header.substr(0, header.find_last_not_of(' ') + 1);
  BOOST_TEST(header.size() - json.size() < 8u);
  BOOST_TEST(json ==
             "{\"__metadata__\":{\"format\":\"pt\"},"
             "\"a\":{\"data_offsets\":[24,26],\"dtype\":\"I16\",\"shape\":[1]},"
             "\"b\":{\"data_offsets\":[0,24],\"dtype\":\"F32\",\"shape\":[2,3]}}");
  BOOST_TEST(bytes.substr(8 + n) == std::string(a.begin(), a.end()) + std::string(b.begin(), b.end()));
}

// The format's own example: a 60-byte header ('<') and a 2x2 I32 tensor, byte for byte.
BOOST_AUTO_TEST_CASE(reads_the_specs_example) {
  const std::string header = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";
  BOOST_REQUIRE_EQUAL(header.size(), 60u);
  const std::string data("\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\xff\xff\xff\xff", 16);
  const std::string bytes = std::string("<\0\0\0\0\0\0\0", 8) + header + data;
  TempDir dir;
  write_bytes(dir.file("spec.safetensors"), bytes);
  const SafetensorsFile file = SafetensorsFile::open(dir.file("spec.safetensors"));
  BOOST_TEST(file.header().data_offset == 68u);
  const TensorEntry* test = file.find("test");
  BOOST_REQUIRE(test);
  BOOST_TEST((test->dtype == DType::i32));
  BOOST_TEST(test->shape == (std::vector<std::int64_t>{2, 2}));
  std::int32_t values[4];
  std::memcpy(values, file.bytes(*test).data(), 16);
  BOOST_TEST(values[0] == 1);
  BOOST_TEST(values[2] == 3);
  BOOST_TEST(values[3] == -1);
}

// What the reference accepts and the spec allows: padding, fields it does not know, empty tensors sharing an offset,
// tensors listed out of their data's order, an empty "__metadata__", no tensors at all.
BOOST_AUTO_TEST_CASE(accepts_what_the_format_allows) {
  const std::string bytes =
      file_of("{\"z\":" + entry("U8", "[2]", "[0,2]") + ",\"e2\":" + entry("F32", "[0]", "[2,2]") +
                  ",\"e1\":{\"shape\":[4,0],\"dtype\":\"F16\",\"data_offsets\":[2,2],\"extra\":\"ignored\"}" +
                  ",\"y\":" + entry("U8", "[]", "[2,3]") + ",\"__metadata__\":{}}      ",
              "abc");
  const SafetensorsHeader header = parse_safetensors_header(bytes, bytes.size());
  std::vector<std::string> names;
  for (const TensorEntry& t : header.tensors) names.push_back(t.name);
  BOOST_TEST(names == (std::vector<std::string>{"z", "e1", "e2", "y"}));  // by offsets; empty ones by name
  BOOST_TEST(header.tensors[1].shape == (std::vector<std::int64_t>{4, 0}));

  const std::string nothing = file_of("{}");
  BOOST_TEST(parse_safetensors_header(nothing, nothing.size()).tensors.empty());
  // A prefix is enough when it holds the header: the data section is only measured, never read.
  const std::string one = file_of("{\"t\":" + entry("F64", "[1000]", "[0,8000]") + "}");
  BOOST_TEST(parse_safetensors_header(one, one.size() + 8000).tensors.at(0).end == 8000u);
}

BOOST_AUTO_TEST_CASE(refuses_a_bad_length_prefix) {
  expect_refused("", "only 0 bytes");
  expect_refused(std::string("\x02\0\0\0\0\0\0", 7), "only 7 bytes");
  expect_refused(le64(3) + "{}", "runs past the end of the file (10 bytes)");
  expect_refused(le64(200'000'000) + "{}", "over the limit");
  expect_refused(le64(~0ull) + "{}", "over the limit");
  expect_refused(le64(0), "does not start with '{'");
  const std::string ok = file_of("{}");
  BOOST_CHECK_EXCEPTION(parse_safetensors_header(ok.substr(0, 9), ok.size()), ModelFileError,
                        [](const ModelFileError& e) { return mentions(e, "fewer than the header's 10"); });
}

BOOST_AUTO_TEST_CASE(refuses_a_header_that_is_not_a_json_object) {
  expect_refused(file_of("{\"a\":"), "not JSON");
  expect_refused(file_of("[1,2]"), "does not start with '{'");
  expect_refused(file_of(" {}"), "does not start with '{'");
  expect_refused(file_of("{} x"), "not JSON");
  expect_refused(file_of(std::string_view("{}\0x", 4)), "NUL byte");  // nlohmann alone would stop at the NUL
  expect_refused(file_of(std::string_view("{\"a\0\":1}", 9)), "NUL byte");
  expect_refused(file_of("{/*c*/}"), "not JSON");
  expect_refused(file_of("{\"t\xff\":1}"), "not JSON");  // not UTF-8
  expect_refused(file_of("{\"t\":{\"x\":[[1]]}}"), "nests deeper");
}

// Each entry is refused before the layout is looked at, so no data section is needed.
BOOST_AUTO_TEST_CASE(refuses_a_malformed_tensor_entry) {
  const std::string not_a_string = entry("F32", "[1]", "[0,4]").replace(9, 5, "32");  // "dtype":32
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"3", "tensor 'w': not an object"},
      {R"({"shape":[1],"data_offsets":[0,4]})", "tensor 'w': no \"dtype\""},
      {R"({"dtype":"F32","data_offsets":[0,4]})", "tensor 'w': no \"shape\""},
      {R"({"dtype":"F32","shape":[1]})", "tensor 'w': no \"data_offsets\""},
      {not_a_string, "\"dtype\" is not a string"},
      {entry("F4", "[2]", "[0,1]"), "unknown dtype \"F4\""},
      {entry("float32", "[1]", "[0,4]"), "unknown dtype"},
      {entry("F32", "1", "[0,4]"), "\"shape\" is not an array"},
      {entry("F32", "[\"1\"]", "[0,4]"), "not an integer"},
      {entry("F32", "[1.0]", "[0,4]"), "not an integer"},
      {entry("F32", "[-1]", "[0,4]"), "negative dimension"},
      {entry("F32", "[9223372036854775808]", "[0,4]"), "too large"},
      {entry("F32", "[4294967296,4294967296,1]", "[0,0]"), "overflows"},
      {entry("F32", "[1]", "[0]"), "not [begin, end]"},
      {entry("F32", "[1]", "[0,4,8]"), "not [begin, end]"},
      {entry("F32", "[1]", "{\"a\":0}"), "not [begin, end]"},
      {entry("F32", "[1]", "[-4,0]"), "not [begin, end]"},
      {entry("F32", "[1]", "[0,18446744073709551616]"), "not [begin, end]"},
      {entry("F32", "[1]", "[4,0]"), "end before they begin"},
      {entry("F32", "[2]", "[0,4]"), "hold 4 bytes, but F32 [2] takes 8"},
  };
  for (const auto& [value, fragment] : cases) expect_refused(file_of("{\"w\":" + value + "}", "xxxx"), fragment);
}

BOOST_AUTO_TEST_CASE(refuses_offsets_outside_or_overlapping_or_with_holes) {
  const std::string a4 = "\"a\":" + entry("F32", "[1]", "[0,4]");
  expect_refused(file_of("{" + a4 + "}", "xx"), "tensor 'a': ends at byte 4, beyond the data section's 2 bytes");
  expect_refused(file_of("{\"a\":" + entry("U8", "[1]", "[18446744073709551614,18446744073709551615]") + "}", "x"),
                 "beyond the data section");
  expect_refused(file_of("{" + a4 + ",\"b\":" + entry("F32", "[2]", "[2,10]") + "}", std::string(10, 'x')),
                 "tensor 'b': overlaps tensor 'a'");
  expect_refused(file_of("{" + a4 + ",\"b\":" + entry("F32", "[1]", "[0,4]") + "}", "xxxx"), "overlaps tensor 'a'");
  expect_refused(file_of("{" + a4 + ",\"b\":" + entry("F32", "[1]", "[8,12]") + "}", std::string(12, 'x')),
                 "tensor 'b': leaves a hole of 4 bytes");
  expect_refused(file_of("{\"a\":" + entry("F32", "[1]", "[4,8]") + "}", std::string(8, 'x')), "hole of 4 bytes");
  expect_refused(file_of("{" + a4 + "}", std::string(6, 'x')), "the tensors cover 4 of the data section's 6 bytes");
  expect_refused(file_of("{}", "x"), "cover 0 of the data section's 1 bytes");
}

BOOST_AUTO_TEST_CASE(refuses_bad_metadata) {
  expect_refused(file_of("{\"__metadata__\":[]}"), "\"__metadata__\" is not an object");
  expect_refused(file_of("{\"__metadata__\":{\"k\":1}}"), "value of \"k\" is not a string");
  expect_refused(file_of("{\"__metadata__\":{\"k\":null}}"), "value of \"k\" is not a string");
}

// nlohmann would keep the last of two equal keys; the format forbids them, so they are refused whichever is valid.
BOOST_AUTO_TEST_CASE(refuses_duplicate_keys) {
  const std::string good = entry("F32", "[1]", "[0,4]"), bad = entry("F32", "[1]", "[0,8]");
  expect_refused(file_of("{\"t\":" + good + ",\"t\":" + bad + "}", "xxxx"), "the key \"t\" twice");
  expect_refused(file_of("{\"t\":" + bad + ",\"t\":" + good + "}", "xxxx"), "the key \"t\" twice");
  expect_refused(file_of(R"({"t":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", "xxxx"),
                 "the key \"dtype\" twice");
  expect_refused(file_of(R"({"__metadata__":{"k":"a","k":"b"}})"), "the key \"k\" twice");
}

// Every prefix of a good file is refused; none is read past its end (ASan and the fuzzer say so for the parser).
BOOST_AUTO_TEST_CASE(refuses_every_truncation) {
  const double values[3] = {1, 2, 3};
  TempDir dir;
  write_safetensors(dir.file("m.safetensors"), {{"v", DType::f64, {3}, values, sizeof values}}, {{"k", "v"}});
  const std::string bytes = read_bytes(dir.file("m.safetensors"));
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    BOOST_TEST_CONTEXT("first " << size << " bytes") {
      const std::string cut = bytes.substr(0, size);
      BOOST_CHECK_THROW(parse_safetensors_header(cut, cut.size()), ModelFileError);
      write_bytes(dir.file("cut.safetensors"), cut);
      BOOST_CHECK_THROW(SafetensorsFile::open(dir.file("cut.safetensors")), ModelFileError);
    }
  }
}

BOOST_AUTO_TEST_CASE(bytes_refuses_an_entry_from_elsewhere) {
  const std::uint8_t x = 7;
  TempDir dir;
  write_safetensors(dir.file("m.safetensors"), {{"x", DType::u8, {1}, &x, 1}});
  const SafetensorsFile file = SafetensorsFile::open(dir.file("m.safetensors"));
  TensorEntry stranger = *file.find("x");
  stranger.end = 2;
  BOOST_CHECK_EXCEPTION(file.bytes(stranger), ModelFileError,
                        [](const ModelFileError& e) { return mentions(e, "tensor 'x': not in this file"); });
  SafetensorsFile first = SafetensorsFile::open(dir.file("m.safetensors"));
  SafetensorsFile moved = std::move(first);
  BOOST_TEST(first.find("x") == nullptr);
  BOOST_TEST(moved.bytes(*moved.find("x")) == std::string_view("\x07"));
  moved = SafetensorsFile::open(dir.file("m.safetensors"));
  BOOST_TEST(moved.bytes(*moved.find("x")) == std::string_view("\x07"));
}

BOOST_AUTO_TEST_CASE(a_missing_file_is_refused) {
  BOOST_CHECK_EXCEPTION(SafetensorsFile::open("/nonexistent/m.safetensors"), ModelFileError,
                        [](const ModelFileError& e) { return mentions(e, "/nonexistent/m.safetensors: cannot open"); });
  TempDir dir;
  BOOST_CHECK_EXCEPTION(SafetensorsFile::open(dir.path.string()), ModelFileError,
                        [](const ModelFileError& e) { return mentions(e, "not a regular file"); });
}

// Bad input is refused before anything is written; a good write replaces the file and leaves no temporary behind.
BOOST_AUTO_TEST_CASE(the_writer_checks_first_and_replaces_atomically) {
  const float v[2] = {1, 2};
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const auto refused = [&](const std::vector<TensorToWrite>& tensors, const std::string& fragment) {
    BOOST_CHECK_EXCEPTION(write_safetensors(path, tensors), ModelFileError,
                          [&](const ModelFileError& e) { return mentions(e, fragment); });
    BOOST_TEST(!fs::exists(path));
  };
  refused({{"a", DType::f32, {2}, v, 8}, {"a", DType::f32, {2}, v, 8}}, "tensor 'a': a reserved or repeated name");
  refused({{"__metadata__", DType::f32, {2}, v, 8}}, "a reserved or repeated name");
  refused({{"a", DType::f32, {3}, v, 8}}, "given 8 bytes, but F32 [3] takes 12");
  refused({{"a", DType::f32, {-2}, v, 8}}, "negative dimension or overflows");
  refused({{"a", DType::f32, {2}, nullptr, 8}}, "given 8 bytes");
  refused({{"a\xff", DType::f32, {2}, v, 8}}, "cannot write the header");

  write_safetensors(path, {{"old", DType::f32, {2}, v, 8}});
  write_safetensors(path, {{"new", DType::f32, {1}, v, 4}});
  const SafetensorsFile file = SafetensorsFile::open(path);
  BOOST_TEST(file.header().tensors.size() == 1u);
  BOOST_TEST(file.find("new"));
  BOOST_TEST(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  BOOST_CHECK_THROW(write_safetensors(dir.file("no/such/dir/m.safetensors"), {}), Error);
}

BOOST_AUTO_TEST_SUITE_END()
