// Reading a version back, every checksum verified, and restoring the newest one that reads.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <thread>
#include <tuple>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/bytes.hpp"
#include "arclight/core/crc32c.hpp"
#include "arclight/core/log.hpp"
#include "directory.hpp"
#include "hdf5_io.hpp"
#include "plan.hpp"
#include "restore_helper.hpp"

namespace arclight::ckpt {
namespace fs = std::filesystem;

namespace {

// Starts of the store's logs (Contents::restore) that a read cannot begin at: the logs are read whole.
struct StartsDoNotFit : CorruptCheckpoint {
  using CorruptCheckpoint::CorruptCheckpoint;
};

// A file named like a version (v00000010.h5) holds that step: a copy of another version
// under that name would take a resume back in time, and its later saves over newer versions.
void check_name_matches_step(const std::string& path, std::int64_t step) {
  static const std::regex version_name{R"(v([0-9]{8})\.h5)"};
  const std::string file = fs::path(path).filename().string();
  std::smatch m;
  if (std::regex_match(file, m, version_name) && std::stoll(m[1]) != step)
    throw CorruptCheckpoint(path + ": holds step " + std::to_string(step) +
                            ", not the one its name says (a copy or a renamed version?)");
}

// One dataset of a tensor to read: where its bytes lie, and where its values go.
struct PlannedRead {
  std::string name;
  hid_t set;
  std::vector<float>* values;
  std::size_t at, count;
  StoredBytes where;
};

class Reader {
 public:
  explicit Reader(const std::string& path)
      : path_(path),
        file_(open_file(path), H5Fclose, path + ": not a readable HDF5 file (incomplete?)"),
        links_(fs::path(path).parent_path().string()) {
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
  std::size_t plan_values(const std::string& name, std::vector<float>& values, std::size_t at, std::size_t size,
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
  // the room reserved), until a checksum fails; the checksums are the helper's jobs.
  void read_planned(const std::vector<PlannedRead>& plan, RestoreHelper& helper) {
    for (const PlannedRead& p : plan) {
      if (helper.failed()) break;  // a checksum did not match: helper.finish() says which
      if (p.values->size() < p.at + p.count) p.values->resize(p.at + p.count);
      read_checked(p.set, p.name, H5T_NATIVE_FLOAT, p.values->data() + p.at, p.count, &helper);
    }
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
        damaged->push_back(file_of(name) + " (" + e.what() + ")");
        if (!lost_bytes) continue;
        const auto link = linked_.find(name);
        *lost_bytes = lost_bytes->value_or(0) + (link == linked_.end() ? 0 : link->second.first);
      }
    }
    return out;
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

void read_meta(Reader& r, Checkpoint& c) {
  if (!r.has("/meta/format") || r.one("/meta/format") != format_version)
    throw CorruptCheckpoint(r.path() + ": not a checkpoint of format " + std::to_string(format_version));
  c.step = r.one("/meta/step");
  c.policy_version = r.one("/meta/policy_version");
  c.config_toml = r.bytes("/meta/config_toml");
  c.arclight_version = r.bytes("/meta/arclight_version");
  auto created = r.dataset<double>("/meta/created", H5T_NATIVE_DOUBLE);
  c.created = created.empty() ? 0 : created[0];
  c.parent = r.bytes("/meta/parent");
  c.chain = r.one("/meta/chain");
  check_name_matches_step(r.path(), c.step);
}

// Tensor sizes as the index declares them, checked against the bytes stored before any
// room is reserved for them: a forged size skips the version, it never exhausts memory.
std::uint64_t checked_total(Reader& r, const std::vector<std::string>& names, const std::vector<std::int64_t>& sizes) {
  ByteRanges ranges;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string name = "/model/parameters/" + names[i];
    if (sizes[i] < 0 || r.stored_count(name, sizeof(float), ranges) != std::uint64_t(sizes[i]))
      throw CorruptCheckpoint(r.path() + ": " + name + " has the wrong size");
    total += std::uint64_t(sizes[i]);
  }
  return total;
}

// The model's index: the tensors' names and sizes into c.tensors, checked against the bytes
// stored, and the optimizer's step counts. Returns the number of values of the model.
std::uint64_t read_index(Reader& r, Checkpoint& c) {
  const std::string& path = r.path();
  const std::vector<std::string> names = unpack_strings(r.bytes("/model/tensor_names"), path + ": /model/tensor_names");
  const std::vector<std::int64_t> sizes = r.dataset<std::int64_t>("/model/tensor_sizes", H5T_NATIVE_INT64);
  if (names.size() != sizes.size()) throw CorruptCheckpoint(path + ": tensor names and sizes differ in number");
  const std::uint64_t total = checked_total(r, names, sizes);
  for (std::size_t i = 0; i < names.size(); ++i) c.tensors.push_back({names[i], static_cast<std::size_t>(sizes[i])});
  c.optimizer_steps = r.dataset<std::int64_t>("/optim/steps", H5T_NATIVE_INT64);
  return total;
}

// The moments of every tensor read, or of none (a version saved before the first step).
struct Moments {
  bool some = false, missing = false;
  void add(bool present) { (present ? some : missing) = true; }
  bool mixed() const { return some && missing; }
};

// Room for `total` values in each of the flat vectors, in huge pages where the kernel has them
// (transparent huge pages on request): a restore fills gigabytes of fresh memory, and faulting
// it in 4 KB pages took as long as reading the file here.
void reserve_model(Checkpoint& c, std::size_t total) {
  for (std::vector<float>* values : {&c.parameters, &c.exp_avg, &c.exp_avg_sq}) {
    values->reserve(total);
#ifdef MADV_HUGEPAGE
    constexpr std::uintptr_t huge = std::uintptr_t(2) << 20;
    const auto begin = reinterpret_cast<std::uintptr_t>(values->data());
    const std::uintptr_t first = (begin + huge - 1) & ~(huge - 1), end = (begin + total * sizeof(float)) & ~(huge - 1);
    if (end > first)
      ::madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
  }
}

const char* const mixed_moments = ": optimizer state and parameters differ in size";

// Tensor `i`'s values and moments, opened and their lengths checked, into `plan`: they go to
// the flat vectors at `at`.
void plan_tensor(Reader& r, Checkpoint& c, std::size_t i, std::size_t at, Moments& moments,
                 std::vector<PlannedRead>& plan) {
  const TensorInfo& t = c.tensors[i];
  r.plan_values("/model/parameters/" + t.name, c.parameters, at, t.size, false, plan);
  const std::size_t avg = r.plan_values("/optim/exp_avg/" + t.name, c.exp_avg, at, t.size, true, plan);
  const std::size_t avg_sq = r.plan_values("/optim/exp_avg_sq/" + t.name, c.exp_avg_sq, at, t.size, true, plan);
  if (avg != avg_sq) throw CorruptCheckpoint(r.path() + mixed_moments);
  if (t.size > 0) moments.add(avg > 0);
}

// The planned reads in the order their bytes lie in the files: the disk reads on instead of
// seeking between a tensor's values and its moments. The helper faults in their room in that
// order, ahead of the reads.
void order_by_place(std::vector<PlannedRead>& plan, RestoreHelper& helper) {
  std::sort(plan.begin(), plan.end(), [](const PlannedRead& a, const PlannedRead& b) {
    return std::tie(a.where.device, a.where.inode, a.where.begin) <
           std::tie(b.where.device, b.where.inode, b.where.begin);
  });
  for (const PlannedRead& p : plan) helper.fault_in(p.values->data() + p.at, p.count * sizeof(float));
}

// The offset of each tensor in the flat vectors, and one past the last.
std::vector<std::size_t> tensor_offsets(const Checkpoint& c) {
  std::vector<std::size_t> offsets{0};
  for (const TensorInfo& t : c.tensors) offsets.push_back(offsets.back() + t.size);
  return offsets;
}

// The model and the optimizer: every tensor read and checked, or (no_tensor_data, restore) their
// lengths checked against the bytes stored and their data left to the trainers, which read
// and check it.
void read_model(Reader& r, Checkpoint& c, Contents contents) {
  const std::uint64_t total = read_index(r, c);
  if (contents == Contents::no_tensor_data || contents == Contents::restore) {
    ByteRanges ranges;
    for (const TensorInfo& t : c.tensors)
      for (const char* group : {"/optim/exp_avg/", "/optim/exp_avg_sq/"}) {
        const std::uint64_t count = r.stored_count(group + t.name, sizeof(float), ranges);
        if (count != 0 && count != t.size)
          throw CorruptCheckpoint(r.path() + ": " + group + t.name + " has the wrong size");
      }
  } else {
    // Room for every tensor at once, so that the reads go straight into place. A failure here
    // is this machine's memory, not the file: it is not skipped as corrupt.
    reserve_model(c, total);
    const std::vector<std::size_t> offsets = tensor_offsets(c);
    Moments moments;
    std::vector<PlannedRead> plan;
    for (std::size_t i = 0; i < c.tensors.size(); ++i) plan_tensor(r, c, i, offsets[i], moments, plan);
    RestoreHelper helper;
    order_by_place(plan, helper);
    r.read_planned(plan, helper);
    helper.finish();
    if (moments.mixed()) throw CorruptCheckpoint(r.path() + mixed_moments);
    if (!moments.some) c.exp_avg = {}, c.exp_avg_sq = {};
  }
  if (c.tensors.size() == 1 && c.tensors[0].name == "all") c.tensors.clear();
}

void read_store(Reader& r, Checkpoint& c, Contents contents) {
  c.coordinator_rng = r.bytes("/rng/coordinator");
  if (r.has("/store/log_starts")) {
    c.store_log_starts = r.dataset<std::int64_t>("/store/log_starts", H5T_NATIVE_INT64);
    // Only a hint where to begin reading: one that is not two entries and their bytes reads the logs whole.
    if (c.store_log_starts.size() != 4 ||
        std::any_of(c.store_log_starts.begin(), c.store_log_starts.end(), [](std::int64_t v) { return v < 0; })) {
      log::debug(r.path(), ": /store/log_starts is not two entries and their bytes; the logs are read whole");
      c.store_log_starts.clear();
    }
  }
  if (contents == Contents::restore && !c.store_log_starts.empty()) {
    c.store_history_offset = static_cast<std::uint64_t>(c.store_log_starts[1]);
    c.span_log_offset = static_cast<std::uint64_t>(c.store_log_starts[3]);
  }
  // Every version shares the logs' segments: a damaged one is left out (and said) rather
  // than taking every version down. The model, the optimizer and the run's position are
  // intact; of the store's history (ended rollouts, resource versions such as the ledger of
  // what was trained) the records it held are lost, and the store keeps their ids as lost.
  c.metrics_jsonl = r.segments("/meta/metrics_jsonl", &c.damaged_logs);
  c.store_tables = r.bytes("/store/tables");
  std::size_t history_skip = 0, span_log_skip = 0;
  try {
    history_skip = r.segments_before("/store/history", c.store_history_offset);
    span_log_skip = r.segments_before("/store/span_log", c.span_log_offset);
  } catch (const StartsDoNotFit& e) {
    // The logs whole, as for no_tensor_data: starts of a version that wrote them whole (LATEST
    // did not read then), or segments before them that are gone (which the whole read names).
    log::debug("reading the store's logs whole: ", e.what());
    c.store_log_starts.clear();
    c.store_history_offset = c.span_log_offset = 0;
    history_skip = span_log_skip = 0;
  }
  c.store_history = r.segments("/store/history", &c.damaged_logs, &c.store_history_lost_bytes, history_skip);
  c.span_log = r.segments("/store/span_log", &c.damaged_logs, nullptr, span_log_skip);
  c.untrained_rollouts = r.dataset<std::int64_t>("/store/untrained_rollouts", H5T_NATIVE_INT64);
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path, Contents contents) {
  Reader r(path);
  Checkpoint c;
  read_meta(r, c);
  read_model(r, c, contents);
  if (contents != Contents::model) read_store(r, c, contents);
  return c;
}

std::vector<std::string> log_segments(const std::string& version_path, const std::string& group) {
  const std::lock_guard<std::recursive_mutex> hdf5(hdf5_mutex());
  return Reader(version_path).segment_names(group);
}

std::string read_log_segment(const std::string& version_path, const std::string& segment) {
  const std::lock_guard<std::recursive_mutex> hdf5(hdf5_mutex());
  return Reader(version_path).bytes(segment);
}

std::uint64_t bytes_read_by_this_thread() {
  std::ifstream io("/proc/thread-self/io");
  std::string key;
  std::uint64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return 0;
}

namespace {

// Values [at, at + count) of `values`, sent by `root` to every rank of `comm`, in calls of at
// most 2^28 values (MPI counts are ints).
void broadcast(std::vector<float>& values, std::size_t at, std::size_t count, int root, MPI_Comm comm) {
  constexpr std::size_t most = std::size_t(1) << 28;
  for (std::size_t done = 0; done < count; done += most)
    MPI_Bcast(values.data() + at + done, static_cast<int>(std::min(most, count - done)), MPI_FLOAT, root, comm);
}

// How a rank's part of a shared read went; every rank learns the worst.
enum Outcome : int { read_ok = 0, damaged = 1, failed = 2 };

// MPI_Allreduce(MPI_MAX) of `values`, the wait for the slowest reader asleep: a rank blocked in
// MPI polls, and where ranks outnumber cores (a workstation) the ranks done first took the CPU
// that the last reader needed to copy and check its share (a restore 3 to 8 times as slow).
void agree_on_max(int* values, int count, MPI_Comm comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_INT, MPI_MAX, comm, &request);
  std::chrono::microseconds sleep{20};
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(2 * sleep, std::chrono::microseconds{1000});
  }
}

// What the rank that first saw the agreed outcome says about it, sent to every rank.
std::string agreed_failure(Outcome mine, Outcome agreed, const std::string& failure, MPI_Comm comm) {
  int me = 0, ranks = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &ranks);
  int speaker = mine == agreed ? me : ranks;
  MPI_Allreduce(MPI_IN_PLACE, &speaker, 1, MPI_INT, MPI_MIN, comm);
  std::uint64_t size = failure.size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, speaker, comm);
  std::string said = failure;
  said.resize(size);
  MPI_Bcast(said.data(), static_cast<int>(size), MPI_CHAR, speaker, comm);
  return said;
}

}  // namespace

