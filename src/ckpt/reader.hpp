#pragma once
// The reading of one version (ckpt-private): its datasets opened, their lengths checked against
// the bytes stored before anything is allocated, and read with their checksums verified. Shared by
// the reads of a whole version (read.cpp) and the trainers' shared read of a model (shared_read.cpp).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/bytes.hpp"
#include "arclight/core/crc32c.hpp"
#include "arclight/core/log.hpp"
#include "direct_read.hpp"
#include "hdf5_io.hpp"
#include "restore_helper.hpp"

namespace arclight::ckpt {

// Starts of the store's logs (Contents::restore) that a read cannot begin at: the logs are read whole.
struct StartsDoNotFit : CorruptCheckpoint {
  using CorruptCheckpoint::CorruptCheckpoint;
};

// One dataset of a tensor to read: where its bytes lie, and where its values go.
struct PlannedRead {
  std::string name;
  hid_t set;
  UninitFloats* values;
  std::size_t at, count;
  StoredBytes where;
};

class Reader {
 public:
  explicit Reader(const std::string& path)
      : path_(path),
        file_(open_file(path), H5Fclose, path + ": not a readable HDF5 file (incomplete?)"),
        links_(std::filesystem::path(path).parent_path().string()) {
    if (!has("/meta/links")) return;
    const std::string links = bytes("/meta/links");
    try {
      for (ByteReader in(links); in.remaining() > 0;) {
        std::string name(in.bytes());
        const std::uint64_t count = in.u64();
        linked_[name] = {count, in.u32()};
      }
    } catch (const DecodeError&) {
      throw CorruptCheckpoint(path + ": /meta/links is malformed");
    }
  }

  const std::string& path() const { return path_; }
  // The datasets of an append-only blob's group, in name (= version) order.
  std::vector<std::string> segment_names(const std::string& group) {
    if (!has(group)) throw CorruptCheckpoint(path_ + ": no group " + group);
    hid_t id = -1;
    H5E_BEGIN_TRY { id = H5Gopen2(file_.id, group.c_str(), links_.groups()); }
    H5E_END_TRY;
    Handle g(id, H5Gclose, path_ + ": cannot open " + group);
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
      static_cast<std::vector<std::string>*>(out)->push_back(name);
      return 0;
    };
    if (H5Literate(g.id, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names) < 0)
      throw CorruptCheckpoint(path_ + ": cannot list " + group);
    for (std::string& n : names) n = group + "/" + n;
    return names;
  }
  bool has(const std::string& name) const {
    htri_t exists = -1;
    H5E_BEGIN_TRY { exists = H5Lexists(file_.id, name.c_str(), links_.datasets()); }
    H5E_END_TRY;
    return exists > 0;
  }
  // A dataset, its external links followed only into the checkpoint directory.
  hid_t open(const std::string& name) {
    if (!has(name)) throw CorruptCheckpoint(path_ + ": no dataset " + name);
    links_.refused.clear();
    hid_t id = -1;
    H5E_BEGIN_TRY { id = H5Dopen2(file_.id, name.c_str(), links_.datasets()); }
    H5E_END_TRY;
    if (id < 0 && !links_.refused.empty()) throw CorruptCheckpoint(path_ + ": " + name + ": " + links_.refused);
    return id;
  }
  // A dataset's length as stored, before anything is read, its bytes taken in `ranges`:
  // datasets that share bytes would make a read allocate more than the files hold.
  std::uint64_t take_stored(hid_t set, const std::string& name, std::size_t size, ByteRanges& ranges,
                            StoredBytes* stored = nullptr) {
    StoredBytes where;
    const std::uint64_t count = stored_extent(set, size, path_ + ": " + name, &where);
    if (stored) *stored = where;
    if (count > 0 && !ranges.take(where))
      throw CorruptCheckpoint(path_ + ": " + name + " points at bytes another dataset holds (a forged link or offset)");
    return count;
  }
  std::uint64_t stored_count(const std::string& name, std::size_t size, ByteRanges& ranges) {
    Handle set(open(name), H5Dclose, path_ + ": cannot open " + name + " (a linked version is missing?)");
    return take_stored(set.id, name, size, ranges);
  }
  // The file a dataset links to, for messages; the dataset's own name when it is no link.
  std::string file_of(const std::string& name) {
    try {
      const std::string file = external_link_file(file_.id, name, links_.datasets());
      return file.empty() ? name : printable(file);
    } catch (const CorruptCheckpoint&) {
      return name;
    }
  }

