#include "hdf5_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "arclight/core/crc32c.hpp"
#include "arclight/core/files.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace arclight::ckpt {

std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex m;
  return m;
}

CheckpointsHeld::CheckpointsHeld() { hdf5_mutex().lock(); }
CheckpointsHeld::~CheckpointsHeld() { hdf5_mutex().unlock(); }
namespace fs = std::filesystem;

void remove_stale(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw Error("checkpoint: cannot remove the stale " + path + ": " + std::strerror(errno));
}

void require_real_folder(const std::string& path) {
  std::error_code ec;
  fs::create_directory(path, ec);
  if (!fs::is_directory(fs::symlink_status(path, ec)))
    throw Error("checkpoint: " + path + " is not a folder (a symlink or a file in its place?): move it away");
}

hid_t h5type(Kind k) {
  switch (k) {
    case Kind::u8: return H5T_NATIVE_UINT8;
    case Kind::i64: return H5T_NATIVE_INT64;
    case Kind::f32: return H5T_NATIVE_FLOAT;
    case Kind::f64: return H5T_NATIVE_DOUBLE;
  }
  return H5T_NATIVE_UINT8;
}

std::size_t kind_size(Kind k) { return k == Kind::u8 ? 1 : k == Kind::f32 ? 4 : 8; }

std::string link_name_problem(const std::string& target) {
  const fs::path t(target);
  if (target.empty()) return "it names no file";
  if (t.is_absolute()) return "it names an absolute path";
  for (const fs::path& part : t)
    if (part == "..") return "it climbs out of the checkpoint directory";
  return {};
}

std::string link_target_problem(const std::string& dir, const std::string& target, int* missing_errno) {
  std::string problem = link_name_problem(target);
  if (!problem.empty()) return problem;
  // Every step from dir down to the file by lstat: a symlinked folder leads anywhere.
  fs::path at = dir.empty() ? fs::path(".") : fs::path(dir);
  const fs::path t(target);
  for (auto part = t.begin(); part != t.end(); ++part) {
    at /= *part;
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0) {
      if (missing_errno) *missing_errno = errno;
      return "it is missing";
    }
    const bool last = std::next(part) == t.end();
    if (last && !S_ISREG(st.st_mode)) return "it is not a regular file (a symlink, a FIFO or a device?)";
    if (!last && !S_ISDIR(st.st_mode)) return "it is reached through something that is not a folder (a symlink?)";
  }
  return {};
}

namespace {

// Called by HDF5 before it opens the file an external link names: only files inside the
// checkpoint directory, read-only.
herr_t check_external_link(const char*, const char*, const char* child_file, const char*, unsigned* acc_flags, hid_t,
                           void* op_data) {
  auto* policy = static_cast<LinkPolicy*>(op_data);
  const std::string problem = link_target_problem(policy->dir(), child_file);
  if (!problem.empty()) {
    policy->refused = "a link to " + printable(child_file) + " is refused: " + problem;
    return -1;
  }
  *acc_flags = H5F_ACC_RDONLY;
  return 0;
}

void set_link_rules(hid_t list, const std::string& dir, LinkPolicy* policy) {
  if (H5Pset_elink_prefix(list, dir.c_str()) < 0 || H5Pset_elink_cb(list, check_external_link, policy) < 0 ||
      H5Pset_elink_acc_flags(list, H5F_ACC_RDONLY) < 0)
    throw CorruptCheckpoint("checkpoint: cannot set up the link access of " + dir);
}

}  // namespace

LinkPolicy::LinkPolicy(const std::string& dir)
    : dir_(dir.empty() ? std::string(".") : dir),
      dapl_(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose, "dataset access list"),
      gapl_(H5Pcreate(H5P_GROUP_ACCESS), H5Pclose, "group access list") {
  set_link_rules(dapl_.id, dir_, this);
  set_link_rules(gapl_.id, dir_, this);
}