Checkpoint read_model_shared(const std::string& path, MPI_Comm comm, SharedReadFigures* figures) {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  const auto start = Clock::now();
  const std::uint64_t bytes_before = bytes_read_by_this_thread();
  int me = 0, ranks = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &ranks);
  Checkpoint c;
  std::vector<std::size_t> offsets;  // of each tensor in the flat vectors
  std::vector<std::vector<std::size_t>> shares;
  Moments moments;
  Outcome outcome = read_ok;
  std::string failure;
  // Every rank reaches the agreement below, whatever happens before it: a rank that left
  // early would leave the others waiting for ever.
  try {
    Reader r(path);
    read_meta(r, c);
    const std::uint64_t total = read_index(r, c);
    offsets = tensor_offsets(c);
    shares = partition_tensors(c.tensors, ranks);
    reserve_model(c, total);
    std::vector<PlannedRead> plan;
    for (std::size_t i : shares[static_cast<std::size_t>(me)]) plan_tensor(r, c, i, offsets[i], moments, plan);
    RestoreHelper helper;
    order_by_place(plan, helper);
    // Then the room of the rest, which the broadcasts fill (pages already in cost little).
    for (std::vector<float>* values : {&c.parameters, &c.exp_avg, &c.exp_avg_sq})
      helper.fault_in(values->data(), total * sizeof(float));
    r.read_planned(plan, helper);
    helper.finish();
    for (std::vector<float>* values : {&c.parameters, &c.exp_avg, &c.exp_avg_sq}) values->resize(total);
  } catch (const CorruptCheckpoint& e) {
    outcome = damaged, failure = e.what();
  } catch (const std::exception& e) {
    outcome = failed, failure = path + ": " + e.what();
  }
  if (figures) {
    figures->bytes_read = bytes_read_by_this_thread() - bytes_before;
    figures->read_seconds = seconds(start);
  }
  int agreed[3] = {outcome, moments.some, moments.missing};
  agree_on_max(agreed, 3, comm);
  if (agreed[0] != read_ok) {
    const std::string why = agreed_failure(outcome, Outcome(agreed[0]), failure, comm);
    if (agreed[0] == damaged) throw CorruptCheckpoint(why);
    throw Error(why);
  }
  if (agreed[1] && agreed[2]) throw CorruptCheckpoint(path + mixed_moments);
  const auto sent = Clock::now();
  for (int q = 0; q < ranks; ++q) {
    const std::vector<std::size_t>& share = shares[static_cast<std::size_t>(q)];
    if (share.empty()) continue;  // runs of tensors: the share is one range of the flat vectors
    const std::size_t at = offsets[share.front()], count = offsets[share.back() + 1] - at;
    broadcast(c.parameters, at, count, q, comm);
    if (agreed[1]) broadcast(c.exp_avg, at, count, q, comm), broadcast(c.exp_avg_sq, at, count, q, comm);
  }
  if (!agreed[1]) c.exp_avg = {}, c.exp_avg_sq = {};
  if (c.tensors.size() == 1 && c.tensors[0].name == "all") c.tensors.clear();
  if (figures) figures->broadcast_seconds = seconds(sent);
  return c;
}