  template <class T>
  std::vector<T> dataset(const std::string& name, hid_t type) {
    std::vector<T> out;
    append(name, type, out);
    return out;
  }
  // Reads a dataset onto the end of `out` (no temporary copy), checking its checksum.
  template <class T>
  void append(const std::string& name, hid_t type, std::vector<T>& out) {
    Handle set(open(name), H5Dclose, path_ + ": cannot open " + name + " (a linked version is missing?)");
    const std::size_t count = take_stored(set.id, name, sizeof(T), read_), at = out.size();
    if (out.capacity() < at + count) out.reserve(std::max(at + count, 2 * out.capacity()));
    out.resize(at + count);
    read_checked(set.id, name, type, out.data() + at, count);
  }
  // A tensor's dataset of `size` values (or none, when `may_be_empty`), opened and its length
  // checked, into `plan`: its values go to `values` at `at`. Returns the number of values.
  std::size_t plan_values(const std::string& name, UninitFloats& values, std::size_t at, std::size_t size,
                          bool may_be_empty, std::vector<PlannedRead>& plan) {
    const hid_t id = open(name);
    const Handle& set =
        planned_.emplace_back(id, H5Dclose, path_ + ": cannot open " + name + " (a linked version is missing?)");
    PlannedRead read{name, set.id, &values, at, 0, {}};
    read.count = take_stored(set.id, name, sizeof(float), read_, &read.where);
    if (read.count != size && !(may_be_empty && read.count == 0))
      throw CorruptCheckpoint(path_ + ": " + name + " has the wrong size");
    const std::size_t count = read.count;
    plan.push_back(std::move(read));
    return count;
  }
  // Reads what `plan` names, in its order, each into place (the vectors grow to hold it, within
  // the room reserved), until a checksum fails; the checksums are the helper's jobs. Straight from
  // the disk where the files allow it, else through HDF5 and the page cache.
  void read_planned(const std::vector<PlannedRead>& plan, RestoreHelper& helper) {
    if (!read_planned_directly(plan, helper)) read_planned_through_hdf5(plan, helper);
    planned_.clear();
  }
  std::string bytes(const std::string& name) {
    auto v = dataset<char>(name, H5T_NATIVE_UINT8);
    return std::string(v.begin(), v.end());
  }
  std::int64_t one(const std::string& name) {
    auto v = dataset<std::int64_t>(name, H5T_NATIVE_INT64);
    if (v.size() != 1) throw CorruptCheckpoint(path_ + ": " + name + " is not one number");
    return v[0];
  }
  // An append-only blob: its segments, in name (= version) order. With `damaged`, a segment
  // that does not read is left out and named there, and `lost_bytes` (when given) counts the
  // bytes its link says it held.
  // `skip`: the first segments are not read (segments_before checked them).
  std::string segments(const std::string& group, std::vector<std::string>* damaged,
                       std::optional<std::uint64_t>* lost_bytes = nullptr, std::size_t skip = 0) {
    std::string out;
    const std::vector<std::string> names = segment_names(group);
    for (std::size_t i = std::min(skip, names.size()); i < names.size(); ++i) {
      const std::string& name = names[i];
      try {
        out += bytes(name);
      } catch (const CorruptCheckpoint& e) {
        refuse_unopenable_segment(name);
        damaged->push_back(file_of(name) + " (" + e.what() + ")");
        if (!lost_bytes) continue;
        const auto link = linked_.find(name);
        *lost_bytes = lost_bytes->value_or(0) + (link == linked_.end() ? 0 : link->second.first);
      }
    }
    return out;
  }
  // A segment's file that is there and cannot be read now (no permission, an I/O error, a stale NFS handle) is no
  // damage: going on without it would leave its records out of the run, and retention would then delete it for good.
  // Only a plain file inside the directory is opened (never what a hostile link names); anything else is damage.
  void refuse_unopenable_segment(const std::string& name) {
    std::string file;
    try {
      file = external_link_file(file_.id, name, links_.datasets());
    } catch (const CorruptCheckpoint&) {
      return;
    }
    if (file.empty()) return;
    const auto unreadable = [](int e) { return e == EACCES || e == EPERM || e == EIO || e == ESTALE; };
    const auto refuse = [&](const std::string& at, int e) {
      throw Error(path_ + ": " + name + " is in " + printable(at) + ", which cannot be read now (" + std::strerror(e) +
                  "): stopping rather than going on without the records it holds");
    };
    const std::string dir = std::filesystem::path(path_).parent_path().string();
    const std::string at = (std::filesystem::path(dir) / file).string();
    int missing_errno = 0;
    if (!link_target_problem(dir, file, &missing_errno).empty()) {
      if (unreadable(missing_errno)) refuse(at, missing_errno);
      return;
    }
    const int fd = ::open(at.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0) {
      ::close(fd);
      return;
    }
    if (unreadable(errno)) refuse(at, errno);
  }
  // The entries a segment says it holds (its "entries" attribute), opened but not read.
  std::optional<std::uint64_t> segment_entries(const std::string& name) {
    Handle set(open(name), H5Dclose, path_ + ": cannot open " + name + " (a linked version is missing?)");
    return read_u64_attribute(set.id, "entries");
  }
  // How many segments of the group hold the bytes before `at`, each opened but not read (its file
  // there, its length as stored and as its link says); StartsDoNotFit when one does not open or
  // none ends at `at`.
  std::size_t segments_before(const std::string& group, std::uint64_t at) {
    std::size_t count = 0;
    std::uint64_t bytes = 0;
    for (const std::string& name : segment_names(group)) {
      if (bytes >= at) break;
      bytes += segment_length(name);
      ++count;
    }
    if (bytes != at) throw StartsDoNotFit(path_ + ": " + group + " has no segment at byte " + std::to_string(at));
    return count;
  }

