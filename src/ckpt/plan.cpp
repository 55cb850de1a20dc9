#include "plan.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include "arclight/core/log.hpp"
#include "directory.hpp"

namespace arclight::ckpt {
namespace fs = std::filesystem;

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

namespace {

std::vector<TensorInfo> tensors_of(const Checkpoint& c) {
  if (!c.tensors.empty()) return c.tensors;
  return {TensorInfo{"all", c.parameters.size()}};
}

void encode_entry(ByteWriter& w, const PlanEntry& e) {
  w.bytes(e.path);
  w.u8(static_cast<std::uint8_t>(e.kind));
  w.u64(e.count);
  w.u32(e.sums.crc32c);
  w.u64(e.sums.xxh3);
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
  e.sums.crc32c = r.u32();
  e.sums.xxh3 = r.u64();
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
  bool wrote_whole_log = false;

  void regular(const std::string& path, Kind kind, std::uint64_t count, const Checksums& sums, int owner) {
    PlanEntry e{path, kind, count, sums, owner, "", "", 0};
    auto it = parent.find(path);
    if (it != parent.end() && it->second.kind == kind && it->second.count == count && it->second.holds(sums)) {
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
          throw Error(
              log::concat("checkpoint: LATEST holds ", prefix, " elements of ", blob.path, ", not ", blob.offset));
        log::warn("checkpoint: LATEST does not hold the first ", blob.offset, " bytes of ", blob.path,
                  "; writing it whole");
        keep->push_back((*whole_log)(blob.path));
        wrote_whole_log = true;
        blob.data = keep->back().data();
        blob.count = keep->back().size() / size;
        blob.offset = 0;
        blob.entries.reset();
      }
      prefix = 0;
    }
    if (blob.offset == 0) {
      bool is_prefix = true;
      for (const auto& [path, held] : segments) {
        if (held.kind != blob.kind || prefix + held.count > blob.count ||
            !held.holds(checksums_of(static_cast<const char*>(blob.data) + prefix * size, held.count * size))) {
          is_prefix = false;
          break;
        }
        prefix += held.count;
      }
      if (!is_prefix) prefix = 0, segments.clear();
    }
    for (const auto& [path, held] : segments)
      // A link's checksums are not read back (/meta/links keeps the CRC); a segment of a version written before XXH3
      // has none (linked all the same where the caller says LATEST holds its bytes: blob.offset).
      entries.push_back({path, held.kind, held.count, {held.crc, held.xxh3.value_or(0)}, 0, held.file, held.object, 0});
    if (blob.count > prefix || segments.empty()) {
      const char* tail = static_cast<const char*>(blob.data) + prefix * size;
      const std::uint64_t count = blob.count - prefix;
      const Checksums sums = checksums_of(tail, count * size);
      std::string file_name = blob.path.substr(1);
      std::replace(file_name.begin(), file_name.end(), '/', '.');
      file_name += "." + segment_name(version) + "-" + token + ".h5";
      // The entries are known for the caller's own part only, not for a tail after segments found to be a prefix.
      const std::optional<std::uint64_t> log_entries = prefix == 0 ? blob.entries : std::nullopt;
      const std::string file = write_segment(dir, file_name, blob.kind, tail, count, sums, log_entries);
      entries.push_back({blob.path + "/" + segment_name(version), blob.kind, count, sums, 0, file, "/data", 0});
    }
  }
};

// The version this one is incremental on.
struct Parent {
  std::string name;        // its file name; empty: this version is full
  std::int64_t chain = 0;  // this version's chain: versions since the last full one
};

// LATEST, read into the planner: its segments always; its other datasets too when this
// version is incremental on it (chain shorter than full_every, and an earlier step).
Parent choose_parent(Planner& planner, int full_every) {
  Parent parent{latest_version(planner.dir), 0};
  if (!parent.name.empty()) {
    const std::string parent_path = (fs::path(planner.dir) / parent.name).string();
    try {
      std::int64_t parent_chain = -1, parent_step = -1;
      {
        Handle f(open_file(parent_path), H5Fclose, parent_path);
        const LinkPolicy links(planner.dir);
        parent_chain = meta_number(f.id, links, "/meta/chain");
        parent_step = meta_number(f.id, links, "/meta/step");
      }
      // A parent comes before this version: never link to the file that this one replaces.
      if (parent_step < 0 || parent_step >= planner.version)
        throw CorruptCheckpoint(parent_path + " is not an earlier version (step " + std::to_string(parent_step) + ")");
      walk_links(parent_path, &planner.segments, nullptr);
      if (parent_chain >= 0 && parent_chain + 1 < full_every) {
        planner.parent = planner.segments;
        parent.chain = parent_chain + 1;
      }
    } catch (const CorruptCheckpoint& e) {
      log::warn("checkpoint: ", e.what(), "; writing a full version");
      planner.segments.clear();
    }
  }
  if (parent.chain == 0) parent.name.clear(), planner.parent.clear();
  return parent;
}

// The meta only the plan knows: the parent, the chain, and what each link must find (length
// and checksum: a linked file that was replaced since fails the read, even though its own
// checksums match).
void plan_meta(Planner& planner, const Parent& parent, std::vector<Blob>& blobs, std::deque<std::string>& keep) {
  const std::string& name = parent.name;
  keep.push_back(name);
  planner.entries.push_back(
      {"/meta/parent", Kind::u8, name.size(), checksums_of(name.data(), name.size()), 0, "", "", 0});
  planner.entries.push_back(
      {"/meta/chain", Kind::i64, 1, checksums_of(&parent.chain, sizeof parent.chain), 0, "", "", 0});
  blobs.push_back({"/meta/parent", Kind::u8, keep.back().data(), name.size(), false});
  keep.emplace_back(reinterpret_cast<const char*>(&parent.chain), sizeof parent.chain);
  blobs.push_back({"/meta/chain", Kind::i64, keep.back().data(), 1, false});
  std::string links;
  {
    ByteWriter lw(links);
    for (const PlanEntry& e : planner.entries) {
      if (e.link_file.empty()) continue;
      lw.bytes(e.path);
      lw.u64(e.count);
      lw.u32(e.sums.crc32c);
    }
  }
  keep.push_back(links);
  planner.entries.push_back(
      {"/meta/links", Kind::u8, links.size(), checksums_of(links.data(), links.size()), 0, "", "", 0});
  blobs.push_back({"/meta/links", Kind::u8, keep.back().data(), links.size(), false});
}

}  // namespace

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
    if (!c.model_definition.empty()) bytes("/meta/model_definition", c.model_definition);
    bytes("/meta/arclight_version", c.arclight_version);
    out.push_back({"/meta/created", Kind::f64, &c.created, 1, false});
    bytes("/meta/metrics_jsonl", c.metrics_jsonl, true);
    bytes("/rng/coordinator", c.coordinator_rng);
    bytes("/store/tables", c.store_tables);
    bytes("/store/history", c.store_history, true, c.store_history_offset);
    bytes("/store/span_log", c.span_log, true, c.span_log_offset);
    out.back().entries = c.span_log_entries;
    ints("/store/untrained_rollouts", c.untrained_rollouts);
    if (!c.store_log_starts.empty()) ints("/store/log_starts", c.store_log_starts);
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
    if (c.base_crc32c) {
      const std::int64_t crc = *c.base_crc32c;
      keep.push_back(std::string(reinterpret_cast<const char*>(&crc), sizeof crc));
      out.push_back({"/model/base_crc32c", Kind::i64, keep.back().data(), 1, false});
    }
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