hid_t open_file(const std::string& path) {
  // Non-blocking: opening a FIFO for reading would otherwise wait for a writer for ever. Not through a symbolic link:
  // a version is a file of its directory, and a link would make a resume read any file its creator chose.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ELOOP)
    throw CorruptCheckpoint(printable(path) + ": a symbolic link in place of a version file (not followed)");
  if (fd >= 0) {
    struct stat st;
    const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    ::close(fd);
    if (!regular) throw CorruptCheckpoint(printable(path) + ": not a regular file (a FIFO, a device or a folder?)");
  }
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access list");
  H5Pset_elink_file_cache_size(fapl.id, 16);  // linked parents stay open across datasets
  H5E_BEGIN_TRY { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.id); }
  H5E_END_TRY;
  return -1;
}

Checksums checksums_of(const void* data, std::size_t bytes) {
  // One pass in pieces that stay in the cache between the two sums.
  constexpr std::size_t piece = 256 << 10;
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  Checksums sums;
  const char* at = static_cast<const char*>(data);
  for (std::size_t done = 0; done < bytes; done += piece) {
    const std::size_t n = std::min(piece, bytes - done);
    sums.crc32c = crc32c_extend(sums.crc32c, at + done, n);
    XXH3_64bits_update(&state, at + done, n);
  }
  sums.xxh3 = XXH3_64bits_digest(&state);
  return sums;
}

std::optional<std::uint64_t> read_u64_attribute(hid_t set, const char* name) {
  htri_t exists = -1;
  H5E_BEGIN_TRY { exists = H5Aexists(set, name); }
  H5E_END_TRY;
  if (exists <= 0) return std::nullopt;
  hid_t attr = -1;
  H5E_BEGIN_TRY { attr = H5Aopen(set, name, H5P_DEFAULT); }
  H5E_END_TRY;
  if (attr < 0) return std::nullopt;
  Handle a(attr, H5Aclose, name);
  Handle space(H5Aget_space(a.id), H5Sclose, name);
  std::uint64_t value = 0;
  if (H5Sget_simple_extent_npoints(space.id) != 1 || H5Aread(a.id, H5T_NATIVE_UINT64, &value) < 0) return std::nullopt;
  return value;
}

namespace {

// A dataset's XXH3-64, none where it has no such attribute (or an unreadable one).
std::optional<std::uint64_t> read_xxh3(hid_t set) { return read_u64_attribute(set, "xxh3_64"); }

}  // namespace

std::uint32_t read_crc(hid_t set, const std::string& what) {
  std::uint32_t stored = 0;
  Handle attr(H5Aopen(set, "crc32c", H5P_DEFAULT), H5Aclose, what + " has no checksum");
  Handle space(H5Aget_space(attr.id), H5Sclose, what);
  if (H5Sget_simple_extent_npoints(space.id) != 1) throw CorruptCheckpoint(what + ": its checksum is not one number");
  if (H5Aread(attr.id, H5T_NATIVE_UINT32, &stored) < 0) throw CorruptCheckpoint(what + ": unreadable checksum");
  return stored;
}

std::uint64_t extent(hid_t set, const std::string& what) {
  Handle space(H5Dget_space(set), H5Sclose, what);
  if (H5Sget_simple_extent_ndims(space.id) != 1) throw CorruptCheckpoint(what + " is not 1-D");
  hsize_t dims[1] = {0};
  H5Sget_simple_extent_dims(space.id, dims, nullptr);
  return dims[0];
}

int descriptor_of(hid_t set) {
  const hid_t file = H5Iget_file_id(set);
  if (file < 0) return -1;
  int* fd = nullptr;
  const int out = H5Fget_vfd_handle(file, H5P_DEFAULT, reinterpret_cast<void**>(&fd)) >= 0 && fd ? *fd : -1;
  H5Fclose(file);
  return out;
}

