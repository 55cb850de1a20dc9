// Reading a version back, every checksum verified, and restoring the newest one that reads.
#include <sys/mman.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <tuple>

#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/log.hpp"
#include "directory.hpp"
#include "hdf5_io.hpp"
#include "plan.hpp"
#include "reader.hpp"
#include "restore_helper.hpp"

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

}  // namespace

void read_meta(Reader& r, Checkpoint& c) {
  if (!r.has("/meta/format") || r.one("/meta/format") != format_version)
    throw CorruptCheckpoint(r.path() + ": not a checkpoint of format " + std::to_string(format_version));
  c.step = r.one("/meta/step");
  // A forged step would go on to versions no pattern finds (v-0000003.h5, v100000001.h5), a run never resumed again.
  if (c.step < 0 || c.step > max_step)
    throw CorruptCheckpoint(r.path() + ": /meta/step is " + std::to_string(c.step) + ", not from 0 to " +
                            std::to_string(max_step));
  c.policy_version = r.one("/meta/policy_version");
  // Negative numbers are the weight channel's notes to the runners (the end of training), never a version.
  if (c.policy_version < 0) throw CorruptCheckpoint(r.path() + ": /meta/policy_version is negative");
  c.config_toml = r.bytes("/meta/config_toml");
  if (r.has("/meta/model_definition")) c.model_definition = r.bytes("/meta/model_definition");
  c.arclight_version = r.bytes("/meta/arclight_version");
  auto created = r.dataset<double>("/meta/created", H5T_NATIVE_DOUBLE);
  c.created = created.empty() ? 0 : created[0];
  c.parent = r.bytes("/meta/parent");
  c.chain = r.one("/meta/chain");
  check_name_matches_step(r.path(), c.step);
}

std::uint64_t read_index(Reader& r, Checkpoint& c) {
  const std::string& path = r.path();
  const std::vector<std::string> names = unpack_strings(r.bytes("/model/tensor_names"), path + ": /model/tensor_names");
  const std::vector<std::int64_t> sizes = r.dataset<std::int64_t>("/model/tensor_sizes", H5T_NATIVE_INT64);
  if (names.size() != sizes.size()) throw CorruptCheckpoint(path + ": tensor names and sizes differ in number");
  const std::uint64_t total = checked_total(r, names, sizes);
  for (std::size_t i = 0; i < names.size(); ++i) c.tensors.push_back({names[i], static_cast<std::size_t>(sizes[i])});
  if (r.has("/model/base_crc32c")) {
    const std::int64_t crc = r.one("/model/base_crc32c");
    if (crc < 0 || crc > std::int64_t{0xffffffff}) throw CorruptCheckpoint(path + ": /model/base_crc32c is no CRC-32C");
    c.base_crc32c = static_cast<std::uint32_t>(crc);
  }
  c.optimizer_steps = r.dataset<std::int64_t>("/optim/steps", H5T_NATIVE_INT64);
  // Checked here, where a version that does not read is skipped for the one before; the trainers found it "does not
  // fit this model" and ended the job.
  if (!c.optimizer_steps.empty() && c.optimizer_steps.size() != names.size())
    throw CorruptCheckpoint(
        log::concat(path, ": /optim/steps holds ", c.optimizer_steps.size(), " steps for ", names.size(), " tensors"));
  if (std::any_of(c.optimizer_steps.begin(), c.optimizer_steps.end(), [](std::int64_t s) { return s < 0; }))
    throw CorruptCheckpoint(path + ": /optim/steps holds a negative step");
  return total;
}

