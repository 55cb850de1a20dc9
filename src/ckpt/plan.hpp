#pragma once
// The policy of a checkpoint write, private to src/ckpt: what each rank holds as datasets
// (blobs), and rank 0's plan of a version: which datasets link to the parent, which segments
// are new, which rank writes each dataset's data.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/bytes.hpp"
#include "hdf5_io.hpp"

namespace arclight::ckpt {

inline constexpr std::int64_t format_version = 2;

// One dataset as a rank holds it. Append-only blobs become a group of segments.
struct Blob {
  std::string path;
  Kind kind = Kind::u8;
  const void* data = nullptr;
  std::uint64_t count = 0;
  bool append_only = false;
  std::uint64_t offset = 0;  // append-only: elements before `data` that LATEST's segments hold
  std::optional<std::uint64_t> entries = std::nullopt;  // append-only: the log's entries `data` holds, when known
};

// Strings as one dataset: each a uint32 length and its bytes.
std::string pack_strings(const std::vector<std::string>& v);
std::vector<std::string> unpack_strings(const std::string& packed, const std::string& what);

// What this rank writes, as blobs pointing into `c` and into `keep` (packed values; a deque
// keeps them in place as it grows).
std::vector<Blob> blobs_of(const Checkpoint& c, const Part& part, std::deque<std::string>& keep);

// What a version writes: datasets (data, or a link to the file holding the same bytes).
struct PlanEntry {
  std::string path;
  Kind kind = Kind::u8;
  std::uint64_t count = 0;
  Checksums sums;
  int owner = 0;                       // the rank of the write's communicator that writes the data
  std::string link_file, link_object;  // set: an external link instead of data
  std::uint64_t offset = 0;            // an append-only blob's segment: where it starts, in elements
};

// What a rank holds, for rank 0 to plan with: path, kind, count and checksums of each blob
// but the append-only ones (rank 0's, planned there).
std::string describe_blobs(const std::vector<Blob>& blobs);

// Rank 0's plan of version `version` in `dir`: full or incremental on LATEST, links for what
// did not change, new segments of the append-only blobs (written here, as files of their own).
// `described[r]`: what rank r holds (describe_blobs). The meta that only the plan knows
// (/meta/parent, /meta/chain, /meta/links) is added to `blobs`, its bytes to `keep`.
// Returns the plan, encoded for every rank.
std::string plan_version(const std::string& dir, std::int64_t version, const WriteOptions& options,
                         const std::vector<std::string>& described, std::vector<Blob>& blobs,
                         std::deque<std::string>& keep);
std::vector<PlanEntry> decode_plan(const std::string& plan);

}  // namespace arclight::ckpt