 private:
  // A segment not read: opened, its length as stored and as its link says.
  std::uint64_t segment_length(const std::string& name) {
    try {
      Handle set(open(name), H5Dclose, path_ + ": cannot open " + name + " (a linked version is missing?)");
      const std::uint64_t count = stored_extent(set.id, 1, path_ + ": " + name);
      const auto link = linked_.find(name);
      if (link != linked_.end() && link->second.first != count)
        throw CorruptCheckpoint(path_ + ": " + name + " is not as long as its link says");
      return count;
    } catch (const CorruptCheckpoint& e) {
      throw StartsDoNotFit(e.what());
    }
  }

  // The plan read with O_DIRECT (direct_read.hpp), when every dataset holds this machine's floats
  // and the files read so; false, having read nothing, otherwise.
  bool read_planned_directly(const std::vector<PlannedRead>& plan, RestoreHelper& helper) {
    std::vector<DirectRead> reads;
    for (const PlannedRead& p : plan) {
      if (!holds_native_floats(p.set)) return false;
      if (p.count > 0)
        reads.push_back({p.where, descriptor_of(p.set), p.values, p.at, p.count, {}, path_ + ": " + p.name});
    }
    const std::unique_ptr<DirectFiles> files = DirectFiles::open(reads);
    if (!files) {
      if (direct_reads_now() == DirectReads::always && !reads.empty())
        log::debug(path_, ": the tensors are read through the page cache (the files do not read directly)");
      return false;
    }
    std::size_t next = 0;
    for (const PlannedRead& p : plan) {
      if (p.count == 0)
        checksum_check(p.set, p.name, 0)(crc32c(nullptr, 0));
      else
        reads[next++].check = checksum_check(p.set, p.name, p.count);
    }
    files->read(reads, helper);
    return true;
  }
  // The kernel is asked to read ahead up to readahead_bytes past the read under way: the disk
  // works while this thread fills fresh memory and HDF5 does its bookkeeping, and a version
  // larger than the page cache is not read ahead so far that its pages are evicted unused.
  // The helper faults in the reads' room in their order, ahead of them.
  void read_planned_through_hdf5(const std::vector<PlannedRead>& plan, RestoreHelper& helper) {
    for (const PlannedRead& p : plan) helper.fault_in(p.values->data() + p.at, p.count * sizeof(float));
    std::size_t advised = 0;
    std::uint64_t ahead = 0;  // bytes advised and not yet read
    for (std::size_t i = 0; i < plan.size(); ++i) {
      for (; advised < plan.size() && (advised <= i || ahead < readahead_bytes); ++advised) {
        advise_will_read(plan[advised].set, plan[advised].where);
        ahead += plan[advised].count * sizeof(float);
      }
      const PlannedRead& p = plan[i];
      ahead -= p.count * sizeof(float);
      if (helper.failed()) break;  // a checksum did not match: helper.finish() says which
      if (p.values->size() < p.at + p.count) p.values->resize(p.at + p.count);
      read_checked(p.set, p.name, H5T_NATIVE_FLOAT, p.values->data() + p.at, p.count, &helper);
    }
  }