std::optional<std::pair<std::string, Checkpoint>> load_latest(const std::string& dir, const Accept& accept,
                                                              Contents contents) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  // Newest first: a version renamed into place is committed even when a crash came before
  // LATEST named it.
  std::vector<std::int64_t> versions = versions_in(dir);
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    const std::string path = (fs::path(dir) / version_file_name(*it)).string();
    try {
      Checkpoint c = read_checkpoint(path, contents);
      if (accept) accept(path, c);
      return std::make_pair(path, std::move(c));
    } catch (const CorruptCheckpoint& e) {
      log::warn("skipping checkpoint ", path, ": ", e.what());
    }
  }
  if (!versions.empty())
    throw CorruptCheckpoint(log::concat("none of the ", versions.size(), " versions in ", dir,
                                        " restores (see the warnings above); move them aside to start afresh"));
  return std::nullopt;
}

std::vector<std::string> linked_files(const std::string& path) {
  std::set<std::string> linked;
  walk_links(path, nullptr, &linked);
  return {linked.begin(), linked.end()};
}

VersionSizes version_sizes(const std::string& path) {
  std::map<std::string, Held> held;
  walk_links(path, &held, nullptr);
  VersionSizes sizes;
  std::error_code ec;
  sizes.own = fs::file_size(path, ec);
  const std::string me = fs::path(path).filename().string();
  for (const auto& [name, h] : held)
    if (h.file != me) sizes.linked += h.count * kind_size(h.kind);
  return sizes;
}

}  // namespace arclight::ckpt
