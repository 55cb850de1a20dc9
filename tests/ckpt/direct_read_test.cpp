// A restore reads its tensors straight from the disk (O_DIRECT), past the page cache, and falls
// back to HDF5's reads where a dataset's bytes are not this machine's floats.
#include <fcntl.h>
#include <hdf5.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../temp_dir.hpp"
#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/crc32c.hpp"
#include "same_checkpoint.hpp"

using namespace arclight::ckpt;
namespace fs = std::filesystem;

namespace {

// Two tensors of 3 Mi values each, with their moments (72 MB): each spans several of the direct
// reads' buffers, and neither begins or ends on a block's edge.
Checkpoint large_model() {
  Checkpoint c;
  c.step = 3;
  c.config_toml = "run.steps=10\n";
  c.arclight_version = "test";
  const std::size_t n = (6u << 20) + 7;
  c.tensors = {{"first", n / 2}, {"second", n - n / 2}};
  c.parameters.resize(n);
  c.exp_avg.resize(n);
  c.exp_avg_sq.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    c.parameters[i] = float(i % 100003) * 0.5f;
    c.exp_avg[i] = float(i % 7919) * 0.25f;
    c.exp_avg_sq[i] = float(i);  // exact below 2^24: a run of them is found once in the file
  }
  c.optimizer_steps = {3, 3};
  return c;
}

// The part of a file's pages in the page cache.
double resident_fraction(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BOOST_REQUIRE(fd >= 0);
  const std::size_t size = fs::file_size(path), page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  BOOST_REQUIRE(map != MAP_FAILED);
  std::vector<unsigned char> in((size + page - 1) / page);
  BOOST_REQUIRE(::mincore(map, size, in.data()) == 0);
  ::munmap(map, size);
  std::size_t resident = 0;
  for (unsigned char p : in) resident += p & 1;
  return double(resident) / double(in.size());
}

// Drops a written (clean) file's pages from the page cache; false where the file system keeps them (tmpfs).
bool evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BOOST_REQUIRE(fd >= 0);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return resident_fraction(path) < 0.01;
}

// Bytes this process had the storage fetch (Linux's read_bytes): direct reads count, reads from the page cache do not.
std::uint64_t storage_bytes_read() {
  std::ifstream io("/proc/self/io");
  std::string key;
  std::uint64_t value = 0;
  while (io >> key >> value)
    if (key == "read_bytes:") return value;
  BOOST_FAIL("no read_bytes in /proc/self/io");
  return 0;
}

// Whether this machine's temporary directory lets a file's pages go from the page cache (tmpfs keeps them).
bool page_cache_can_be_emptied() {
  TempDir dir;
  const std::string path = dir.file("probe");
  std::ofstream(path) << std::string(1 << 20, 'x');
  return evict(path);
}

// While one lives, versions are read as it says.
struct ReadsAre {
  DirectReads before = direct_reads_now();
  explicit ReadsAre(DirectReads how) { set_direct_reads(how); }
  ~ReadsAre() { set_direct_reads(before); }
};

// Where direct reads can be shown: a file system that lets pages go from the cache (not tmpfs), whose reads the
// storage counts.
const auto direct_reads_observable = boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
  return page_cache_can_be_emptied();  // false: skipped, and said so
});

// A read of the version fails on the checksum of `dataset`.
void expect_checksum_mismatch(const std::string& path, const std::string& dataset) {
  try {
    read_checkpoint(path);
    BOOST_FAIL("a damaged tensor was read");
  } catch (const CorruptCheckpoint& e) {
    BOOST_TEST(std::string(e.what()).find("checksum mismatch in " + dataset) != std::string::npos, e.what());
  }
}

void flip_byte_at(const std::string& path, std::uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  const char byte = static_cast<char>(f.get());
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(byte ^ 0x01));
}

// Where a run of a tensor's values lies in the file: the offset of their bytes.
std::uint64_t offset_of(const std::string& path, const float* values, std::size_t count) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string needle(reinterpret_cast<const char*>(values), count * sizeof(float));
  const std::size_t at = bytes.find(needle);
  BOOST_REQUIRE(at != std::string::npos);
  BOOST_REQUIRE(bytes.find(needle, at + 1) == std::string::npos);
  return at;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(direct_read)

BOOST_AUTO_TEST_CASE(a_restore_reads_the_tensors_past_the_page_cache_and_checks_them, *direct_reads_observable) {
  TempDir dir;
  const Checkpoint c = large_model();
  const std::string path = write_checkpoint(dir.dir(), 3, c);
  BOOST_REQUIRE(evict(path));
  const std::uint64_t before = storage_bytes_read();
  const Checkpoint back = read_checkpoint(path);
  expect_same(back, c);
  BOOST_TEST(storage_bytes_read() - before >= 3 * c.parameters.size() * sizeof(float));
  BOOST_TEST(back.tensors.size() == 2u);
  // Through the page cache every page of the file would be in it now: only HDF5's metadata is.
  BOOST_TEST(resident_fraction(path) < 0.05);

  // A flipped bit in the second tensor's moments, in its middle buffer: found by the direct read's checksum.
  const std::size_t middle = c.tensors[0].size + (c.tensors[1].size / 2);
  flip_byte_at(path, offset_of(path, c.exp_avg_sq.data() + middle, 64));
  BOOST_REQUIRE(evict(path));
  expect_checksum_mismatch(path, "/optim/exp_avg_sq/second");
}

