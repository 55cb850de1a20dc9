// libFuzzer target of the checkpoint reader, on the version files of a real run (made by
// tests/ckpt/make_fuzz_seeds.sh) in a copy of that run's checkpoint directory, so that links
// resolve as a run's do. Each input edits one of those versions as a hostile user would, with
// HDF5 itself: datasets' values and lengths, checksums, external links to any name, external
// storage, datasets on the same bytes, a size with no data, bytes of the raw data. The reader
// must end every read in a Checkpoint or one CorruptCheckpoint: never a crash, a hang, a read
// outside the directory or memory beyond the files' bytes. Half the inputs are read as a cold
// restore reads, its tensors straight from the disk (the versions are small: HDF5's first reads
// bring them whole into the page cache, through which a restore reads otherwise).
//
// ARCLIGHT_CKPT_FUZZ_RAW=1 feeds the input bytes as the version file itself instead. HDF5
// 1.10.8's own parser crashes on some such files (a bad free in H5G__link_release_table under
// H5Lvisit, within minutes): that mode is for a newer HDF5, not the ctest.
#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/crc32c.hpp"

using namespace arclight::ckpt;
namespace fs = std::filesystem;

namespace {

struct Setup {
  std::string input;               // <dir>/input.h5: not a version's name, so any step may be in it
  std::vector<std::string> bases;  // the run's version files
  std::vector<std::string> names;  // link targets worth trying: the run's files and hostile ones
  bool raw = false;
};
Setup setup;
fs::path scratch;  // the copy of the run's directory, removed at exit (libFuzzer ends a timed run with exit())

// The input, consumed from the front; zeros once it is used up.
struct Bytes {
  const std::uint8_t* at;
  std::size_t left;
  std::uint8_t byte() { return left > 0 ? (--left, *at++) : 0; }
  std::uint32_t u32() {
    return byte() | std::uint32_t(byte()) << 8 | std::uint32_t(byte()) << 16 | std::uint32_t(byte()) << 24;
  }
  std::string text(std::size_t most) {
    const std::size_t n = std::min<std::size_t>(byte() % (most + 1), left);
    std::string s(reinterpret_cast<const char*>(at), n);
    at += n, left -= n;
    return s;
  }
};

void prepare_directory() {
  const char* context = std::getenv("ARCLIGHT_CKPT_FUZZ_DIR");
  std::string pattern = (fs::temp_directory_path() / "arclight_ckpt_fuzz.XXXXXX").string();
  const fs::path dir = ::mkdtemp(pattern.data());
  scratch = dir;
  std::atexit([] {
    std::error_code ignored;
    fs::remove_all(scratch, ignored);
  });
  if (context != nullptr && fs::is_directory(context)) fs::copy(context, dir, fs::copy_options::recursive);
  setup.input = (dir / "input.h5").string();
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string relative = fs::relative(e.path(), dir).string();
    if (e.path().extension() != ".h5") continue;
    setup.names.push_back(relative);
    if (relative.rfind("v", 0) == 0) setup.bases.push_back(e.path().string());
  }
  std::sort(setup.bases.begin(), setup.bases.end());
  for (const char* hostile :
       {"/etc/passwd", "../outside.h5", "segments/../../x.h5", "segments", "input.h5", "missing.h5"})
    setup.names.push_back(hostile);
  const char* raw = std::getenv("ARCLIGHT_CKPT_FUZZ_RAW");
  setup.raw = raw != nullptr && std::string(raw) == "1";
}

herr_t collect(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(std::string("/") + name);
  return 0;
}

void with_checksum(hid_t set, std::uint32_t crc) {
  hid_t scalar = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(set, "crc32c", H5T_NATIVE_UINT32, scalar, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attr, H5T_NATIVE_UINT32, &crc);
  H5Aclose(attr);
  H5Sclose(scalar);
}

