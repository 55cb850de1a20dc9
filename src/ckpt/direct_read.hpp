#pragma once
// A restore's tensors read straight from their files with O_DIRECT (ckpt-private). Through the
// page cache a cold restore took 2.3 to 2.8 times as long as `cat` of the same file here: the
// cache's pages were allocated ahead of the reads, filled, then copied out, all on the reading
// thread. Direct reads go from the disk into a ring of aligned buffers while the helper copies
// the last one into place and computes its checksums.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hdf5_io.hpp"
#include "restore_helper.hpp"

namespace arclight::ckpt {

// One dataset of floats stored as this machine's floats: where its bytes lie, the descriptor of
// the file that holds them (HDF5's), where its values go (within the room reserved), and the
// check of their checksum.
struct DirectRead {
  StoredBytes where;
  int descriptor = -1;
  UninitFloats* values = nullptr;
  std::size_t at = 0, count = 0;
  std::function<void(std::uint32_t)> check;
  std::string what;  // the file and the dataset, for messages
};

// The files of a restore's reads, opened for direct reads.
class DirectFiles {
 public:
  // The files that hold `reads` (given in the order their bytes lie, not overlapping), opened with O_DIRECT and
  // tried; none, having read nothing, where there is nothing to read, where one does not read so (some network and
  // FUSE file systems), where a read's room was not reserved, where set_direct_reads said never, or (automatic) where
  // more than half of the bytes are in the page cache already (a version written or read moments ago: a restart on the
  // same node), which is faster to read through.
  static std::unique_ptr<DirectFiles> open(const std::vector<DirectRead>& reads);
  ~DirectFiles();
  DirectFiles(const DirectFiles&) = delete;
  DirectFiles& operator=(const DirectFiles&) = delete;

  // Reads `reads` (as given to open, their checks set) into place: the copies and the checks are `helper`'s jobs,
  // and a mismatch comes out of helper.finish(). A part the direct reads do not return is read through the page
  // cache; one that does not read at all, or lies past the file's end, is a CorruptCheckpoint.
  void read(const std::vector<DirectRead>& reads, RestoreHelper& helper);

  class Ring;

 private:
  struct File {
    int direct = -1;    // opened here with O_DIRECT, closed with this
    int buffered = -1;  // HDF5's, for what the direct reads do not return
  };
  DirectFiles() = default;
  std::map<std::pair<dev_t, ino_t>, File> files_;
  std::shared_ptr<Ring> ring_;
};

}  // namespace arclight::ckpt
