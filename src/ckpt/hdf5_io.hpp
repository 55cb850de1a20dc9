#pragma once
// The mechanism of checkpoints, private to src/ckpt: HDF5 handles, datasets read and written
// with their checksums, the links of a version file, and fsync.
#include <hdf5.h>

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <mutex>
#include <set>
#include <string>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/utf8.hpp"

namespace arclight::ckpt {

// Closes an HDF5 handle when it goes out of scope.
struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  Handle(hid_t i, herr_t (*c)(hid_t), const std::string& what) : id(i), close(c) {
    if (id < 0) throw CorruptCheckpoint(what);
  }
  ~Handle() {
    if (id >= 0) close(id);
  }
  // Closes it now, for the result: closing a dataset or file writes what HDF5 still buffers.
  herr_t close_now() {
    const hid_t i = id;
    id = -1;
    return close(i);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

// While one lives, HDF5 does not print its error stack (dozens of lines) on a failed call: the
// writer reports each failure itself, in one message naming the file and the OS's error.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors() {
    H5Eget_auto2(H5E_DEFAULT, &print_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, print_, data_); }
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

 private:
  H5E_auto2_t print_ = nullptr;
  void* data_ = nullptr;
};

// This HDF5 is not built thread-safe: every entry point that may run beside another (rank
// 0's background write and retention, a query that reads spans back) holds this.
std::recursive_mutex& hdf5_mutex();

// Removes a leftover temporary file (or a link planted in its place: the link, never what
// it points to) so that the next write can create it with O_EXCL.
void remove_stale(const std::string& path);
// A real folder (created when missing): a symlink in its place would take writes anywhere.
void require_real_folder(const std::string& path);

// The element types a checkpoint's datasets have.
enum class Kind : std::uint8_t { u8, i64, f32, f64 };
hid_t h5type(Kind k);
std::size_t kind_size(Kind k);

// Why an external link's target names no file inside the checkpoint directory (an absolute
// path, or one that climbs out with ".."); empty when it names one.
std::string link_name_problem(const std::string& target);
// The same, and why `target` in `dir` is no regular file of its own (missing, a symlink,
// a FIFO, a device, or reached through a symlinked folder); empty when it is one. `missing_errno`, where given, gets
// lstat's errno when a step of the way does not stat (ENOENT gone; EACCES, EIO there but not readable now).
std::string link_target_problem(const std::string& dir, const std::string& target, int* missing_errno = nullptr);

// The access lists every read of a version uses: external links resolve in `dir`, wherever
// the process runs, and only to files link_target_problem accepts (a checkpoint directory
// is input: it must not make arclight read anything outside it). Not copyable: HDF5 holds
// a pointer to it.
class LinkPolicy {
 public:
  explicit LinkPolicy(const std::string& dir);
  LinkPolicy(const LinkPolicy&) = delete;
  LinkPolicy& operator=(const LinkPolicy&) = delete;
  hid_t datasets() const { return dapl_.id; }  // for H5Dopen2, H5Lexists
  hid_t groups() const { return gapl_.id; }    // for H5Gopen2
  const std::string& dir() const { return dir_; }
  // Why the last link was turned down; empty when none was.
  std::string refused;

 private:
  std::string dir_;
  Handle dapl_, gapl_;
};

// The file, read-only; -1 when it does not open. CorruptCheckpoint when it is no regular
// file (checked without blocking: a FIFO must not hang the read).
hid_t open_file(const std::string& path);

std::uint32_t read_crc(hid_t set, const std::string& what);

// A dataset's bytes, as two checksums: CRC-32C, which every read verifies, and XXH3-64, which with it
// decides that a dataset did not change since the parent version and links to the parent's copy.
// CRC-32C alone would pass a changed dataset as unchanged once in 2^32 comparisons, and a long run
// makes millions: a restore would read stale values whose checksums match.
struct Checksums {
  std::uint32_t crc32c = 0;
  std::uint64_t xxh3 = 0;
};
Checksums checksums_of(const void* data, std::size_t bytes);
// A 1-D dataset's length.
std::uint64_t extent(hid_t set, const std::string& what);
// Where a dataset's data lies: the file (device and inode) and the byte range in it.
struct StoredBytes {
  dev_t device = 0;
  ino_t inode = 0;
  std::uint64_t begin = 0, end = 0;
};
// A dataset's length, when the file holds that many elements of `size` bytes as arclight
// writes them (contiguous, in the file itself: no external storage, no virtual dataset): a
// forged length is caught before anything is allocated for it. Where the bytes lie goes to
// `where` (untouched for an empty dataset).
std::uint64_t stored_extent(hid_t set, std::size_t size, const std::string& what, StoredBytes* where = nullptr);

