#include "arclight/ckpt/checkpoint.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <chrono>
#include <functional>
#include <random>
#include <set>

#include "arclight/core/bytes.hpp"
#include "arclight/core/crc32c.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::ckpt {
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t format_version = 2;

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
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw Error("checkpoint: cannot open " + path + " to fsync");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error("checkpoint: fsync of " + path + " failed");
}

enum class Kind : std::uint8_t { u8, i64, f32, f64 };
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

// One dataset as a rank holds it. Append-only blobs become a group of segments.
struct Blob {
  std::string path;
  Kind kind = Kind::u8;
  const void* data = nullptr;
  std::uint64_t count = 0;
  bool append_only = false;
  std::uint64_t offset = 0;  // append-only: elements before `data` that LATEST's segments hold
};

std::string pack_strings(const std::vector<std::string>& v) {
  std::string packed;  // each a uint32 length and its bytes: simple for any reader
  for (const std::string& s : v) {
    const std::uint32_t n = static_cast<std::uint32_t>(s.size());
    packed.append(reinterpret_cast<const char*>(&n), sizeof n);
    packed += s;
  }
  return packed;
}

std::vector<std::string> unpack_strings(const std::string& packed, const std::string& what) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < packed.size()) {
    std::uint32_t n = 0;
    if (packed.size() - at < sizeof n) throw CorruptCheckpoint(what + " is malformed");
    std::memcpy(&n, packed.data() + at, sizeof n);
    at += sizeof n;
    if (packed.size() - at < n) throw CorruptCheckpoint(what + " is malformed");
    out.push_back(packed.substr(at, n));
    at += n;
  }
  return out;
}

std::vector<TensorInfo> tensors_of(const Checkpoint& c) {
  if (!c.tensors.empty()) return c.tensors;
  return {TensorInfo{"all", c.parameters.size()}};
}

// What this rank writes, as blobs pointing into `c` and into `keep` (packed values; a deque
// keeps them in place as it grows).
std::vector<Blob> blobs_of(const Checkpoint& c, const Part& part, std::deque<std::string>& keep) {
  std::vector<Blob> out;
  auto bytes = [&](const std::string& path, const std::string& s, bool append_only = false, std::uint64_t offset = 0) {
    out.push_back({path, Kind::u8, s.data(), s.size(), append_only, offset});
  };
  auto ints = [&](const std::string& path, const std::vector<std::int64_t>& v) {
    out.push_back({path, Kind::i64, v.data(), v.size(), false, 0});
  };
  if (part.meta_and_store) {
    out.push_back({"/meta/format", Kind::i64, &format_version, 1, false});
    out.push_back({"/meta/step", Kind::i64, &c.step, 1, false});
    out.push_back({"/meta/policy_version", Kind::i64, &c.policy_version, 1, false});
    bytes("/meta/config_toml", c.config_toml);
    bytes("/meta/arclight_version", c.arclight_version);
    out.push_back({"/meta/created", Kind::f64, &c.created, 1, false});
    bytes("/meta/metrics_jsonl", c.metrics_jsonl, true);
    bytes("/rng/coordinator", c.coordinator_rng);
    bytes("/store/tables", c.store_tables);
    bytes("/store/history", c.store_history, true, c.store_history_offset);
    bytes("/store/span_log", c.span_log, true, c.span_log_offset);
    ints("/store/untrained_rollouts", c.untrained_rollouts);
  }
  const std::vector<TensorInfo> tensors = tensors_of(c);
  if (part.model_index) {
    std::vector<std::string> names;
    std::string sizes;
    for (const TensorInfo& t : tensors) {
      names.push_back(t.name);
      const std::int64_t n = static_cast<std::int64_t>(t.size);
      sizes.append(reinterpret_cast<const char*>(&n), sizeof n);
    }
    keep.push_back(pack_strings(names));
    bytes("/model/tensor_names", keep.back());
    keep.push_back(sizes);
    out.push_back({"/model/tensor_sizes", Kind::i64, keep.back().data(), tensors.size(), false});
    ints("/optim/steps", c.optimizer_steps);
  }
  // The flat vectors hold every tensor (all_tensors), or just this part's, one after another.
  std::size_t offset = 0;
  const bool has_moments = !c.exp_avg.empty();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::size_t n = tensors[i].size;
    const bool mine = part.all_tensors || std::find(part.tensors.begin(), part.tensors.end(), i) != part.tensors.end();
    if (!mine) continue;
    if (offset + n > c.parameters.size() ||
        (has_moments && (offset + n > c.exp_avg.size() || offset + n > c.exp_avg_sq.size())))
      throw Error("checkpoint: the flat vectors do not hold tensor " + tensors[i].name);
    const std::string& name = tensors[i].name;
    out.push_back({"/model/parameters/" + name, Kind::f32, c.parameters.data() + offset, n, false});
    out.push_back({"/optim/exp_avg/" + name, Kind::f32, has_moments ? c.exp_avg.data() + offset : nullptr,
                   has_moments ? n : 0, false});
    out.push_back({"/optim/exp_avg_sq/" + name, Kind::f32, has_moments ? c.exp_avg_sq.data() + offset : nullptr,
                   has_moments ? n : 0, false});
    offset += n;
  }
  return out;
}

