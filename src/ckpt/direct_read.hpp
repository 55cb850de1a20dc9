#pragma once
// A restore's tensors read straight from their files with O_DIRECT (ckpt-private). Through the
// page cache a cold restore took 2.3 to 2.8 times as long as `cat` of the same file here: the
// cache's pages were allocated ahead of the reads, filled, then copied out, all on the reading
// thread. Direct reads go from the disk into a ring of aligned buffers while the helper copies
// the last one into place and computes its checksums.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
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
  std::vector<float>* values = nullptr;
  std::size_t at = 0, count = 0;
  std::function<void(std::uint32_t)> check;
  std::string what;  // the file and the dataset, for messages
};

// Reads `reads`, given in the order their bytes lie and not overlapping, into place: the copies
// and the checks are `helper`'s jobs, and a mismatch comes out of helper.finish(). Returns false,
// having read nothing, where a file does not read with O_DIRECT (tmpfs, some network file
// systems): the caller reads through HDF5 instead. A read that fails or ends early is a
// CorruptCheckpoint. False too where most of the bytes are in the page cache already: reading them from there is
// faster.
bool read_direct(const std::vector<DirectRead>& reads, RestoreHelper& helper);

}  // namespace arclight::ckpt