namespace {

// Only what arclight writes: contiguous data in the file itself. External storage names
// any file on the machine, a virtual dataset maps other files' data, and both can declare
// any size.
void check_layout(hid_t set, std::size_t size, const std::string& what) {
  Handle dcpl(H5Dget_create_plist(set), H5Pclose, what);
  if (H5Pget_external_count(dcpl.id) != 0)
    throw CorruptCheckpoint(what +
                            ": its data lies in other files (HDF5 external storage), which arclight never writes");
  if (H5Pget_layout(dcpl.id) != H5D_CONTIGUOUS)
    throw CorruptCheckpoint(what + ": its data is not stored contiguously (a virtual, chunked or compact dataset), " +
                            "which arclight never writes");
  Handle type(H5Dget_type(set), H5Tclose, what);
  if (H5Tget_size(type.id) != size) throw CorruptCheckpoint(what + " has the wrong element type");
}

// The file that holds a dataset, by its descriptor: its identity and its real size.
StoredBytes file_of(hid_t set, const std::string& what) {
  const int fd = descriptor_of(set);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) throw CorruptCheckpoint(what + ": the file that holds it cannot be examined");
  return {st.st_dev, st.st_ino, 0, static_cast<std::uint64_t>(st.st_size)};
}

}  // namespace

void advise_will_read(hid_t set, const StoredBytes& where) {
  const int fd = descriptor_of(set);
  if (fd >= 0 && where.end > where.begin)
    ::posix_fadvise(fd, static_cast<off_t>(where.begin), static_cast<off_t>(where.end - where.begin),
                    POSIX_FADV_WILLNEED);
}

std::uint64_t stored_extent(hid_t set, std::size_t size, const std::string& what, StoredBytes* where) {
  check_layout(set, size, what);
  const std::uint64_t count = extent(set, what);
  if (count == 0) return 0;
  StoredBytes bytes = file_of(set, what);
  const std::uint64_t file_size = bytes.end;
  const haddr_t offset = H5Dget_offset(set);
  if (count > (std::uint64_t(1) << 60) / size || offset == HADDR_UNDEF || offset > file_size ||
      count * size > file_size - offset)
    throw CorruptCheckpoint(what + ": its length exceeds the bytes stored");
  bytes.begin = offset;
  bytes.end = offset + count * size;
  if (where) *where = bytes;
  return count;
}

bool ByteRanges::take(const StoredBytes& bytes) {
  std::map<std::uint64_t, std::uint64_t>& ranges = taken_[{bytes.device, bytes.inode}];
  auto next = ranges.lower_bound(bytes.begin);
  if (next != ranges.end() && next->first < bytes.end) return false;
  if (next != ranges.begin() && std::prev(next)->second > bytes.begin) return false;
  ranges.emplace_hint(next, bytes.begin, bytes.end);
  return true;
}

Kind kind_of(hid_t set) {
  Handle type(H5Dget_type(set), H5Tclose, "dataset type");
  if (H5Tget_class(type.id) == H5T_FLOAT) return H5Tget_size(type.id) == 4 ? Kind::f32 : Kind::f64;
  return H5Tget_size(type.id) == 1 ? Kind::u8 : Kind::i64;
}

bool holds_native_floats(hid_t set) {
  const hid_t type = H5Dget_type(set);
  if (type < 0) return false;
  const bool native = H5Tequal(type, H5T_NATIVE_FLOAT) > 0;
  H5Tclose(type);
  return native;
}

std::int64_t meta_number(hid_t file, const LinkPolicy& links, const char* name) {
  hid_t set = -1;
  H5E_BEGIN_TRY { set = H5Dopen2(file, name, links.datasets()); }
  H5E_END_TRY;
  if (set < 0) return -1;
  Handle s(set, H5Dclose, name);
  std::int64_t value = -1;
  try {
    if (stored_extent(set, sizeof value, name) != 1) return -1;
  } catch (const CorruptCheckpoint&) {
    return -1;
  }
  if (H5Dread(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) < 0) return -1;
  return value;
}

std::string external_link_file(hid_t loc, const std::string& name, hid_t lapl, std::string* object) {
  H5L_info_t info;
  herr_t got = -1;
  H5E_BEGIN_TRY { got = H5Lget_info(loc, name.c_str(), &info, lapl); }
  H5E_END_TRY;
  if (got < 0) throw CorruptCheckpoint(name + ": its link does not read");
  if (info.type != H5L_TYPE_EXTERNAL) return {};
  if (info.u.val_size > 4096) throw CorruptCheckpoint(name + ": its link's value is implausibly long");
  std::vector<char> value(info.u.val_size);
  const char* file = nullptr;
  const char* linked_object = nullptr;
  unsigned flags = 0;
  if (H5Lget_val(loc, name.c_str(), value.data(), value.size(), lapl) < 0 ||
      H5Lunpack_elink_val(value.data(), value.size(), &flags, &file, &linked_object) < 0)
    throw CorruptCheckpoint(name + ": its link does not read");
  if (object) *object = linked_object;
  return file;
}

