#include "arclight/ckpt/checkpoint.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>

#include "arclight/core/crc32c.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::ckpt {
namespace fs = std::filesystem;

namespace {

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

class Writer {
 public:
  explicit Writer(const std::string& path)
      : file_(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose, "cannot create " + path) {}
  void group(const char* name) { Handle g(H5Gcreate2(file_.id, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, name); }
  template <class T>
  void dataset(const std::string& name, const T* data, std::size_t count, hid_t type) {
    hsize_t dims[1] = {count};
    Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose, name);
    Handle set(H5Dcreate2(file_.id, name.c_str(), type, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose, name);
    if (count > 0 && H5Dwrite(set.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) throw Error("cannot write " + name);
    // The checksum of the dataset's bytes, as an attribute: read back and compared on restore.
    const std::uint32_t crc = crc32c(data, count * sizeof(T));
    Handle aspace(H5Screate(H5S_SCALAR), H5Sclose, name);
    Handle attr(H5Acreate2(set.id, "crc32c", H5T_NATIVE_UINT32, aspace.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, name);
    H5Awrite(attr.id, H5T_NATIVE_UINT32, &crc);
  }
  void bytes(const std::string& name, const std::string& s) { dataset(name, s.data(), s.size(), H5T_NATIVE_UINT8); }
  void floats(const std::string& name, const std::vector<float>& v) { dataset(name, v.data(), v.size(), H5T_NATIVE_FLOAT); }
  void ints(const std::string& name, const std::vector<std::int64_t>& v) { dataset(name, v.data(), v.size(), H5T_NATIVE_INT64); }
  void strings(const std::string& name, const std::vector<std::string>& v) {
    // Length-prefixed, in one byte dataset: simple for any reader.
    std::string packed;
    for (const std::string& s : v) {
      const std::uint32_t n = static_cast<std::uint32_t>(s.size());
      packed.append(reinterpret_cast<const char*>(&n), sizeof n);
      packed += s;
    }
    bytes(name, packed);
  }
  void close() {
    H5Fflush(file_.id, H5F_SCOPE_GLOBAL);
    H5Fclose(file_.id);
    file_.id = -1;
  }

 private:
  Handle file_;
};

class Reader {
 public:
  explicit Reader(const std::string& path)
      : path_(path), file_(open(path), H5Fclose, path + ": not a readable HDF5 file (incomplete?)") {}
  template <class T>
  std::vector<T> dataset(const std::string& name, hid_t type) {
    if (H5Lexists(file_.id, name.c_str(), H5P_DEFAULT) <= 0) throw CorruptCheckpoint(path_ + ": no dataset " + name);
    Handle set(H5Dopen2(file_.id, name.c_str(), H5P_DEFAULT), H5Dclose, path_ + ": cannot open " + name);
    Handle space(H5Dget_space(set.id), H5Sclose, name);
    hsize_t dims[1] = {0};
    if (H5Sget_simple_extent_ndims(space.id) != 1) throw CorruptCheckpoint(path_ + ": " + name + " is not 1-D");
    H5Sget_simple_extent_dims(space.id, dims, nullptr);
    std::vector<T> out(dims[0]);
    if (dims[0] > 0 && H5Dread(set.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
      throw CorruptCheckpoint(path_ + ": cannot read " + name);
    std::uint32_t stored = 0;
    Handle attr(H5Aopen(set.id, "crc32c", H5P_DEFAULT), H5Aclose, path_ + ": " + name + " has no checksum");
    H5Aread(attr.id, H5T_NATIVE_UINT32, &stored);
    if (stored != crc32c(out.data(), out.size() * sizeof(T)))
      throw CorruptCheckpoint(path_ + ": checksum mismatch in " + name);
    return out;
  }
  std::string bytes(const std::string& name) {
    auto v = dataset<char>(name, H5T_NATIVE_UINT8);
    return std::string(v.begin(), v.end());
  }
  std::vector<std::string> strings(const std::string& name) {
    std::string packed = bytes(name);
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at < packed.size()) {
      std::uint32_t n = 0;
      if (packed.size() - at < sizeof n) throw CorruptCheckpoint(path_ + ": " + name + " is malformed");
      std::memcpy(&n, packed.data() + at, sizeof n);
      at += sizeof n;
      if (packed.size() - at < n) throw CorruptCheckpoint(path_ + ": " + name + " is malformed");
      out.push_back(packed.substr(at, n));
      at += n;
    }
    return out;
  }

 private:
  static hid_t open(const std::string& path) {
    H5E_BEGIN_TRY { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
    H5E_END_TRY;
    return -1;
  }
  std::string path_;
  Handle file_;
};

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

}  // namespace

std::string version_file_name(std::int64_t version) {
  char name[32];
  std::snprintf(name, sizeof name, "v%08lld.h5", static_cast<long long>(version));
  return name;
}

std::string write_checkpoint(const std::string& dir, std::int64_t version, const Checkpoint& c) {
  fs::create_directories(dir);
  const std::string final_path = (fs::path(dir) / version_file_name(version)).string();
  const std::string tmp_path = final_path + ".tmp";
  {
    Writer w(tmp_path);
    for (const char* g : {"/meta", "/model", "/optim", "/rng", "/store"}) w.group(g);
    w.ints("/meta/step", {c.step});
    w.ints("/meta/policy_version", {c.policy_version});
    w.bytes("/meta/config_toml", c.config_toml);
    w.bytes("/meta/arclight_version", c.arclight_version);
    w.dataset("/meta/created", &c.created, 1, H5T_NATIVE_DOUBLE);
    w.floats("/model/parameters", c.parameters);
    w.floats("/optim/exp_avg", c.exp_avg);
    w.floats("/optim/exp_avg_sq", c.exp_avg_sq);
    w.ints("/optim/steps", c.optimizer_steps);
    w.bytes("/rng/coordinator", c.coordinator_rng);
    w.bytes("/meta/metrics_jsonl", c.metrics_jsonl);
    w.strings("/store/policy_resources", c.policy_resources);
    w.ints("/store/statistics", c.store_statistics);
    w.close();
  }
  // Commit: the file's bytes, then its name, then LATEST; each step survives a crash of the next.
  fsync_path(tmp_path, false);
  fs::rename(tmp_path, final_path);
  fsync_path(dir, true);
  const std::string latest_tmp = (fs::path(dir) / "LATEST.tmp").string();
  {
    std::ofstream latest(latest_tmp, std::ios::trunc);
    latest << version_file_name(version) << "\n";
    if (!latest) throw Error("checkpoint: cannot write " + latest_tmp);
  }
  fsync_path(latest_tmp, false);
  fs::rename(latest_tmp, fs::path(dir) / "LATEST");
  fsync_path(dir, true);
  return final_path;
}

Checkpoint read_checkpoint(const std::string& path) {
  Reader r(path);
  Checkpoint c;
  auto one = [&](const char* name) {
    auto v = r.dataset<std::int64_t>(name, H5T_NATIVE_INT64);
    if (v.size() != 1) throw CorruptCheckpoint(path + ": " + name + " is not one number");
    return v[0];
  };
  c.step = one("/meta/step");
  c.policy_version = one("/meta/policy_version");
  c.config_toml = r.bytes("/meta/config_toml");
  c.arclight_version = r.bytes("/meta/arclight_version");
  auto created = r.dataset<double>("/meta/created", H5T_NATIVE_DOUBLE);
  c.created = created.empty() ? 0 : created[0];
  c.parameters = r.dataset<float>("/model/parameters", H5T_NATIVE_FLOAT);
  c.exp_avg = r.dataset<float>("/optim/exp_avg", H5T_NATIVE_FLOAT);
  c.exp_avg_sq = r.dataset<float>("/optim/exp_avg_sq", H5T_NATIVE_FLOAT);
  c.optimizer_steps = r.dataset<std::int64_t>("/optim/steps", H5T_NATIVE_INT64);
  c.coordinator_rng = r.bytes("/rng/coordinator");
  c.metrics_jsonl = r.bytes("/meta/metrics_jsonl");
  c.policy_resources = r.strings("/store/policy_resources");
  c.store_statistics = r.dataset<std::int64_t>("/store/statistics", H5T_NATIVE_INT64);
  if (!c.exp_avg.empty() && (c.exp_avg.size() != c.parameters.size() || c.exp_avg_sq.size() != c.parameters.size()))
    throw CorruptCheckpoint(path + ": optimizer state and parameters differ in size");
  return c;
}

std::optional<std::pair<std::string, Checkpoint>> load_latest(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::vector<std::string> candidates;
  if (std::ifstream latest{fs::path(dir) / "LATEST"}) {
    std::string name;
    std::getline(latest, name);
    if (!name.empty()) candidates.push_back((fs::path(dir) / name).string());
  }
  std::vector<std::int64_t> versions = versions_in(dir);
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    std::string p = (fs::path(dir) / version_file_name(*it)).string();
    if (std::find(candidates.begin(), candidates.end(), p) == candidates.end()) candidates.push_back(p);
  }
  for (const std::string& path : candidates) {
    try {
      return std::make_pair(path, read_checkpoint(path));
    } catch (const CorruptCheckpoint& e) {
      log::warn("skipping checkpoint ", path, ": ", e.what());
    }
  }
  return std::nullopt;
}

std::vector<std::string> apply_retention(const std::string& dir, int keep) {
  std::vector<std::string> removed;
  if (keep <= 0) return removed;
  std::vector<std::int64_t> versions = versions_in(dir);
  // Full versions link to nothing, so any older one may go.
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < versions.size(); ++i) {
    const std::string p = (fs::path(dir) / version_file_name(versions[i])).string();
    std::error_code ec;
    if (fs::remove(p, ec)) removed.push_back(p);
  }
  return removed;
}

}  // namespace arclight::ckpt