// A link access list that resolves external links in `dir`, wherever the process runs.
hid_t link_access(const std::string& dir) {
  hid_t lapl = H5Pcreate(H5P_DATASET_ACCESS);
  H5Pset_elink_prefix(lapl, (dir.empty() ? std::string(".") : dir).c_str());
  return lapl;
}

hid_t open_file(const std::string& path) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access list");
  H5Pset_elink_file_cache_size(fapl.id, 16);  // linked parents stay open across datasets
  H5E_BEGIN_TRY { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.id); }
  H5E_END_TRY;
  return -1;
}

// Where a dataset's data lives and what it holds: for the parent's datasets, so that an
// unchanged one becomes a link to the file that holds it.
struct Held {
  std::string file, object;
  Kind kind = Kind::u8;
  std::uint64_t count = 0;
  std::uint32_t crc = 0;
};

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

// A dataset's length, when the file holds that many elements of `size` bytes: a corrupt
// length is caught before anything is allocated for it.
std::uint64_t stored_extent(hid_t set, std::size_t size, const std::string& what) {
  const std::uint64_t count = extent(set, what);
  if (count > 0 && (count > (std::uint64_t(1) << 60) / size || H5Dget_storage_size(set) < count * size))
    throw CorruptCheckpoint(what + ": its length exceeds the bytes stored");
  return count;
}

Kind kind_of(hid_t set) {
  Handle type(H5Dget_type(set), H5Tclose, "dataset type");
  if (H5Tget_class(type.id) == H5T_FLOAT) return H5Tget_size(type.id) == 4 ? Kind::f32 : Kind::f64;
  return H5Tget_size(type.id) == 1 ? Kind::u8 : Kind::i64;
}

// Every dataset of a version file, by path: where its data is held, with its checksum.
struct LinkWalk {
  std::string file_name, dir;
  hid_t file;
  std::map<std::string, Held>* held;
  std::set<std::string>* linked;
};

herr_t visit_link(hid_t, const char* name, const H5L_info_t* info, void* arg) {
  auto* walk = static_cast<LinkWalk*>(arg);
  const std::string path = std::string("/") + name;
  Held h;
  if (info->type == H5L_TYPE_EXTERNAL) {
    std::vector<char> value(info->u.val_size);
    const char* file = nullptr;
    const char* object = nullptr;
    unsigned flags = 0;
    if (H5Lget_val(walk->file, name, value.data(), value.size(), H5P_DEFAULT) < 0 ||
        H5Lunpack_elink_val(value.data(), value.size(), &flags, &file, &object) < 0)
      return -1;
    h.file = file;
    h.object = object;
    if (walk->linked) walk->linked->insert(h.file);
  } else if (info->type == H5L_TYPE_HARD) {
    H5O_info_t o;
    if (H5Oget_info_by_name(walk->file, name, &o, H5P_DEFAULT) < 0) return -1;
    if (o.type != H5O_TYPE_DATASET) return 0;
    h.file = walk->file_name;
    h.object = path;
  } else {
    return 0;
  }
  if (walk->held) {
    Handle lapl(link_access(walk->dir), H5Pclose, "link access");
    hid_t set = -1;
    H5E_BEGIN_TRY { set = H5Dopen2(walk->file, name, lapl.id); }
    H5E_END_TRY;
    if (set < 0) return 0;  // a dangling link: the dataset is written anew
    Handle s(set, H5Dclose, path);
    try {
      h.kind = kind_of(set);
      h.count = extent(set, path);
      h.crc = read_crc(set, path);
    } catch (const CorruptCheckpoint&) {
      return 0;
    }
    (*walk->held)[path] = h;
  }
  return 0;
}

void walk_links(const std::string& path, std::map<std::string, Held>* held, std::set<std::string>* linked) {
  Handle file(open_file(path), H5Fclose, path + ": not a readable HDF5 file (incomplete?)");
  LinkWalk walk{fs::path(path).filename().string(), fs::path(path).parent_path().string(), file.id, held, linked};
  if (H5Lvisit(file.id, H5_INDEX_NAME, H5_ITER_INC, visit_link, &walk) < 0)
    throw CorruptCheckpoint(path + ": its links do not read back");
}

