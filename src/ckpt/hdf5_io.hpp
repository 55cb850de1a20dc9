#pragma once
// The mechanism of checkpoints, private to src/ckpt: HDF5 handles, datasets read and written
// with their checksums, the links of a version file, and fsync.
#include <hdf5.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "arclight/ckpt/checkpoint.hpp"

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
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

void fsync_path(const std::string& path, bool directory);

// The element types a checkpoint's datasets have.
enum class Kind : std::uint8_t { u8, i64, f32, f64 };
hid_t h5type(Kind k);
std::size_t kind_size(Kind k);

// A link access list that resolves external links in `dir`, wherever the process runs.
hid_t link_access(const std::string& dir);
// The file, read-only; -1 when it does not open.
hid_t open_file(const std::string& path);

std::uint32_t read_crc(hid_t set, const std::string& what);
// A 1-D dataset's length.
std::uint64_t extent(hid_t set, const std::string& what);
// A dataset's length, when the file holds that many elements of `size` bytes: a corrupt
// length is caught before anything is allocated for it.
std::uint64_t stored_extent(hid_t set, std::size_t size, const std::string& what);
Kind kind_of(hid_t set);
// One number of a version's meta group (its chain length, its step), or -1 when it does not read.
std::int64_t meta_number(hid_t file, const char* name);

// Where a dataset's data lives and what it holds: for the parent's datasets, so that an
// unchanged one becomes a link to the file that holds it.
struct Held {
  std::string file, object;
  Kind kind = Kind::u8;
  std::uint64_t count = 0;
  std::uint32_t crc = 0;
};

// Every dataset of a version file, by path, into `held` (where its data is, with its checksum),
// and the files it links to into `linked`; either may be null.
void walk_links(const std::string& path, std::map<std::string, Held>* held, std::set<std::string>* linked);

void write_attribute(hid_t set, std::uint32_t crc, const std::string& path);
// Writes a dataset's data, in pieces of at most 4 MB.
void write_in_pieces(hid_t set, hid_t file_space, Kind kind, std::uint64_t count, const char* data,
                     const std::string& path);

// Writes one segment of an append-only blob as a file of its own, <dir>/segments/<name>,
// committed (temporary name, fsync, rename) before any version links to it. Returns the
// link target's file name, relative to dir.
std::string write_segment(const std::string& dir, const std::string& name, Kind kind, const void* data,
                          std::uint64_t count, std::uint32_t crc);

}  // namespace arclight::ckpt