  // Reads `count` values of a dataset into `data` in pieces and checks its checksum (and a
  // link's length and checksum). With a helper the checksums are its jobs, each piece's summed
  // while the next one is read, and a mismatch comes out of helper->finish(); without one the
  // check is done when this returns.
  template <class T>
  void read_checked(hid_t set, const std::string& name, hid_t type, T* data, std::size_t count,
                    RestoreHelper* helper = nullptr) {
    const hsize_t piece = std::max<hsize_t>(1, piece_bytes / sizeof(T));
    if (!helper) {
      if (count <= piece) {  // one piece: read, then checked
        if (count > 0 && H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
          throw CorruptCheckpoint(path_ + ": cannot read " + name);
        checksum_check(set, name, count)(crc32c(data, count * sizeof(T)));
        return;
      }
      RestoreHelper overlap;
      read_checked(set, name, type, data, count, &overlap);
      overlap.finish();
      return;
    }
    auto crc = std::make_shared<std::uint32_t>(0);
    Handle file_space(H5Dget_space(set), H5Sclose, path_ + ": " + name);
    for (hsize_t start = 0; start < count; start += piece) {
      hsize_t n = std::min<hsize_t>(piece, count - start);
      Handle memory(H5Screate_simple(1, &n, nullptr), H5Sclose, path_ + ": " + name);
      if (H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, &start, nullptr, &n, nullptr) < 0 ||
          H5Dread(set, type, memory.id, file_space.id, H5P_DEFAULT, data + start) < 0)
        throw CorruptCheckpoint(path_ + ": cannot read " + name);
      helper->post([crc, at = data + start, n] { *crc = crc32c_extend(*crc, at, n * sizeof(T)); });
    }
    helper->post([crc, check = checksum_check(set, name, count)] { check(*crc); });
  }

  // What a dataset's checksum must be, and a link's length and checksum, as a check of the
  // checksum of what was read. The checksum lies after the data in the file: read after it.
  std::function<void(std::uint32_t)> checksum_check(hid_t set, const std::string& name, std::size_t count) {
    const std::uint32_t expected = read_crc(set, path_ + ": " + name);
    std::optional<std::pair<std::uint64_t, std::uint32_t>> link;
    if (auto it = linked_.find(name); it != linked_.end()) link = it->second;
    return [path = path_, name, expected, link, count](std::uint32_t crc) {
      if (crc != expected) throw CorruptCheckpoint(path + ": checksum mismatch in " + name);
      if (link && (link->first != count || link->second != crc))
        throw CorruptCheckpoint(path + ": " + name + " links to data that changed since this version was written");
    };
  }

  static constexpr std::uint64_t readahead_bytes = std::uint64_t(256) << 20;
  // Pieces of a read: large enough for the disk, small enough that each one's checksum
  // overlaps the next one's read.
  static constexpr std::size_t piece_bytes = 4u << 20;

  std::string path_;
  Handle file_;
  LinkPolicy links_;
  ByteRanges read_;                                                        // every byte is read once
  std::map<std::string, std::pair<std::uint64_t, std::uint32_t>> linked_;  // length and checksum a link must find
  std::deque<Handle> planned_;                                             // the datasets plan_values opened
};

// The meta of a version into `c` (format, step, policy version, configuration, parent, chain).
void read_meta(Reader& r, Checkpoint& c);
// The model's index: the tensors' names and sizes into c.tensors, checked against the bytes
// stored, and the optimizer's step counts. Returns the number of values of the model.
std::uint64_t read_index(Reader& r, Checkpoint& c);

// The moments of every tensor read, or of none (a version saved before the first step).
struct Moments {
  bool some = false, missing = false;
  void add(bool present) { (present ? some : missing) = true; }
  bool mixed() const { return some && missing; }
};

// Room for `total` values in each of the flat vectors (the parameters alone without `moments`), in huge pages where
// the kernel has them (transparent huge pages on request): a restore fills gigabytes of fresh memory, and faulting
// it in 4 KB pages took as long as reading the file here.
void reserve_model(Checkpoint& c, std::size_t total, bool moments = true);

inline const char* const mixed_moments = ": optimizer state and parameters differ in size";

// Tensor `i`'s values and moments, opened and their lengths checked, into `plan`: they go to
// the flat vectors at `at`.
void plan_tensor(Reader& r, Checkpoint& c, std::size_t i, std::size_t at, Moments& moments,
                 std::vector<PlannedRead>& plan);
// The planned reads in the order their bytes lie in the files: the disk reads on instead of
// seeking between a tensor's values and its moments.
void order_by_place(std::vector<PlannedRead>& plan);
// The offset of each tensor in the flat vectors, and one past the last.
std::vector<std::size_t> tensor_offsets(const Checkpoint& c);

}  // namespace arclight::ckpt