// Floats stored big-endian (a writer on another machine, or a tool that rewrote the file): their
// bytes are not this machine's values, so the restore reads them through HDF5, which converts them.
BOOST_AUTO_TEST_CASE(floats_stored_otherwise_are_read_through_hdf5_and_converted) {
  TempDir dir;
  Checkpoint c = large_model();
  const std::string path = write_checkpoint(dir.dir(), 3, c);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    BOOST_REQUIRE(file >= 0);
    const char* name = "/model/parameters/second";
    BOOST_REQUIRE(H5Ldelete(file, name, H5P_DEFAULT) >= 0);
    const hsize_t dims[1] = {c.tensors[1].size};
    const hid_t space = H5Screate_simple(1, dims, nullptr), scalar = H5Screate(H5S_SCALAR);
    const hid_t set = H5Dcreate2(file, name, H5T_IEEE_F32BE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    BOOST_REQUIRE(set >= 0);
    const float* values = c.parameters.data() + c.tensors[0].size;
    BOOST_REQUIRE(H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0);
    // The checksum of the values, as arclight's writer computes it.
    const std::uint32_t crc = arclight::crc32c(values, dims[0] * sizeof(float));
    const hid_t attr = H5Acreate2(set, "crc32c", H5T_NATIVE_UINT32, scalar, H5P_DEFAULT, H5P_DEFAULT);
    BOOST_REQUIRE(H5Awrite(attr, H5T_NATIVE_UINT32, &crc) >= 0);
    H5Aclose(attr);
    H5Dclose(set);
    H5Sclose(scalar);
    H5Sclose(space);
    H5Fclose(file);
  }
  expect_same(read_checkpoint(path), c);
}

// A version in the page cache (written or read moments ago: a restart on the same node) is read from it, not from
// the disk again.
BOOST_AUTO_TEST_CASE(a_version_in_the_page_cache_is_read_from_it) {
  TempDir dir;
  const Checkpoint c = large_model();
  const std::string path = write_checkpoint(dir.dir(), 3, c);
  {
    std::ifstream whole(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
  }
  if (resident_fraction(path) < 0.99) {
    BOOST_TEST_MESSAGE("skipped: the page cache does not keep the 72 MB file here (memory pressure?)");
    return;
  }
  const std::uint64_t before = storage_bytes_read();
  expect_same(read_checkpoint(path), c);
  BOOST_TEST(storage_bytes_read() - before < (1u << 20));
}

// checkpoint.direct_reads = "never": through the page cache, cold or not.
BOOST_AUTO_TEST_CASE(never_reads_through_the_page_cache,
                     *boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
                       return page_cache_can_be_emptied();
                     })) {
  TempDir dir;
  const ReadsAre through_the_cache(DirectReads::never);
  const Checkpoint c = large_model();
  const std::string path = write_checkpoint(dir.dir(), 3, c);
  BOOST_REQUIRE(evict(path));
  expect_same(read_checkpoint(path), c);
  BOOST_TEST(resident_fraction(path) > 0.9);
}

// An incremental version links to its parent's unchanged tensors: the direct reads go to both files.
BOOST_AUTO_TEST_CASE(an_incremental_version_is_read_directly_from_its_files, *direct_reads_observable) {
  TempDir dir;
  const ReadsAre directly(DirectReads::always);  // the version is in the page cache, just written
  Checkpoint c = large_model();
  WriteOptions incremental;
  incremental.full_every = 10;
  write_checkpoint(dir.dir(), 3, c, incremental);
  for (std::size_t i = c.tensors[0].size; i < c.parameters.size(); ++i) c.parameters[i] += 1, c.exp_avg[i] += 1;
  c.step = 4;
  c.optimizer_steps = {3, 4};
  const std::string path = write_checkpoint(dir.dir(), 4, c, incremental);
  const std::vector<std::string> linked = linked_files(path);
  BOOST_REQUIRE(std::find(linked.begin(), linked.end(), "v00000003.h5") != linked.end());
  const std::uint64_t before = storage_bytes_read();
  expect_same(read_checkpoint(path), c);
  BOOST_TEST(storage_bytes_read() - before >= 3 * c.parameters.size() * sizeof(float));  // from the disk
}

// A damaged first tensor fails its check while the reads of the rest wait for the helper's buffers: the restore
// ends in that error, and does not hang.
BOOST_AUTO_TEST_CASE(a_damaged_first_tensor_ends_the_direct_reads, *direct_reads_observable) {
  TempDir dir;
  const ReadsAre directly(DirectReads::always);  // the version is in the page cache, just written
  const Checkpoint c = large_model();
  const std::string path = write_checkpoint(dir.dir(), 3, c);
  flip_byte_at(path, offset_of(path, c.exp_avg_sq.data() + 1000, 64));
  expect_checksum_mismatch(path, "/optim/exp_avg_sq/first");
}

BOOST_AUTO_TEST_SUITE_END()