namespace {

// What H5Lvisit hands each link of a version file.
struct LinkWalk {
  std::string file_name;
  hid_t file;
  const LinkPolicy& links;
  std::map<std::string, Held>* held;
  std::set<std::string>* linked;
  std::string error;  // why the walk stopped: no exception may cross HDF5's C frames
};

// Where a link's data lives; false when it is no dataset (a group, a soft link).
bool locate(LinkWalk& walk, const char* name, const H5L_info_t& info, Held& h) {
  if (info.type == H5L_TYPE_EXTERNAL) {
    h.file = external_link_file(walk.file, name, H5P_DEFAULT, &h.object);
    const std::string problem = link_name_problem(h.file);
    if (!problem.empty())
      throw CorruptCheckpoint("/" + std::string(name) + " links to " + printable(h.file) + ": " + problem);
    if (walk.linked) walk.linked->insert(h.file);
    return true;
  }
  if (info.type != H5L_TYPE_HARD) return false;
  H5O_info_t o;
  if (H5Oget_info_by_name(walk.file, name, &o, H5P_DEFAULT) < 0) throw CorruptCheckpoint(std::string(name));
  h.file = walk.file_name;
  h.object = std::string("/") + name;
  return o.type == H5O_TYPE_DATASET;
}

herr_t visit_link(hid_t, const char* name, const H5L_info_t* info, void* arg) {
  auto* walk = static_cast<LinkWalk*>(arg);
  const std::string path = std::string("/") + name;
  try {
    Held h;
    if (!locate(*walk, name, *info, h) || !walk->held) return 0;
    hid_t set = -1;
    H5E_BEGIN_TRY { set = H5Dopen2(walk->file, name, walk->links.datasets()); }
    H5E_END_TRY;
    if (set < 0) return 0;  // a dangling link (or one refused): the dataset is written anew
    Handle s(set, H5Dclose, path);
    try {
      h.kind = kind_of(set);
      h.count = extent(set, path);
      h.crc = read_crc(set, path);
      h.xxh3 = read_xxh3(set);
    } catch (const CorruptCheckpoint&) {
      return 0;
    }
    (*walk->held)[path] = h;
    return 0;
  } catch (const std::exception& e) {
    walk->error = e.what();
    return -1;
  }
}

}  // namespace

void walk_links(const std::string& path, std::map<std::string, Held>* held, std::set<std::string>* linked) {
  Handle file(open_file(path), H5Fclose, path + ": not a readable HDF5 file (incomplete?)");
  const LinkPolicy links(fs::path(path).parent_path().string());
  LinkWalk walk{fs::path(path).filename().string(), file.id, links, held, linked, ""};
  if (H5Lvisit(file.id, H5_INDEX_NAME, H5_ITER_INC, visit_link, &walk) < 0)
    throw CorruptCheckpoint(path + ": its links do not read back" + (walk.error.empty() ? "" : ": " + walk.error));
}

void write_u64_attribute(hid_t set, const char* name, std::uint64_t value, const std::string& path) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, path);
  Handle attr(H5Acreate2(set, name, H5T_NATIVE_UINT64, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, path);
  if (H5Awrite(attr.id, H5T_NATIVE_UINT64, &value) < 0)
    throw Error("checkpoint: cannot write " + std::string(name) + " of " + path);
}

