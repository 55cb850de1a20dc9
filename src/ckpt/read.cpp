// Reading a version back, every checksum verified, and restoring the newest one that reads.
#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/bytes.hpp"
#include "arclight/core/crc32c.hpp"
#include "arclight/core/log.hpp"
#include "directory.hpp"
#include "hdf5_io.hpp"
#include "plan.hpp"

namespace arclight::ckpt {
namespace fs = std::filesystem;

namespace {

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
  std::uint64_t take_stored(hid_t set, const std::string& name, std::size_t size, ByteRanges& ranges) {
    StoredBytes where;
    const std::uint64_t count = stored_extent(set, size, path_ + ": " + name, &where);
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
    T* data = out.data() + at;
    if (count > 0 && H5Dread(set.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
      throw CorruptCheckpoint(path_ + ": cannot read " + name);
    const std::uint32_t crc = crc32c(data, count * sizeof(T));
    if (read_crc(set.id, path_ + ": " + name) != crc) throw CorruptCheckpoint(path_ + ": checksum mismatch in " + name);
    auto link = linked_.find(name);
    if (link != linked_.end() && (link->second.first != count || link->second.second != crc))
      throw CorruptCheckpoint(path_ + ": " + name + " links to data that changed since this version was written");
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
  // An append-only blob: its segments, in name (= version) order. With `damaged` (a log a
  // restore can do without), a segment that does not read is left out and named there.
  std::string segments(const std::string& group, std::vector<std::string>* damaged = nullptr) {
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
    std::string out;
    for (const std::string& n : names) {
      const std::string name = group + "/" + n;
      if (!damaged) {
        out += bytes(name);
        continue;
      }
      try {
        out += bytes(name);
      } catch (const CorruptCheckpoint& e) {
        damaged->push_back(file_of(name) + " (" + e.what() + ")");
      }
    }
    return out;
  }

 private:
  std::string path_;
  Handle file_;
  LinkPolicy links_;
  ByteRanges read_;                                                        // every byte is read once
  std::map<std::string, std::pair<std::uint64_t, std::uint32_t>> linked_;  // length and checksum a link must find
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

// The model and the optimizer: every tensor read and checked; its values kept unless
// no_tensor_data.
void read_model(Reader& r, Checkpoint& c, Contents contents) {
  const std::string& path = r.path();
  const std::vector<std::string> names = unpack_strings(r.bytes("/model/tensor_names"), path + ": /model/tensor_names");
  const std::vector<std::int64_t> sizes = r.dataset<std::int64_t>("/model/tensor_sizes", H5T_NATIVE_INT64);
  if (names.size() != sizes.size()) throw CorruptCheckpoint(path + ": tensor names and sizes differ in number");
  const std::uint64_t total = checked_total(r, names, sizes);
  // Room for every tensor at once, so that the reads go straight into place.
  const bool keep_values = contents != Contents::no_tensor_data;
  if (keep_values) {  // a failure here is this machine's memory, not the file: it is not skipped as corrupt
    c.parameters.reserve(total);
    c.exp_avg.reserve(total);
    c.exp_avg_sq.reserve(total);
  }
  std::vector<float> scratch;  // no_tensor_data: each tensor read and checked here, then dropped
  for (std::size_t i = 0; i < names.size(); ++i) {
    c.tensors.push_back({names[i], static_cast<std::size_t>(sizes[i])});
    auto append = [&](std::vector<float>& values, const std::string& group, bool may_be_empty) {
      std::vector<float>& to = keep_values ? values : scratch;
      const std::size_t before = to.size();
      r.append(group + names[i], H5T_NATIVE_FLOAT, to);
      const std::size_t got = to.size() - before;
      if (got != c.tensors.back().size && !(may_be_empty && got == 0))
        throw CorruptCheckpoint(path + ": " + group + names[i] + " has the wrong size");
      if (!keep_values) scratch.clear();
    };
    append(c.parameters, "/model/parameters/", false);
    append(c.exp_avg, "/optim/exp_avg/", true);
    append(c.exp_avg_sq, "/optim/exp_avg_sq/", true);
  }
  if (c.tensors.size() == 1 && c.tensors[0].name == "all") c.tensors.clear();
  c.optimizer_steps = r.dataset<std::int64_t>("/optim/steps", H5T_NATIVE_INT64);
  if (keep_values && !c.exp_avg.empty() &&
      (c.exp_avg.size() != c.parameters.size() || c.exp_avg_sq.size() != c.parameters.size()))
    throw CorruptCheckpoint(path + ": optimizer state and parameters differ in size");
}

void read_store(Reader& r, Checkpoint& c) {
  c.coordinator_rng = r.bytes("/rng/coordinator");
  // The metrics and the span log are a record, not the run's state: a damaged segment of
  // theirs is left out (and said) rather than taking every version that shares it down. The
  // history holds the store's ended rollouts and the ledger of what was trained: not optional.
  c.metrics_jsonl = r.segments("/meta/metrics_jsonl", &c.damaged_logs);
  c.store_tables = r.bytes("/store/tables");
  c.store_history = r.segments("/store/history");
  c.span_log = r.segments("/store/span_log", &c.damaged_logs);
  c.untrained_rollouts = r.dataset<std::int64_t>("/store/untrained_rollouts", H5T_NATIVE_INT64);
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path, Contents contents) {
  Reader r(path);
  Checkpoint c;
  read_meta(r, c);
  read_model(r, c, contents);
  if (contents != Contents::model) read_store(r, c);
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