void reserve_model(Checkpoint& c, std::size_t total, bool moments) {
  for (UninitFloats* values : {&c.parameters, &c.exp_avg, &c.exp_avg_sq}) {
    if (!moments && values != &c.parameters) continue;
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

void plan_tensor(Reader& r, Checkpoint& c, std::size_t i, std::size_t at, Moments& moments,
                 std::vector<PlannedRead>& plan) {
  const TensorInfo& t = c.tensors[i];
  r.plan_values("/model/parameters/" + t.name, c.parameters, at, t.size, false, plan);
  const std::size_t avg = r.plan_values("/optim/exp_avg/" + t.name, c.exp_avg, at, t.size, true, plan);
  const std::size_t avg_sq = r.plan_values("/optim/exp_avg_sq/" + t.name, c.exp_avg_sq, at, t.size, true, plan);
  if (avg != avg_sq) throw CorruptCheckpoint(r.path() + mixed_moments);
  if (t.size > 0) moments.add(avg > 0);
}

void order_by_place(std::vector<PlannedRead>& plan) {
  std::sort(plan.begin(), plan.end(), [](const PlannedRead& a, const PlannedRead& b) {
    return std::tie(a.where.device, a.where.inode, a.where.begin) <
           std::tie(b.where.device, b.where.inode, b.where.begin);
  });
}

std::vector<std::size_t> tensor_offsets(const Checkpoint& c) {
  std::vector<std::size_t> offsets{0};
  for (const TensorInfo& t : c.tensors) offsets.push_back(offsets.back() + t.size);
  return offsets;
}

namespace {

// The optimizer's moments: their lengths checked against the bytes stored, their data not read.
void check_moment_lengths(Reader& r, const Checkpoint& c) {
  ByteRanges ranges;
  for (const TensorInfo& t : c.tensors)
    for (const char* group : {"/optim/exp_avg/", "/optim/exp_avg_sq/"}) {
      const std::uint64_t count = r.stored_count(group + t.name, sizeof(float), ranges);
      if (count != 0 && count != t.size)
        throw CorruptCheckpoint(r.path() + ": " + group + t.name + " has the wrong size");
    }
}

// The model and the optimizer: every tensor read and checked; the parameters only (model: an export, which needs
// no moments, twice the parameters' bytes); or (no_tensor_data, restore) their lengths checked against the bytes
// stored and their data left to the trainers, which read and check it.
void read_model(Reader& r, Checkpoint& c, Contents contents) {
  const std::uint64_t total = read_index(r, c);
  if (contents != Contents::all) check_moment_lengths(r, c);
  if (contents == Contents::all || contents == Contents::model) {
    // Room for every tensor at once, so that the reads go straight into place. A failure here
    // is this machine's memory, not the file: it is not skipped as corrupt.
    reserve_model(c, total, contents == Contents::all);
    const std::vector<std::size_t> offsets = tensor_offsets(c);
    Moments moments;
    std::vector<PlannedRead> plan;
    for (std::size_t i = 0; i < c.tensors.size(); ++i) {
      if (contents == Contents::all)
        plan_tensor(r, c, i, offsets[i], moments, plan);
      else
        r.plan_values("/model/parameters/" + c.tensors[i].name, c.parameters, offsets[i], c.tensors[i].size, false,
                      plan);
    }
    order_by_place(plan);
    RestoreHelper helper;
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

std::optional<std::uint64_t> log_segment_entries(const std::string& version_path, const std::string& segment) {
  const std::lock_guard<std::recursive_mutex> hdf5(hdf5_mutex());
  return Reader(version_path).segment_entries(segment);
}

std::optional<std::pair<std::string, Checkpoint>> load_latest(const std::string& dir, const Accept& accept,
                                                              Contents contents) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (status.type() == fs::file_type::not_found) return std::nullopt;
  if (ec) throw Error("cannot look at checkpoint directory " + dir + ": " + ec.message());
  if (!fs::is_directory(status)) return std::nullopt;
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
  const std::lock_guard<std::recursive_mutex> hdf5(hdf5_mutex());
  std::set<std::string> linked;
  walk_links(path, nullptr, &linked);
  return {linked.begin(), linked.end()};
}

// Rank 0's loader calls it while the main thread already serves the restored store, whose reads of the archive use
// HDF5 too.
VersionSizes version_sizes(const std::string& path) {
  const std::lock_guard<std::recursive_mutex> hdf5(hdf5_mutex());
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