// The descriptor of the file that holds a dataset, or -1 (the file stays open while the dataset is).
int descriptor_of(hid_t set);

// Asks the kernel to start reading a dataset's bytes now (readahead), so that the disk works
// while the reading thread is busy elsewhere. A hint: a failure is ignored.
void advise_will_read(hid_t set, const StoredBytes& where);

// The byte ranges a read has taken, by file: a forged version may point several datasets
// at the same bytes (links, or overlapping offsets) to make a read allocate more than the
// files hold; each byte is read once.
class ByteRanges {
 public:
  // False when `bytes` overlaps a range taken before; otherwise takes it.
  bool take(const StoredBytes& bytes);

 private:
  std::map<std::pair<dev_t, ino_t>, std::map<std::uint64_t, std::uint64_t>> taken_;  // begin -> end
};

Kind kind_of(hid_t set);
// Whether a dataset's values are stored as this machine's floats: its bytes are the values, to be read as they lie.
bool holds_native_floats(hid_t set);
// One number of a version's meta group (its chain length, its step), or -1 when it does not read.
std::int64_t meta_number(hid_t file, const LinkPolicy& links, const char* name);
// The file an external link `name` points to (and the object in it, into `object`); empty
// when it is no external link. Throws CorruptCheckpoint when the link does not read.
std::string external_link_file(hid_t loc, const std::string& name, hid_t lapl, std::string* object = nullptr);

// Text from a file (a name, a link, a lock's holder), fit for a message and a terminal: its first 1,000 bytes,
// arclight::printable.
inline std::string printable(const std::string& text) { return arclight::printable(text, 1000); }

// Where a dataset's data lives and what it holds: for the parent's datasets, so that an
// unchanged one becomes a link to the file that holds it.
struct Held {
  std::string file, object;
  Kind kind = Kind::u8;
  std::uint64_t count = 0;
  std::uint32_t crc = 0;
  std::optional<std::uint64_t> xxh3;  // none in versions written before it was kept: never linked to
  // Whether `sums` are the checksums of the bytes held here.
  bool holds(const Checksums& sums) const { return xxh3 && *xxh3 == sums.xxh3 && crc == sums.crc32c; }
};

// Every dataset of a version file, by path, into `held` (where its data is, with its checksum),
// and the files it links to into `linked`; either may be null.
void walk_links(const std::string& path, std::map<std::string, Held>* held, std::set<std::string>* linked);

void write_checksums(hid_t set, const Checksums& sums, const std::string& path);
// A scalar uint64 attribute of a dataset; none where it has none (or an unreadable one).
void write_u64_attribute(hid_t set, const char* name, std::uint64_t value, const std::string& path);
std::optional<std::uint64_t> read_u64_attribute(hid_t set, const char* name);
// Writes a dataset's data, in pieces of at most 4 MB. A failure names the dataset (`path`), the
// file and the OS's error.
void write_in_pieces(hid_t set, hid_t file_space, Kind kind, std::uint64_t count, const char* data,
                     const std::string& path, const std::string& file);

// Writes one segment of an append-only blob as a file of its own, <dir>/segments/<name>,
// committed (temporary name, fsync, rename) before any version links to it. Returns the
// link target's file name, relative to dir. `entries`: how many entries of the log it holds, an
// attribute of its dataset (a reader finds an entry without reading the segments before it).
std::string write_segment(const std::string& dir, const std::string& name, Kind kind, const void* data,
                          std::uint64_t count, const Checksums& sums, std::optional<std::uint64_t> entries);

}  // namespace arclight::ckpt
