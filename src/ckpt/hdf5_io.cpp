#include "hdf5_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace arclight::ckpt {
namespace fs = std::filesystem;

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw Error("checkpoint: cannot open " + path + " to fsync");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error("checkpoint: fsync of " + path + " failed");
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

namespace {

// What H5Lvisit hands each link of a version file.
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

}  // namespace

void walk_links(const std::string& path, std::map<std::string, Held>* held, std::set<std::string>* linked) {
  Handle file(open_file(path), H5Fclose, path + ": not a readable HDF5 file (incomplete?)");
  LinkWalk walk{fs::path(path).filename().string(), fs::path(path).parent_path().string(), file.id, held, linked};
  if (H5Lvisit(file.id, H5_INDEX_NAME, H5_ITER_INC, visit_link, &walk) < 0)
    throw CorruptCheckpoint(path + ": its links do not read back");
}

void write_attribute(hid_t set, std::uint32_t crc, const std::string& path) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, path);
  Handle attr(H5Acreate2(set, "crc32c", H5T_NATIVE_UINT32, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, path);
  if (H5Awrite(attr.id, H5T_NATIVE_UINT32, &crc) < 0) throw Error("checkpoint: cannot write the checksum of " + path);
}

// In pieces: one large write(2) into the page cache was several times slower than the same
// bytes in pieces here (ext4), and the pieces are what dd writes too.
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

}  // namespace arclight::ckpt