// What a version writes: datasets (data, or a link to the file holding the same bytes).
struct PlanEntry {
  std::string path;
  Kind kind = Kind::u8;
  std::uint64_t count = 0;
  std::uint32_t crc = 0;
  int owner = 0;  // the rank of the write's communicator that writes the data
  std::string link_file, link_object;  // set: an external link instead of data
  std::uint64_t offset = 0;            // an append-only blob's segment: where it starts, in elements
};

void encode_entry(ByteWriter& w, const PlanEntry& e) {
  w.bytes(e.path);
  w.u8(static_cast<std::uint8_t>(e.kind));
  w.u64(e.count);
  w.u32(e.crc);
  w.u32(static_cast<std::uint32_t>(e.owner));
  w.bytes(e.link_file);
  w.bytes(e.link_object);
  w.u64(e.offset);
}

PlanEntry decode_entry(ByteReader& r) {
  PlanEntry e;
  e.path = std::string(r.bytes());
  e.kind = static_cast<Kind>(r.u8());
  e.count = r.u64();
  e.crc = r.u32();
  e.owner = static_cast<int>(r.u32());
  e.link_file = std::string(r.bytes());
  e.link_object = std::string(r.bytes());
  e.offset = r.u64();
  return e;
}

std::string segment_name(std::int64_t version) {
  char name[16];
  std::snprintf(name, sizeof name, "s%08lld", static_cast<long long>(version));
  return name;
}

// One number of a version's meta group (its chain length, its step), or -1 when it does not read.
std::int64_t meta_number(hid_t file, const char* name) {
  hid_t set = -1;
  H5E_BEGIN_TRY { set = H5Dopen2(file, name, H5P_DEFAULT); }
  H5E_END_TRY;
  if (set < 0) return -1;
  Handle s(set, H5Dclose, name);
  std::int64_t value = -1;
  try {
    if (extent(set, name) != 1) return -1;
  } catch (const CorruptCheckpoint&) {
    return -1;
  }
  if (H5Dread(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) < 0) return -1;
  return value;
}


void create_groups(hid_t file, const std::vector<PlanEntry>& entries) {
  std::set<std::string> groups;
  for (const PlanEntry& e : entries)
    for (std::size_t at = e.path.find('/', 1); at != std::string::npos; at = e.path.find('/', at + 1))
      groups.insert(e.path.substr(0, at));
  for (const std::string& g : groups)  // in name order: a group before its children
    Handle(H5Gcreate2(file, g.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "cannot create group " + g);
}

void write_attribute(hid_t set, std::uint32_t crc, const std::string& path) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, path);
  Handle attr(H5Acreate2(set, "crc32c", H5T_NATIVE_UINT32, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, path);
  if (H5Awrite(attr.id, H5T_NATIVE_UINT32, &crc) < 0) throw Error("checkpoint: cannot write the checksum of " + path);
}