// A new dataset in place of `name`: values from the input, or a length with no data behind it.
void new_dataset(hid_t file, const std::string& name, Bytes& in, hid_t dcpl, hsize_t count, bool write) {
  const hid_t types[] = {H5T_NATIVE_UINT8, H5T_NATIVE_INT64, H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE};
  const hid_t type = types[in.byte() % 4];
  hid_t space = H5Screate_simple(1, &count, nullptr);
  hid_t set = H5Dcreate2(file, name.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (set >= 0) {
    std::string values(write ? count * H5Tget_size(type) : 0, '\0');
    for (char& c : values) c = static_cast<char>(in.byte());
    if (write && count > 0) H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    with_checksum(set, in.byte() % 4 == 0 ? in.u32() : arclight::crc32c(values.data(), values.size()));
    H5Dclose(set);
  }
  H5Sclose(space);
}

// One hostile edit of the dataset `name` (or of the link to it).
void edit(hid_t file, const std::vector<std::string>& sets, Bytes& in) {
  const std::uint8_t op = in.byte() % 7;
  const std::string& name = sets[in.byte() % sets.size()];
  if (op == 5) {  // a checksum attribute rewritten
    hid_t attr = H5Aopen_by_name(file, name.c_str(), "crc32c", H5P_DEFAULT, H5P_DEFAULT);
    const std::uint32_t crc = in.u32();
    if (attr >= 0) H5Awrite(attr, H5T_NATIVE_UINT32, &crc), H5Aclose(attr);
    return;
  }
  if (H5Ldelete(file, name.c_str(), H5P_DEFAULT) < 0 || op == 0) return;  // op 0: gone
  const std::string target = in.byte() % 2 ? setup.names[in.byte() % setup.names.size()] : in.text(40);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (op == 1) new_dataset(file, name, in, H5P_DEFAULT, in.byte() % 64, true);
  if (op == 2)
    H5Lcreate_external(target.c_str(), in.byte() % 2 ? name.c_str() : in.text(30).c_str(), file, name.c_str(),
                       H5P_DEFAULT, H5P_DEFAULT);
  if (op == 3) {  // external raw storage, of any declared size
    const hsize_t count = in.byte() % 2 ? hsize_t(1) << 40 : in.u32() % 4096;
    H5Pset_external(dcpl, target.c_str(), 0, count * 8);
    new_dataset(file, name, in, dcpl, count, false);
  }
  if (op == 4)
    H5Lcreate_hard(file, sets[in.byte() % sets.size()].c_str(), file, name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  if (op == 6) new_dataset(file, name, in, H5P_DEFAULT, hsize_t(1) << (20 + in.byte() % 20), false);  // no data
  H5Pclose(dcpl);
}

// A byte of raw data flipped where HDF5 would not look: inside one dataset's data.
void flip_raw_byte(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& data, Bytes& in) {
  if (data.empty()) return;
  const auto& [offset, size] = data[in.byte() % data.size()];
  const int fd = ::open(setup.input.c_str(), O_RDWR);
  const std::uint8_t value = in.byte();
  if (fd >= 0 && size > 0) (void)!::pwrite(fd, &value, 1, static_cast<off_t>(offset + in.u32() % size));
  if (fd >= 0) ::close(fd);
}

// Where each dataset's own data lies.
std::vector<std::pair<std::uint64_t, std::uint64_t>> data_regions(hid_t file, const std::vector<std::string>& sets) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> data;
  for (const std::string& name : sets) {
    hid_t set = -1;
    H5E_BEGIN_TRY { set = H5Dopen2(file, name.c_str(), H5P_DEFAULT); }
    H5E_END_TRY;
    if (set < 0) continue;
    const haddr_t offset = H5Dget_offset(set);
    if (offset != HADDR_UNDEF) data.emplace_back(offset, H5Dget_storage_size(set));
    H5Dclose(set);
  }
  std::sort(data.begin(), data.end());
  return data;
}

void write_edited_version(Bytes& in) {
  if (setup.bases.empty()) return;
  fs::copy_file(setup.bases[in.byte() % setup.bases.size()], setup.input, fs::copy_options::overwrite_existing);
  hid_t file = H5Fopen(setup.input.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return;
  std::vector<std::string> sets;
  H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect, &sets);
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> before = data_regions(file, sets);
  for (int edits = in.byte() % 6; edits > 0 && !sets.empty(); --edits) edit(file, sets, in);
  // The raw flips go into data that a dataset of the version held before the edits and still holds: a flip in the
  // "data" of a dataset an edit had just made (after a group was deleted) reached HDF5's own records, and HDF 1.10.8's
  // parser then freed a pointer it never set (H5G__link_release_table under H5Lvisit), as with the raw inputs above.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> data;
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> after = data_regions(file, sets);
  std::set_intersection(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(data));
  H5Fclose(file);
  for (int flips = in.byte() % 3; flips > 0; --flips) flip_raw_byte(data, in);
}

void try_read(void (*read)(const std::string&)) {
  try {
    read(setup.input);
  } catch (const CorruptCheckpoint&) {
    // refused, as it should be; any other exception escapes and libFuzzer reports it
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // the edits fail often, quietly
  prepare_directory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (setup.raw) {
    std::ofstream out(setup.input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  } else {
    Bytes in{data, size > 0 ? size - 1 : 0};  // the last byte says how the version is read
    write_edited_version(in);
  }
  set_direct_reads(size > 0 && data[size - 1] % 2 == 1 ? DirectReads::always : DirectReads::automatic);
  try_read([](const std::string& path) { read_checkpoint(path); });
  try_read([](const std::string& path) { read_checkpoint(path, Contents::model); });
  try_read([](const std::string& path) { read_checkpoint(path, Contents::no_tensor_data); });  // rank 0 at a restore
  try_read([](const std::string& path) { linked_files(path); });
  try_read([](const std::string& path) { version_sizes(path); });
  return 0;
}