std::string describe_blobs(const std::vector<Blob>& blobs) {
  std::string described;
  ByteWriter w(described);
  for (const Blob& b : blobs) {
    if (b.append_only) continue;  // rank 0's, planned there
    w.bytes(b.path);
    w.u8(static_cast<std::uint8_t>(b.kind));
    w.u64(b.count);
    const Checksums sums = checksums_of(b.data, b.count * kind_size(b.kind));
    w.u32(sums.crc32c);
    w.u64(sums.xxh3);
  }
  return described;
}

std::string plan_version(const std::string& dir, std::int64_t version, const WriteOptions& options,
                         const std::vector<std::string>& described, std::vector<Blob>& blobs,
                         std::deque<std::string>& keep) {
  fs::create_directories(dir);
  Planner planner;
  planner.dir = dir;
  planner.version = version;
  planner.token = unique_token();
  planner.whole_log = &options.whole_log;
  planner.keep = &keep;
  const Parent parent = choose_parent(planner, options.full_every);
  for (std::size_t r = 0; r < described.size(); ++r) {
    for (ByteReader in(described[r]); in.remaining() > 0;) {
      std::string path(in.bytes());
      const Kind kind = static_cast<Kind>(in.u8());
      const std::uint64_t count = in.u64();
      Checksums sums;
      sums.crc32c = in.u32();
      sums.xxh3 = in.u64();
      planner.regular(path, kind, count, sums, static_cast<int>(r));
    }
  }
  for (const Blob& b : blobs)
    if (b.append_only) planner.append_only(b);
  // The restore starts count the logs' bytes as LATEST held them, not as this version writes them anew: none (a
  // restore reads the logs whole; one that happened to fit would skip the wrong bytes).
  if (planner.wrote_whole_log)
    planner.entries.erase(std::remove_if(planner.entries.begin(), planner.entries.end(),
                                         [](const PlanEntry& e) { return e.path == "/store/log_starts"; }),
                          planner.entries.end());
  plan_meta(planner, parent, blobs, keep);
  std::string plan;
  ByteWriter w(plan);
  for (const PlanEntry& e : planner.entries) encode_entry(w, e);
  return plan;
}

std::vector<PlanEntry> decode_plan(const std::string& plan) {
  std::vector<PlanEntry> entries;
  for (ByteReader in(plan); in.remaining() > 0;) entries.push_back(decode_entry(in));
  return entries;
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

}  // namespace arclight::ckpt