// Writes a dataset's data in pieces of at most 4 MB: one large write(2) into the page cache
// was several times slower than the same bytes in pieces here (ext4), and the pieces are
// what dd writes too.
void write_in_pieces(hid_t set, hid_t file_space, Kind kind, std::uint64_t count, const char* data,
                     const std::string& path) {
  const hsize_t piece = (4u << 20) / kind_size(kind);
  if (count <= piece) {
    if (H5Dwrite(set, h5type(kind), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
      throw Error("checkpoint: cannot write " + path);
    return;
  }
  for (hsize_t start = 0; start < count; start += piece) {
    hsize_t n = std::min<hsize_t>(piece, count - start);
    Handle memory(H5Screate_simple(1, &n, nullptr), H5Sclose, path);
    if (H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &start, nullptr, &n, nullptr) < 0 ||
        H5Dwrite(set, h5type(kind), memory.id, file_space, H5P_DEFAULT, data + start * kind_size(kind)) < 0)
      throw Error("checkpoint: cannot write " + path);
  }
}

// Writes one segment of an append-only blob as a file of its own, <dir>/segments/<name>,
// committed (temporary name, fsync, rename) before any version links to it. Returns the
// link target's file name, relative to dir.
std::string write_segment(const std::string& dir, const std::string& name, Kind kind, const void* data,
                          std::uint64_t count, std::uint32_t crc) {
  const fs::path segments = fs::path(dir) / "segments";
  fs::create_directories(segments);
  const std::string final_path = (segments / name).string(), tmp_path = final_path + ".tmp";
  {
    Handle file(H5Fcreate(tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                "checkpoint: cannot create " + tmp_path);
    hsize_t dims[1] = {count};
    Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose, name);
    Handle set(H5Dcreate2(file.id, "/data", h5type(kind), space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
               "checkpoint: cannot create " + final_path);
    write_in_pieces(set.id, space.id, kind, count, static_cast<const char*>(data), final_path);
    write_attribute(set.id, crc, final_path);
  }
  fsync_path(tmp_path, false);
  fs::rename(tmp_path, final_path);
  fsync_path(segments.string(), true);
  return "segments/" + name;
}

// Rank 0's decisions: which datasets link to the parent, which segments are new.
struct Planner {
  std::string dir;
  std::map<std::string, Held> parent;    // the parent's datasets; empty: a full version
  std::map<std::string, Held> segments;  // LATEST's append-only segments, linked even by a full version
  std::int64_t version = 0;
  std::string token;  // in the names of this write's segment files: a name is never reused
  const std::function<std::string(const std::string&)>* whole_log = nullptr;
  std::deque<std::string>* keep = nullptr;
  std::vector<PlanEntry> entries;

  void regular(const std::string& path, Kind kind, std::uint64_t count, std::uint32_t crc, int owner) {
    PlanEntry e{path, kind, count, crc, owner, "", "", 0};
    auto it = parent.find(path);
    if (it != parent.end() && it->second.kind == kind && it->second.count == count && it->second.crc == crc) {
      e.link_file = it->second.file;
      e.link_object = it->second.object;
    }
    entries.push_back(std::move(e));
  }

  // LATEST's segments, linked when they are a prefix of `blob`; the rest as one new segment
  // in a file of its own. Segments never change, so a full version links them too: the log
  // is written once, not once per full version.
  void append_only(Blob blob) {
    const std::size_t size = kind_size(blob.kind);
    std::vector<std::pair<std::string, Held>> segments;
    for (const auto& [path, held] : this->segments)
      if (path.rfind(blob.path + "/s", 0) == 0) segments.emplace_back(path, held);
    std::uint64_t prefix = 0;
    if (blob.offset > 0) {  // the caller says LATEST's segments hold the first blob.offset elements
      for (const auto& [path, held] : segments) prefix += held.count;
      if (prefix != blob.offset) {
        if (!whole_log || !*whole_log)
          throw Error(log::concat("checkpoint: LATEST holds ", prefix, " elements of ", blob.path, ", not ", blob.offset));
        log::warn("checkpoint: LATEST does not hold the first ", blob.offset, " bytes of ", blob.path,
                  "; writing it whole");
        keep->push_back((*whole_log)(blob.path));
        blob.data = keep->back().data();
        blob.count = keep->back().size() / size;
        blob.offset = 0;
      }
      prefix = 0;
    }
    if (blob.offset == 0) {
      bool is_prefix = true;
      for (const auto& [path, held] : segments) {
        if (held.kind != blob.kind || prefix + held.count > blob.count ||
            crc32c(static_cast<const char*>(blob.data) + prefix * size, held.count * size) != held.crc) {
          is_prefix = false;
          break;
        }
        prefix += held.count;
      }
      if (!is_prefix) prefix = 0, segments.clear();
    }
    for (const auto& [path, held] : segments)
      entries.push_back({path, held.kind, held.count, held.crc, 0, held.file, held.object, 0});
    if (blob.count > prefix || segments.empty()) {
      const char* tail = static_cast<const char*>(blob.data) + prefix * size;
      const std::uint64_t count = blob.count - prefix;
      const std::uint32_t crc = crc32c(tail, count * size);
      std::string file_name = blob.path.substr(1);
      std::replace(file_name.begin(), file_name.end(), '/', '.');
      file_name += "." + segment_name(version) + "-" + token + ".h5";
      const std::string file = write_segment(dir, file_name, blob.kind, tail, count, crc);
      entries.push_back({blob.path + "/" + segment_name(version), blob.kind, count, crc, 0, file, "/data", 0});
    }
  }
};

// A token that makes this write's segment file names its own.
std::string unique_token() {
  std::random_device device;
  const std::uint64_t x = (std::uint64_t(device()) << 32) ^ device() ^
                          std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(x));
  return text;
}

std::vector<std::int64_t> versions_in(const std::string& dir) {
  static const std::regex name{R"(v([0-9]{8})\.h5)"};
  std::vector<std::int64_t> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (std::regex_match(file, m, name)) out.push_back(std::stoll(m[1]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

class Reader {
 public:
  explicit Reader(const std::string& path)
      : path_(path), file_(open_file(path), H5Fclose, path + ": not a readable HDF5 file (incomplete?)"),
        lapl_(link_access(fs::path(path).parent_path().string()), H5Pclose, "link access") {
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

  bool has(const std::string& name) const { return H5Lexists(file_.id, name.c_str(), H5P_DEFAULT) > 0; }

  template <class T>
  std::vector<T> dataset(const std::string& name, hid_t type) {
    std::vector<T> out;
    append(name, type, out);
    return out;
  }
  // Reads a dataset onto the end of `out` (no temporary copy), checking its checksum.
  template <class T>
  void append(const std::string& name, hid_t type, std::vector<T>& out) {
    if (!has(name)) throw CorruptCheckpoint(path_ + ": no dataset " + name);
    hid_t id = -1;
    H5E_BEGIN_TRY { id = H5Dopen2(file_.id, name.c_str(), lapl_.id); }
    H5E_END_TRY;
    Handle set(id, H5Dclose, path_ + ": cannot open " + name + " (a linked version is missing?)");
    const std::size_t count = stored_extent(set.id, sizeof(T), path_ + ": " + name), at = out.size();
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
  // An append-only blob: its segments, in name (= version) order.
  std::string segments(const std::string& group) {
    if (!has(group)) throw CorruptCheckpoint(path_ + ": no group " + group);
    Handle g(H5Gopen2(file_.id, group.c_str(), H5P_DEFAULT), H5Gclose, path_ + ": cannot open " + group);
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* out) -> herr_t {
      static_cast<std::vector<std::string>*>(out)->push_back(name);
      return 0;
    };
    if (H5Literate(g.id, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names) < 0)
      throw CorruptCheckpoint(path_ + ": cannot list " + group);
    std::string out;
    for (const std::string& n : names) out += bytes(group + "/" + n);
    return out;
  }

 private:
  std::string path_;
  Handle file_;
  Handle lapl_;
  std::map<std::string, std::pair<std::uint64_t, std::uint32_t>> linked_;  // length and checksum a link must find
};

}  // namespace

std::string latest_version(const std::string& dir) {
  std::string name;
  if (std::ifstream latest{fs::path(dir) / "LATEST"}) std::getline(latest, name);
  return name;
}

std::string version_file_name(std::int64_t version) {
  char name[32];
  std::snprintf(name, sizeof name, "v%08lld.h5", static_cast<long long>(version));
  return name;
}

Checkpoint pack_tensors(const Checkpoint& whole, const std::vector<std::size_t>& tensors) {
  Checkpoint part = whole;
  part.parameters.clear();
  part.exp_avg.clear();
  part.exp_avg_sq.clear();
  std::vector<std::size_t> offsets{0};
  for (const TensorInfo& t : whole.tensors) offsets.push_back(offsets.back() + t.size);
  for (std::size_t i : tensors) {
    const std::size_t from = offsets.at(i), to = offsets.at(i + 1);
    part.parameters.insert(part.parameters.end(), whole.parameters.begin() + from, whole.parameters.begin() + to);
    if (whole.exp_avg.empty()) continue;
    part.exp_avg.insert(part.exp_avg.end(), whole.exp_avg.begin() + from, whole.exp_avg.begin() + to);
    part.exp_avg_sq.insert(part.exp_avg_sq.end(), whole.exp_avg_sq.begin() + from, whole.exp_avg_sq.begin() + to);
  }
  return part;
}

std::vector<std::vector<std::size_t>> partition_tensors(const std::vector<TensorInfo>& tensors, int ranks) {
  std::vector<std::vector<std::size_t>> out(static_cast<std::size_t>(std::max(1, ranks)));
  std::size_t total = 0;
  for (const TensorInfo& t : tensors) total += t.size;
  std::size_t done = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    // The tensor goes to the rank whose equal share its midpoint falls in.
    const double middle = double(done) + double(tensors[i].size) / 2;
    std::size_t r = total == 0 ? 0 : static_cast<std::size_t>(middle * double(out.size()) / double(total));
    out[std::min(r, out.size() - 1)].push_back(i);
    done += tensors[i].size;
  }
  return out;
}

namespace {

// LATEST's bytes: the file name, then a newline; written under a temporary name, fsynced, renamed.
void commit_latest(const std::string& dir, const std::string& name) {
  const std::string latest_tmp = (fs::path(dir) / "LATEST.tmp").string();
  {
    std::ofstream latest(latest_tmp, std::ios::trunc);
    latest << name << "\n";
    latest.close();
    if (!latest) throw Error("checkpoint: cannot write " + latest_tmp);
  }
  fsync_path(latest_tmp, false);
  fs::rename(latest_tmp, fs::path(dir) / "LATEST");
  fsync_path(dir, true);
}

std::string write_version(const std::string& dir, std::int64_t version, const Checkpoint& c,
                          const WriteOptions& options) {
  const bool parallel = options.comm != MPI_COMM_NULL;
  int me = 0, ranks = 1;
  if (parallel) {
    MPI_Comm_rank(options.comm, &me);
    MPI_Comm_size(options.comm, &ranks);
  }
  const std::string final_path = (fs::path(dir) / version_file_name(version)).string();
  const std::string tmp_path = final_path + ".tmp";
  std::deque<std::string> keep;
  std::vector<Blob> blobs = blobs_of(c, options.part, keep);

  // 1. What every rank holds: path, kind, count and checksum, gathered at rank 0.
  std::string mine;
  {
    ByteWriter w(mine);
    for (const Blob& b : blobs) {
      if (b.append_only) continue;  // rank 0's, planned there
      w.bytes(b.path);
      w.u8(static_cast<std::uint8_t>(b.kind));
      w.u64(b.count);
      w.u32(crc32c(b.data, b.count * kind_size(b.kind)));
    }
  }
  std::vector<std::string> held_by(static_cast<std::size_t>(ranks));
  if (parallel) {
    int size = static_cast<int>(mine.size());
    std::vector<int> sizes(static_cast<std::size_t>(ranks)), offsets(static_cast<std::size_t>(ranks));
    MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, options.comm);
    std::string all;
    if (me == 0) {
      int total = 0;
      for (int r = 0; r < ranks; ++r) offsets[r] = total, total += sizes[r];
      all.resize(static_cast<std::size_t>(total));
    }
    MPI_Gatherv(mine.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, 0, options.comm);
    if (me == 0)
      for (int r = 0; r < ranks; ++r) held_by[r] = all.substr(offsets[r], sizes[r]);
  } else {
    held_by[0] = mine;
  }

  // 2. Rank 0 plans: full or incremental on LATEST, links for what did not change.
  std::string plan;
  if (me == 0) {
    fs::create_directories(dir);
    Planner planner;
    planner.dir = dir;
    planner.version = version;
    planner.token = unique_token();
    planner.whole_log = &options.whole_log;
    planner.keep = &keep;
    std::string parent_name = latest_version(dir);
    std::int64_t chain = 0;
    if (!parent_name.empty()) {
      const std::string parent_path = (fs::path(dir) / parent_name).string();
      try {
        std::int64_t parent_chain = -1, parent_step = -1;
        {
          Handle f(open_file(parent_path), H5Fclose, parent_path);
          parent_chain = meta_number(f.id, "/meta/chain");
          parent_step = meta_number(f.id, "/meta/step");
        }
        // A parent comes before this version: never link to the file that this one replaces.
        if (parent_step < 0 || parent_step >= version)
          throw CorruptCheckpoint(parent_path + " is not an earlier version (step " + std::to_string(parent_step) + ")");
        walk_links(parent_path, &planner.segments, nullptr);
        if (parent_chain >= 0 && parent_chain + 1 < options.full_every) {
          planner.parent = planner.segments;
          chain = parent_chain + 1;
        }
      } catch (const CorruptCheckpoint& e) {
        log::warn("checkpoint: ", e.what(), "; writing a full version");
        planner.segments.clear();
      }
    }
    if (chain == 0) parent_name.clear(), planner.parent.clear();
    for (int r = 0; r < ranks; ++r) {
      ByteReader in(held_by[r]);
      while (in.remaining() > 0) {
        std::string path(in.bytes());
        const Kind kind = static_cast<Kind>(in.u8());
        const std::uint64_t count = in.u64();
        planner.regular(path, kind, count, in.u32(), r);
      }
    }
    for (const Blob& b : blobs)
      if (b.append_only) planner.append_only(b);
    keep.push_back(parent_name);
    planner.entries.push_back({"/meta/parent", Kind::u8, parent_name.size(), crc32c(parent_name.data(), parent_name.size()), 0, "", "", 0});
    planner.entries.push_back({"/meta/chain", Kind::i64, 1, crc32c(&chain, sizeof chain), 0, "", "", 0});
    blobs.push_back({"/meta/parent", Kind::u8, keep.back().data(), parent_name.size(), false});
    keep.emplace_back(reinterpret_cast<const char*>(&chain), sizeof chain);
    blobs.push_back({"/meta/chain", Kind::i64, keep.back().data(), 1, false});
    // What each link must find (length and checksum): a linked file that was replaced since
    // fails the read, even though its own checksums match.
    std::string links;
    {
      ByteWriter lw(links);
      for (const PlanEntry& e : planner.entries) {
        if (e.link_file.empty()) continue;
        lw.bytes(e.path);
        lw.u64(e.count);
        lw.u32(e.crc);
      }
    }
    keep.push_back(links);
    planner.entries.push_back({"/meta/links", Kind::u8, links.size(), crc32c(links.data(), links.size()), 0, "", "", 0});
    blobs.push_back({"/meta/links", Kind::u8, keep.back().data(), links.size(), false});
    ByteWriter w(plan);
    for (const PlanEntry& e : planner.entries) encode_entry(w, e);
  }
  if (parallel) {
    std::uint64_t size = plan.size();
    MPI_Bcast(&size, 1, MPI_UINT64_T, 0, options.comm);
    plan.resize(size);
    MPI_Bcast(plan.data(), static_cast<int>(size), MPI_BYTE, 0, options.comm);
  }
  std::vector<PlanEntry> entries;
  for (ByteReader in(plan); in.remaining() > 0;) entries.push_back(decode_entry(in));

  // 3. Every rank: create the file and its datasets together, write what it holds.
  std::map<std::string, const Blob*> by_path;
  for (const Blob& b : blobs) by_path[b.path] = &b;
  {
    Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access list");
    if (parallel) {
      H5Pset_fapl_mpio(fapl.id, options.comm, MPI_INFO_NULL);
      H5Pset_all_coll_metadata_ops(fapl.id, true);
      H5Pset_coll_metadata_write(fapl.id, true);
    }
    Handle file(H5Fcreate(tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id), H5Fclose,
                "checkpoint: cannot create " + tmp_path);
    create_groups(file.id, entries);
    for (const PlanEntry& e : entries) {
      if (!e.link_file.empty()) {
        if (H5Lcreate_external(e.link_file.c_str(), e.link_object.c_str(), file.id, e.path.c_str(), H5P_DEFAULT,
                               H5P_DEFAULT) < 0)
          throw Error("checkpoint: cannot link " + e.path);
        continue;
      }
      hsize_t dims[1] = {e.count};
      Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose, e.path);
      Handle set(H5Dcreate2(file.id, e.path.c_str(), h5type(e.kind), space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 H5Dclose, "checkpoint: cannot create " + e.path);
      if (e.owner == me && e.count > 0)
        write_in_pieces(set.id, space.id, e.kind, e.count, static_cast<const char*>(by_path.at(e.path)->data), e.path);
      write_attribute(set.id, e.crc, e.path);
    }
    if (options.before_close && me == 0) options.before_close();
    if (parallel && H5Fflush(file.id, H5F_SCOPE_GLOBAL) < 0) throw Error("checkpoint: cannot flush " + tmp_path);
    const hid_t id = file.id;
    file.id = -1;
    if (H5Fclose(id) < 0) throw Error("checkpoint: cannot close " + tmp_path);
  }
  // Every rank's bytes are on disk (each rank fsyncs what it wrote, from its own node) before
  // rank 0 commits.
  fsync_path(tmp_path, false);
  if (parallel) MPI_Barrier(options.comm);
  if (me != 0) return final_path;

  // 4. Commit: the file's bytes, then its name, then LATEST; each survives a crash of the next.
  fs::rename(tmp_path, final_path);
  fsync_path(dir, true);
  commit_latest(dir, version_file_name(version));
  return final_path;
}

}  // namespace

std::string write_checkpoint(const std::string& dir, std::int64_t version, const Checkpoint& c,
                             const WriteOptions& options) {
  if (options.comm == MPI_COMM_NULL) return write_version(dir, version, c, options);
  // A parallel write is collective: a rank that fails alone would leave the others waiting
  // in a collective call, so a failure ends the job here, with one message.
  try {
    return write_version(dir, version, c, options);
  } catch (const std::exception& e) {
    log::error("checkpoint: writing version ", version, " failed: ", e.what());
    MPI_Abort(MPI_COMM_WORLD, exit_failure);
  }
  return {};
}

void set_latest(const std::string& dir, const std::string& version_file) { commit_latest(dir, version_file); }

Checkpoint read_checkpoint(const std::string& path, Contents contents) {
  Reader r(path);
  Checkpoint c;
  if (!r.has("/meta/format") || r.one("/meta/format") != format_version)
    throw CorruptCheckpoint(path + ": not a checkpoint of format " + std::to_string(format_version));
  c.step = r.one("/meta/step");
  c.policy_version = r.one("/meta/policy_version");
  c.config_toml = r.bytes("/meta/config_toml");
  c.arclight_version = r.bytes("/meta/arclight_version");
  auto created = r.dataset<double>("/meta/created", H5T_NATIVE_DOUBLE);
  c.created = created.empty() ? 0 : created[0];
  c.parent = r.bytes("/meta/parent");
  c.chain = r.one("/meta/chain");
  const std::vector<std::string> names = unpack_strings(r.bytes("/model/tensor_names"), path + ": /model/tensor_names");
  const std::vector<std::int64_t> sizes = r.dataset<std::int64_t>("/model/tensor_sizes", H5T_NATIVE_INT64);
  if (names.size() != sizes.size()) throw CorruptCheckpoint(path + ": tensor names and sizes differ in number");
  std::uint64_t total = 0;
  for (std::int64_t n : sizes) {
    if (n < 0 || std::uint64_t(n) > (std::uint64_t(1) << 40)) throw CorruptCheckpoint(path + ": a tensor size out of range");
    total += std::uint64_t(n);
  }
  // Room for every tensor at once (address space only: the reads below check each length
  // against the bytes stored), so that the reads go straight into place.
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
  if (contents == Contents::model) return c;
  c.coordinator_rng = r.bytes("/rng/coordinator");
  c.metrics_jsonl = r.segments("/meta/metrics_jsonl");
  c.store_tables = r.bytes("/store/tables");
  c.store_history = r.segments("/store/history");
  c.span_log = r.segments("/store/span_log");
  c.untrained_rollouts = r.dataset<std::int64_t>("/store/untrained_rollouts", H5T_NATIVE_INT64);
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

// ".superseded-<UTC time>-<token>": a name used once.
std::string superseded_suffix() {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return std::string(".superseded-") + stamp + "-" + unique_token().substr(0, 8);
}

std::string supersede_newer_versions(const std::string& dir, std::int64_t step) {
  std::vector<std::string> moved;
  const std::string suffix = superseded_suffix();
  std::vector<std::int64_t> versions = versions_in(dir);
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {  // newest first: a crash halfway keeps the order
    if (*it <= step) continue;
    const fs::path from = fs::path(dir) / version_file_name(*it);
    std::error_code ec;
    fs::rename(from, from.string() + suffix, ec);
    if (ec) throw Error("checkpoint: cannot set " + from.string() + " aside: " + ec.message());
    moved.push_back(from.filename().string());
  }
  if (!moved.empty()) fsync_path(dir, true);
  std::string text;
  for (const std::string& m : moved) text += (text.empty() ? "" : " ") + m;
  return text;
}

std::string supersede_directory(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || (versions_in(dir).empty() && latest_version(dir).empty())) return {};
  std::string to = fs::path(dir).lexically_normal().string();
  if (!to.empty() && to.back() == '/') to.pop_back();
  to += superseded_suffix();
  fs::rename(dir, to, ec);
  if (ec) throw Error("checkpoint: cannot set " + dir + " aside: " + ec.message());
  return to;
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

std::vector<std::string> apply_retention(const std::string& dir, int keep) {
  std::vector<std::string> removed;
  if (keep <= 0) return removed;
  std::vector<std::int64_t> versions = versions_in(dir);
  if (versions.size() <= static_cast<std::size_t>(keep)) return removed;
  // The newest `keep` versions, LATEST, and every file they link to (links point at the file
  // that holds the data, so one level is the whole chain).
  std::vector<std::string> kept_versions;
  for (std::size_t i = versions.size() - static_cast<std::size_t>(keep); i < versions.size(); ++i)
    kept_versions.push_back(version_file_name(versions[i]));
  const std::string latest = latest_version(dir);
  if (!latest.empty()) kept_versions.push_back(latest);
  std::set<std::string> kept;
  for (const std::string& name : kept_versions) {
    if (!fs::exists(fs::path(dir) / name)) continue;
    kept.insert(name);
    try {
      for (const std::string& f : linked_files((fs::path(dir) / name).string())) kept.insert(f);
    } catch (const CorruptCheckpoint& e) {
      log::warn("retention: ", e.what(), "; keeping every older version");
      return removed;
    }
  }
  const std::int64_t newest = versions.back();
  for (std::int64_t v : versions) {
    const std::string name = version_file_name(v);
    if (kept.count(name)) continue;
    std::error_code ec;
    const std::string p = (fs::path(dir) / name).string();
    if (fs::remove(p, ec)) removed.push_back(p);
  }
  // Segment files no kept version links to (a rewritten log, or a write that never committed).
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(dir) / "segments", ec)) {
    const std::string name = "segments/" + e.path().filename().string();
    if (kept.count(name)) continue;
    std::error_code rm;
    if (fs::remove(e.path(), rm)) removed.push_back(e.path().string());
  }
  // Leftovers of writes that never committed (a crash mid-write), older than the newest version.
  static const std::regex tmp_name{R"(v([0-9]{8})\.h5\.tmp)"};
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (std::regex_match(file, m, tmp_name) && std::stoll(m[1]) < newest) {
      std::error_code rm;
      if (fs::remove(e.path(), rm)) removed.push_back(e.path().string());
    }
  }
  return removed;
}

}  // namespace arclight::ckpt