void write_checksums(hid_t set, const Checksums& sums, const std::string& path) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, path);
  Handle crc(H5Acreate2(set, "crc32c", H5T_NATIVE_UINT32, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, path);
  Handle xxh3(H5Acreate2(set, "xxh3_64", H5T_NATIVE_UINT64, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, path);
  if (H5Awrite(crc.id, H5T_NATIVE_UINT32, &sums.crc32c) < 0 || H5Awrite(xxh3.id, H5T_NATIVE_UINT64, &sums.xxh3) < 0)
    throw Error("checkpoint: cannot write the checksums of " + path);
}

namespace {

// Why the file system refused bytes HDF5 could not write: neither HDF5 nor MPI-IO passes the
// OS's error on (MPI-IO reports a short write as a success, HDF5 a "file write failed"), so the
// same bytes are written again where they belong, by pwrite and fsync, and the OS says why
// (No space left on device, Disk quota exceeded, Input/output error). The file is given up
// anyway. Empty when the OS takes them this time.
std::string why_write_failed(const std::string& file, hid_t set, std::uint64_t at, const char* data, std::size_t size) {
  const haddr_t base = H5Dget_offset(set);
  if (base == HADDR_UNDEF) return {};
  const int fd = ::open(file.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return os_error(errno);
  std::string why;
  for (std::size_t done = 0; done < size && why.empty();) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(base + at + done));
    if (n < 0 && errno != EINTR) why = os_error(errno);
    if (n == 0) why = "the file system takes no more bytes";
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (why.empty() && ::fsync(fd) != 0) why = os_error(errno);
  ::close(fd);
  return why;
}

}  // namespace

// In pieces: one large write(2) into the page cache was several times slower than the same
// bytes in pieces here (ext4), and the pieces are what dd writes too.
void write_in_pieces(hid_t set, hid_t file_space, Kind kind, std::uint64_t count, const char* data,
                     const std::string& path, const std::string& file) {
  const auto fail = [&](std::uint64_t start, std::uint64_t n) {
    const std::size_t size = kind_size(kind);
    const std::string why = why_write_failed(file, set, start * size, data + start * size, n * size);
    throw Error("checkpoint: cannot write " + path + " into " + file + (why.empty() ? "" : ": " + why));
  };
  const hsize_t piece = (4u << 20) / kind_size(kind);
  if (count <= piece) {
    if (H5Dwrite(set, h5type(kind), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) fail(0, count);
    return;
  }
  for (hsize_t start = 0; start < count; start += piece) {
    hsize_t n = std::min<hsize_t>(piece, count - start);
    Handle memory(H5Screate_simple(1, &n, nullptr), H5Sclose, path);
    if (H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &start, nullptr, &n, nullptr) < 0 ||
        H5Dwrite(set, h5type(kind), memory.id, file_space, H5P_DEFAULT, data + start * kind_size(kind)) < 0)
      fail(start, n);
  }
}

std::string write_segment(const std::string& dir, const std::string& name, Kind kind, const void* data,
                          std::uint64_t count, const Checksums& sums, std::optional<std::uint64_t> entries) {
  const fs::path segments = fs::path(dir) / "segments";
  fs::create_directories(dir);
  require_real_folder(segments.string());
  const std::string final_path = (segments / name).string(), tmp_path = final_path + ".tmp";
  remove_stale(tmp_path);
  try {
    {
      // O_EXCL: a link planted under the temporary name makes the create fail, not write through it.
      Handle file(H5Fcreate(tmp_path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                  "checkpoint: cannot create " + tmp_path);
      hsize_t dims[1] = {count};
      Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose, name);
      Handle set(H5Dcreate2(file.id, "/data", h5type(kind), space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
                 "checkpoint: cannot create " + final_path);
      write_in_pieces(set.id, space.id, kind, count, static_cast<const char*>(data), final_path, tmp_path);
      write_checksums(set.id, sums, final_path);
      if (entries) write_u64_attribute(set.id, "entries", *entries, final_path);
      // A small dataset reaches the file only as it closes (HDF5's sieve buffer): a failure there is a full disk.
      if (set.close_now() < 0 || file.close_now() < 0) throw Error("checkpoint: cannot close " + tmp_path);
    }
    sync_to_disk(tmp_path, false);
    fs::rename(tmp_path, final_path);
  } catch (const std::exception&) {
    ::unlink(tmp_path.c_str());  // a failed write leaves nothing behind
    throw;
  }
  sync_to_disk(segments.string(), true);
  return "segments/" + name;
}

}  // namespace arclight::ckpt
