#include "arclight/ckpt/checkpoint.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "arclight/ckpt/inspect.hpp"
#include "arclight/core/crc32c.hpp"
#include "checkpoint_samples.hpp"
#include "same_checkpoint.hpp"
#include "../temp_dir.hpp"

using namespace arclight;
using namespace arclight::ckpt;
namespace fs = std::filesystem;

namespace {
Checkpoint sample(std::int64_t step) {
  Checkpoint c;
  c.step = step;
  c.policy_version = step;
  c.config_toml = "run.steps=10\n";
  c.model_definition = "config.json 0a1b2c3d\ntokenizer.json ffffffff\n";
  c.arclight_version = "0.1.0 test";
  c.created = 1.5;
  for (int i = 0; i < 1000; ++i) c.parameters.push_back(float(i) * 0.25f + float(step));
  c.exp_avg.assign(1000, 0.5f);
  c.exp_avg_sq.assign(1000, 0.125f);
  c.optimizer_steps = {step};  // one per tensor: here one, "all"
  c.base_crc32c = 0xfedcba98;  // past int32: read back as the uint32 it is
  c.coordinator_rng = "12345 678";
  c.metrics_jsonl = "{\"step\":1,\"reward\":2}\n";
  c.store_tables = "tables";
  c.store_history = "history;";
  c.span_log = "span-1;";
  c.untrained_rollouts = {41, 42};
  return c;
}

// A model of four tensors where only the last one trains (a frozen base), with a growing
// span log and metrics history: what an incremental version saves.
Checkpoint frozen_base(std::int64_t step) {
  Checkpoint c = sample(step);
  c.tensors = {{"embed", 400}, {"block0", 300}, {"block1", 200}, {"head", 100}};
  c.parameters.assign(1000, 0.5f);
  c.exp_avg.assign(1000, 0.f);
  c.exp_avg_sq.assign(1000, 0.f);
  for (int i = 900; i < 1000; ++i) {
    c.parameters[i] = float(step) + float(i);
    c.exp_avg[i] = float(step);
    c.exp_avg_sq[i] = float(step) * 2;
  }
  c.optimizer_steps = {0, 0, 0, step};
  c.metrics_jsonl.clear();
  c.span_log.clear();
  c.store_history.clear();
  for (int s = 1; s <= step; ++s) {
    c.metrics_jsonl += "{\"step\":" + std::to_string(s) + "}\n";
    c.span_log += "spans of step " + std::to_string(s) + ";";
    c.store_history += "rollouts ended in step " + std::to_string(s) + ";";
  }
  return c;
}

// The files a version links to, without the write's token in segment file names
// (segments/store.span_log.s00000002-<16 hex digits>.h5 -> segments/store.span_log.s00000002.h5).
std::vector<std::string> links_of(const std::string& version) {
  std::vector<std::string> out;
  for (std::string f : linked_files(version)) {
    const auto dash = f.rfind('-');
    if (f.rfind("segments/", 0) == 0 && dash != std::string::npos) f = f.substr(0, dash) + ".h5";
    out.push_back(f);
  }
  return out;
}

void flip_byte_of(const fs::path& file, const std::string& needle) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto at = bytes.find(needle);
  BOOST_REQUIRE(at != std::string::npos);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(bytes[at] ^ 0x01));
}
}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(a_version_round_trips_and_becomes_latest) {
  TempDir dir;
  const std::string path = write_checkpoint(dir.path.string(), 7, sample(7));
  BOOST_TEST(fs::path(path).filename().string() == "v00000007.h5");
  BOOST_TEST(!fs::exists(path + ".tmp"));
  expect_same(read_checkpoint(path), sample(7));
  auto latest = load_latest(dir.path.string());
  BOOST_REQUIRE(latest.has_value());
  BOOST_TEST(latest->second.step == 7);
  // A run without LoRA keeps no base checksum, and one of a model initialised here no model definition: neither
  // reads back.
  Checkpoint full = sample(8);
  full.base_crc32c.reset();
  full.model_definition.clear();
  const Checkpoint read_back = read_checkpoint(write_checkpoint(dir.path.string(), 8, full));
  BOOST_TEST(!read_back.base_crc32c.has_value());
  BOOST_TEST(read_back.model_definition.empty());
}

BOOST_AUTO_TEST_CASE(a_flipped_bit_is_detected_and_the_version_before_is_used) {
  TempDir dir;
  write_checkpoint(dir.path.string(), 1, sample(1));
  const std::string second = write_checkpoint(dir.path.string(), 2, sample(2));
  // Flip a bit inside the coordinator's random state of version 2 (its bytes are distinctive).
  flip_byte_of(second, "12345 678");
  BOOST_CHECK_THROW(read_checkpoint(second), CorruptCheckpoint);
  auto latest = load_latest(dir.path.string());
  BOOST_REQUIRE(latest.has_value());
  BOOST_TEST(latest->second.step == 1);
  auto report = inspect_directory(dir.path.string());
  BOOST_REQUIRE(report.versions.size() == 2u);
  BOOST_TEST(report.versions[0].valid);
  BOOST_TEST(!report.versions[1].valid);
  BOOST_TEST(report.versions[1].problem.find("checksum") != std::string::npos, report.versions[1].problem);
}

BOOST_AUTO_TEST_CASE(truncated_and_unfinished_versions_are_skipped) {
  TempDir dir;
  write_checkpoint(dir.path.string(), 3, sample(3));
  const std::string fourth = write_checkpoint(dir.path.string(), 4, sample(4));
  fs::resize_file(fourth, fs::file_size(fourth) / 2);
  // A write that died before its rename leaves only a .tmp file, which is never read.
  std::ofstream(dir.path / "v00000005.h5.tmp") << "half a file";
  auto latest = load_latest(dir.path.string());
  BOOST_REQUIRE(latest.has_value());
  BOOST_TEST(latest->second.step == 3);
  // LATEST naming a file that is gone falls back too.
  fs::remove(fourth);
  BOOST_TEST(load_latest(dir.path.string())->second.step == 3);
}

BOOST_AUTO_TEST_CASE(no_checkpoint_is_no_checkpoint) {
  TempDir dir;
  BOOST_TEST(!load_latest(dir.path.string()).has_value());
  BOOST_TEST(!load_latest((dir.path / "nonexistent").string()).has_value());
  BOOST_TEST(describe(inspect_directory(dir.path.string())).find("no checkpoint") == 0u);
}

BOOST_AUTO_TEST_CASE(retention_keeps_the_newest) {
  TempDir dir;
  for (int v = 1; v <= 5; ++v) write_checkpoint(dir.path.string(), v, sample(v));
  auto removed = apply_retention(dir.path.string(), 2);
  BOOST_TEST(removed.size() == 3u);
  BOOST_TEST(fs::exists(dir.path / "v00000004.h5"));
  BOOST_TEST(fs::exists(dir.path / "v00000005.h5"));
  BOOST_TEST(!fs::exists(dir.path / "v00000003.h5"));
  BOOST_TEST(apply_retention(dir.path.string(), 0).empty());
  // The leftovers of writes that never committed go with every version kept (keep 0) or fewer versions than kept too
  // (they stayed until a version was deleted); an unlinked segment too, where links are walked.
  std::ofstream(dir.path / "v00000003.h5.tmp") << "a crashed write's share";
  BOOST_TEST(apply_retention(dir.path.string(), 0) ==
             (std::vector<std::string>{(dir.path / "v00000003.h5.tmp").string()}));
  std::ofstream(dir.path / "v00000002.h5.tmp") << "another";
  const fs::path orphan = dir.path / "segments" / "store.span_log.s00000009-0123456789abcdef.h5";
  std::ofstream(orphan) << "a segment no version links";
  const auto left = apply_retention(dir.path.string(), 5);
  BOOST_TEST(left.size() == 2u);
  BOOST_TEST(!fs::exists(orphan));
  BOOST_TEST(!fs::exists(dir.path / "v00000002.h5.tmp"));
  BOOST_TEST(fs::exists(dir.path / "v00000005.h5"));
}

BOOST_AUTO_TEST_CASE(an_incremental_version_links_what_did_not_change) {
  TempDir dir;
  const std::string d = dir.path.string();
  WriteOptions incremental;
  incremental.full_every = 3;
  const std::string v1 = write_checkpoint(d, 1, frozen_base(1), incremental);
  const std::string v2 = write_checkpoint(d, 2, frozen_base(2), incremental);
  const std::string v3 = write_checkpoint(d, 3, frozen_base(3), incremental);
  const std::string v4 = write_checkpoint(d, 4, frozen_base(4), incremental);
  expect_same(read_checkpoint(v2), frozen_base(2));
  expect_same(read_checkpoint(v3), frozen_base(3));
  BOOST_TEST(read_checkpoint(v1).chain == 0);
  BOOST_TEST(read_checkpoint(v2).parent == "v00000001.h5");
  BOOST_TEST(read_checkpoint(v3).chain == 2);
  BOOST_TEST(read_checkpoint(v4).chain == 0);  // every third is full
  BOOST_TEST(read_checkpoint(v4).parent.empty());
  // Links go straight to the file holding the bytes: v3's frozen tensors are v1's, and every
  // segment of the span log and the metrics is a file of its own, linked by full versions too.
  auto segments_up_to = [](int last) {
    std::vector<std::string> out;
    for (const char* log : {"meta.metrics_jsonl", "store.history", "store.span_log"})
      for (int v = 1; v <= last; ++v)
        out.push_back("segments/" + std::string(log) + ".s0000000" + std::to_string(v) + ".h5");
    return out;
  };
  std::vector<std::string> v3_links = segments_up_to(3);
  v3_links.push_back("v00000001.h5");
  BOOST_TEST(links_of(v3) == v3_links);
  BOOST_TEST(links_of(v4) == segments_up_to(4));  // full: no other version, only the logs' segments
  const VersionSizes full = version_sizes(v1), inc = version_sizes(v3);
  BOOST_TEST(inc.linked >= 3u * 900 * sizeof(float));
  BOOST_TEST(full.linked == frozen_base(1).span_log.size() + frozen_base(1).metrics_jsonl.size() +
                                frozen_base(1).store_history.size());
  // Retention keeps what a kept version links to: v4 is full, so v1 to v3 go, the log stays.
  auto removed = apply_retention(d, 1);
  BOOST_TEST(removed.size() == 3u);
  removed = apply_retention(d, 2);
  BOOST_TEST(removed.empty());
  expect_same(load_latest(d)->second, frozen_base(4));
  // A log rewritten from the start leaves the old segments to retention.
  Checkpoint rewritten = frozen_base(5);
  rewritten.span_log = "another history";
  write_checkpoint(d, 5, rewritten, incremental);
  removed = apply_retention(d, 1);
  BOOST_TEST(removed.size() == 4u);  // the span log's four segments; v5 links to v4's tensors
  BOOST_TEST(fs::exists(dir.path / "v00000004.h5"));
  expect_same(load_latest(d)->second, rewritten);
}

namespace {

// Sets the low bytes of values[at .. at + 5] so that the values' CRC-32C becomes `wanted`. The checksum is affine in
// the bytes (linear after its conditioning), so the 48 free bits are solved for over GF(2).
void force_crc32c(std::vector<float>& values, std::size_t at, std::uint32_t wanted) {
  constexpr int free_bits = 48;
  auto* bytes = reinterpret_cast<unsigned char*>(values.data());
  const std::size_t size = values.size() * sizeof(float);
  auto flip = [&](int bit) {
    bytes[(at + std::size_t(bit / 8)) * sizeof(float)] ^= static_cast<unsigned char>(1u << (bit % 8));
  };
  for (int b = 0; b < free_bits; b += 8) bytes[(at + std::size_t(b / 8)) * sizeof(float)] = 0;
  const std::uint32_t base = crc32c(bytes, size);
  // Each row: the checksum's change when a set of free bits flips, and that set.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> rows;
  for (int bit = 0; bit < free_bits; ++bit) {
    flip(bit);
    rows.push_back({crc32c(bytes, size) ^ base, std::uint64_t(1) << bit});
    flip(bit);
  }
  std::uint32_t target = base ^ wanted;
  std::uint64_t chosen = 0;
  for (int pivot = 31; pivot >= 0; --pivot) {  // elimination, highest bit first
    auto row = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return (r.first >> pivot) & 1; });
    BOOST_REQUIRE(row != rows.end());
    const auto p = *row;
    rows.erase(row);
    for (auto& r : rows)
      if ((r.first >> pivot) & 1) r.first ^= p.first, r.second ^= p.second;
    if ((target >> pivot) & 1) target ^= p.first, chosen ^= p.second;
  }
  for (int bit = 0; bit < free_bits; ++bit)
    if ((chosen >> bit) & 1) flip(bit);
}

}  // namespace

// A changed tensor whose CRC-32C happens to match its parent's (once in 2^32 comparisons; a long run makes
// millions) is written anew: linking it would restore the old values, and every check would pass.
BOOST_AUTO_TEST_CASE(a_changed_tensor_whose_crc32c_matches_is_written_not_linked) {
  TempDir dir;
  const std::string d = dir.path.string();
  WriteOptions incremental;
  incremental.full_every = 3;
  write_checkpoint(d, 1, frozen_base(1), incremental);
  Checkpoint changed = frozen_base(2);
  const std::vector<float> embed(changed.parameters.begin(), changed.parameters.begin() + 400);
  for (int i = 0; i < 10; ++i) changed.parameters[i] = 0.75f;
  std::vector<float> forged(changed.parameters.begin(), changed.parameters.begin() + 400);
  force_crc32c(forged, 360, crc32c(embed.data(), embed.size() * sizeof(float)));
  BOOST_REQUIRE(crc32c(forged.data(), forged.size() * sizeof(float)) ==
                crc32c(embed.data(), embed.size() * sizeof(float)));
  BOOST_REQUIRE(forged != embed);
  std::copy(forged.begin(), forged.end(), changed.parameters.begin());
  const std::string v2 = write_checkpoint(d, 2, changed, incremental);
  expect_same(read_checkpoint(v2), changed);
  // The frozen tensors still link: the same bytes have the same checksums.
  BOOST_TEST(version_sizes(v2).linked >= 2u * 500 * sizeof(float));
}

// An export needs the parameters, not AdamW's moments (twice their bytes): it read and held all three.
BOOST_AUTO_TEST_CASE(the_model_alone_is_read_without_the_moments) {
  TempDir dir;
  Checkpoint c = sample(1);
  c.parameters.assign(400'000, 0.5f);
  c.exp_avg.assign(400'000, 0.25f);
  c.exp_avg_sq.assign(400'000, 0.125f);
  const std::string path = write_checkpoint(dir.path.string(), 1, c);
  const std::uint64_t before = bytes_read_by_this_thread();
  const Checkpoint model = read_checkpoint(path, Contents::model);
  const std::uint64_t bytes = bytes_read_by_this_thread() - before;
  BOOST_TEST(model.parameters == c.parameters);
  BOOST_TEST(model.exp_avg.empty());
  BOOST_TEST(model.exp_avg_sq.empty());
  if (before > 0) BOOST_TEST(bytes < 2 * 400'000u * sizeof(float), bytes << " bytes read");
}

BOOST_AUTO_TEST_CASE(retention_never_deletes_a_linked_parent) {
  TempDir dir;
  const std::string d = dir.path.string();
  WriteOptions incremental;
  incremental.full_every = 10;
  for (int v = 1; v <= 4; ++v) write_checkpoint(d, v, frozen_base(v), incremental);
  apply_retention(d, 1);
  BOOST_TEST(fs::exists(dir.path / "v00000004.h5"));
  BOOST_TEST(fs::exists(dir.path / "v00000001.h5"));  // holds the frozen tensors
  expect_same(load_latest(d)->second, frozen_base(4));
}

BOOST_AUTO_TEST_CASE(a_version_whose_linked_file_is_gone_is_skipped) {
  TempDir dir;
  const std::string d = dir.path.string();
  WriteOptions incremental;
  incremental.full_every = 10;
  write_checkpoint(d, 1, frozen_base(1));  // full
  write_checkpoint(d, 2, frozen_base(2), incremental);
  write_checkpoint(d, 3, frozen_base(3), incremental);
  // A version whose model lives in a file that is gone is skipped for the one before.
  const std::string v4 = write_checkpoint(d, 4, frozen_base(4));  // full
  write_checkpoint(d, 5, frozen_base(5), incremental);            // links to v4's frozen tensors
  BOOST_REQUIRE(fs::remove(v4));
  expect_same(load_latest(d)->second, frozen_base(3));
  // A gone log segment is left out of its log, named (every version shares it: hostile_dir_test has the rest).
  const fs::path history_of_step_2 = segment_file(dir.path, "store.history.s00000002");
  BOOST_REQUIRE(fs::remove(history_of_step_2));
  const Checkpoint c = load_latest(d)->second;
  BOOST_TEST(c.step == 3);
  BOOST_TEST(c.store_history == "rollouts ended in step 1;rollouts ended in step 3;");
  BOOST_REQUIRE(c.damaged_logs.size() == 1u);
  BOOST_TEST(c.damaged_logs[0].find(history_of_step_2.filename().string()) != std::string::npos, c.damaged_logs[0]);
  BOOST_TEST(c.store_history_lost_bytes.value_or(0) == std::string("rollouts ended in step 2;").size());
  // A bit flipped in the parent's bytes is caught through the link, too (v3 links v1's unchanged random state).
  flip_byte_of(dir.path / "v00000001.h5", "12345 678");
  BOOST_CHECK_THROW(read_checkpoint((dir.path / "v00000001.h5").string()), CorruptCheckpoint);
  BOOST_CHECK_THROW(read_checkpoint((dir.path / "v00000003.h5").string()), CorruptCheckpoint);
}

BOOST_AUTO_TEST_CASE(append_only_state_is_written_as_new_segments) {
  TempDir dir;
  const std::string d = dir.path.string();
  WriteOptions incremental;
  incremental.full_every = 5;
  write_checkpoint(d, 1, frozen_base(1), incremental);
  write_checkpoint(d, 2, frozen_base(2), incremental);
  // A history that is not an extension of the parent's (it was rewritten) is written whole.
  Checkpoint rewritten = frozen_base(3);
  rewritten.span_log = "something else entirely";
  const std::string v3 = write_checkpoint(d, 3, rewritten, incremental);
  expect_same(read_checkpoint(v3), rewritten);
  const std::string v2 = (dir.path / "v00000002.h5").string();
  expect_same(read_checkpoint(v2), frozen_base(2));
  const std::string text = describe(inspect_directory(d));
  BOOST_TEST(text.find("parent v00000001.h5") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(a_large_dataset_is_written_in_pieces_and_reads_back) {
  TempDir dir;
  Checkpoint c = sample(1);
  c.parameters.resize(1500000 + 7);  // 6 MB: two pieces and a bit
  for (std::size_t i = 0; i < c.parameters.size(); ++i) c.parameters[i] = float(i % 9973) * 0.5f;
  c.exp_avg.assign(c.parameters.size(), 0.25f);
  c.exp_avg_sq.assign(c.parameters.size(), 0.125f);
  const std::string path = write_checkpoint(dir.path.string(), 1, c);
  expect_same(read_checkpoint(path), c);
}

BOOST_AUTO_TEST_CASE(a_writer_may_hand_over_only_the_new_part_of_a_log) {
  TempDir dir;
  const std::string d = dir.path.string();
  WriteOptions incremental;
  incremental.full_every = 2;
  write_checkpoint(d, 1, frozen_base(1), incremental);
  // Version 2 gets only what the logs added since version 1, and where it begins.
  Checkpoint tail = frozen_base(2);
  const Checkpoint before = frozen_base(1);
  tail.span_log = tail.span_log.substr(before.span_log.size());
  tail.span_log_offset = before.span_log.size();
  tail.store_history = tail.store_history.substr(before.store_history.size());
  tail.store_history_offset = before.store_history.size();
  const std::string v2 = write_checkpoint(d, 2, tail, incremental);
  expect_same(read_checkpoint(v2), frozen_base(2));
  // A full version (every second one) links the log's segments too; an offset LATEST does not hold is refused.
  Checkpoint wrong = frozen_base(3);
  wrong.span_log = "x";
  wrong.span_log_offset = 1;
  BOOST_CHECK_THROW(write_checkpoint(d, 3, wrong, incremental), Error);
  BOOST_TEST(latest_version(d) == "v00000002.h5");
}

// A span-log segment says how many entries it holds only where that is the writer's own count: its part as handed
// over (with an offset, or the whole log as the first segment), not a tail after segments found to be a prefix, nor a
// log the writer had to write whole (options.whole_log) in place of its part. A wrong count would send rank 0's span
// queries to the wrong segment.
BOOST_AUTO_TEST_CASE(a_span_log_segment_says_its_entries_only_where_the_writer_counted_them) {
  TempDir dir;
  const std::string d = dir.path.string();
  WriteOptions options;
  options.full_every = 100;
  const auto entries = [&](std::int64_t version) {
    std::vector<std::int64_t> out;
    const std::string path = (dir.path / version_file_name(version)).string();
    for (const std::string& segment : log_segments(path, "/store/span_log"))
      out.push_back(static_cast<std::int64_t>(log_segment_entries(path, segment).value_or(-1)));
    return out;
  };
  Checkpoint c = sample(1);
  c.span_log = "aaaa";
  c.span_log_entries = 2;
  write_checkpoint(d, 1, c, options);
  BOOST_TEST(entries(1) == std::vector<std::int64_t>({2}));
  c = sample(2);
  c.span_log = "bb";
  c.span_log_offset = 4;
  c.span_log_entries = 1;
  write_checkpoint(d, 2, c, options);
  BOOST_TEST(entries(2) == std::vector<std::int64_t>({2, 1}));
  c = sample(3);  // the whole log, LATEST's segments a prefix of it: the tail's count is not the writer's
  c.span_log = "aaaabbcc";
  c.span_log_entries = 4;
  write_checkpoint(d, 3, c, options);
  BOOST_TEST(entries(3) == std::vector<std::int64_t>({2, 1, -1}));
  c = sample(4);  // a part whose offset LATEST does not hold: written whole instead, uncounted
  c.span_log = "dd";
  c.span_log_offset = 3;
  c.span_log_entries = 1;
  WriteOptions whole = options;
  whole.whole_log = [](const std::string& path) { return path == "/store/span_log" ? std::string("zzzz") : ""; };
  write_checkpoint(d, 4, c, whole);
  BOOST_TEST(entries(4) == std::vector<std::int64_t>({-1}));
}

// Issue 18: rank 0 resuming in place reads the store's logs only from the starts a version names (where its
// segments begin), not the segments before them; starts inside a segment mean the logs whole.
BOOST_AUTO_TEST_CASE(a_restore_reads_the_logs_only_from_their_starts) {
  TempDir dir;
  const std::string d = dir.path.string();
  WriteOptions incremental;
  incremental.full_every = 3;  // version 3 is full, and links the logs' segments all the same
  write_checkpoint(d, 1, frozen_base(1), incremental);
  write_checkpoint(d, 2, frozen_base(2), incremental);
  const Checkpoint second = frozen_base(2);
  Checkpoint third = frozen_base(3);
  third.store_log_starts = {7, std::int64_t(second.store_history.size()), 9, std::int64_t(second.span_log.size())};
  const std::string v3 = write_checkpoint(d, 3, third, incremental);

  const Checkpoint whole = read_checkpoint(v3, Contents::no_tensor_data);
  BOOST_TEST(whole.store_history == third.store_history);
  BOOST_TEST(whole.span_log == third.span_log);
  BOOST_TEST(whole.store_history_offset == 0u);
  BOOST_TEST(whole.store_log_starts == third.store_log_starts);
  const Checkpoint part = read_checkpoint(v3, Contents::restore);
  BOOST_TEST(part.store_history == third.store_history.substr(second.store_history.size()));
  BOOST_TEST(part.store_history_offset == second.store_history.size());
  BOOST_TEST(part.span_log == third.span_log.substr(second.span_log.size()));
  BOOST_TEST(part.span_log_offset == second.span_log.size());
  BOOST_TEST(part.store_log_starts == third.store_log_starts);
  BOOST_TEST(part.metrics_jsonl == whole.metrics_jsonl);
  BOOST_TEST(part.parameters.empty());

  // Starts inside a segment (a version that wrote its logs whole): the logs whole, and no starts.
  Checkpoint fourth = frozen_base(4);
  fourth.store_log_starts = {1, 3, 1, 3};
  const std::string v4 = write_checkpoint(d, 4, fourth, incremental);
  const Checkpoint inside = read_checkpoint(v4, Contents::restore);
  BOOST_TEST(inside.store_history == fourth.store_history);
  BOOST_TEST(inside.span_log == fourth.span_log);
  BOOST_TEST(inside.store_log_starts.empty());
  // Starts past the logs' end, or malformed ones: the logs whole too (they are a hint, not the version's state).
  Checkpoint fifth = frozen_base(5);
  fifth.store_log_starts = {1, 1 << 20, 1, 0};
  const std::string v5 = write_checkpoint(d, 5, fifth, incremental);
  BOOST_TEST(read_checkpoint(v5, Contents::restore).store_log_starts.empty());
  for (const std::vector<std::int64_t>& malformed : {std::vector<std::int64_t>{1, -1, 1, 0}, {1, 2, 3}}) {
    fifth.store_log_starts = malformed;
    fifth.step += 1;
    const Checkpoint read = read_checkpoint(write_checkpoint(d, fifth.step, fifth, incremental), Contents::restore);
    BOOST_TEST(read.store_log_starts.empty());
    BOOST_TEST(read.store_history == fifth.store_history);
  }

  // The segments before the starts are not read: damage in version 1's history segment is not seen by a
  // restore from version 3's starts (the store's archive reads it when a query asks), and is by a whole read.
  flip_byte_of(segment_file(dir.path, "store.history.s00000001"), "rollouts ended in step 1");
  BOOST_TEST(read_checkpoint(v3, Contents::restore).damaged_logs.empty());
  BOOST_TEST(read_checkpoint(v3, Contents::no_tensor_data).damaged_logs.size() == 1u);
  // A segment before the starts that does not open (its file cut short): the logs whole, the damage named.
  fs::resize_file(segment_file(dir.path, "store.span_log.s00000001"), 200);
  const Checkpoint cut = read_checkpoint(v3, Contents::restore);
  BOOST_TEST(cut.store_log_starts.empty());
  BOOST_TEST(cut.store_history_offset == 0u);
  BOOST_TEST(cut.damaged_logs.size() == 2u);
  BOOST_TEST(cut.store_history_lost_bytes.has_value());
}

BOOST_AUTO_TEST_CASE(a_version_written_again_never_links_to_itself_and_stale_links_are_caught) {
  TempDir dir;
  const std::string d = dir.path.string();
  WriteOptions incremental;
  incremental.full_every = 10;
  auto with_block1 = [](std::int64_t step, float shift) {
    Checkpoint c = frozen_base(step);
    for (int i = 400; i < 700; ++i) c.parameters[i] += shift;  // "block0"
    return c;
  };
  write_checkpoint(d, 1, frozen_base(1), incremental);
  write_checkpoint(d, 2, with_block1(2, 0.25f), incremental);
  const std::string v3 = write_checkpoint(d, 3, with_block1(3, 0.25f), incremental);  // block0 links to v2
  // Back to version 1 (as --resume PATH does) and on: version 2 again, with other values.
  set_latest(d, "v00000001.h5");
  const std::string v2 = write_checkpoint(d, 2, with_block1(2, 0.75f), incremental);
  expect_same(read_checkpoint(v2), with_block1(2, 0.75f));
  // The old version 3 linked to the old version 2's block0: that data is gone, and the read says so.
  BOOST_CHECK_THROW(read_checkpoint(v3), CorruptCheckpoint);
  // LATEST naming a later step than the one written is no parent: the version is full.
  set_latest(d, "v00000003.h5");
  BOOST_TEST(read_checkpoint(write_checkpoint(d, 2, frozen_base(2), incremental)).chain == 0);
}

BOOST_AUTO_TEST_CASE(restore_takes_the_newest_version_and_retention_keeps_latest) {
  TempDir dir;
  const std::string d = dir.path.string();
  for (int v = 1; v <= 4; ++v) write_checkpoint(d, v, sample(v));
  set_latest(d, "v00000002.h5");                   // a crash between a version's rename and LATEST
  BOOST_TEST(load_latest(d)->second.step == 4);    // renamed into place: committed
  BOOST_TEST(apply_retention(d, 1).size() == 2u);  // v1 and v3; v4 is the newest, v2 is LATEST
  BOOST_TEST(fs::exists(dir.path / "v00000002.h5"));
  // A resumed run keeps one timeline: later versions are set aside, not read.
  BOOST_TEST(supersede_newer_versions(d, 2) == "v00000004.h5");
  BOOST_TEST(load_latest(d)->second.step == 2);
  bool set_aside = false;
  for (const auto& e : fs::directory_iterator(dir.path))
    set_aside = set_aside || e.path().filename().string().rfind("v00000004.h5.superseded-", 0) == 0;
  BOOST_TEST(set_aside);
  // An accept hook may turn a version down (its store does not decode): the one before is used.
  write_checkpoint(d, 3, sample(3));
  auto found = load_latest(d, [](const std::string& path, Checkpoint&) {
    if (path.find("v00000003") != std::string::npos) throw CorruptCheckpoint("test: turned down");
  });
  BOOST_TEST(found->second.step == 2);
  // When no version restores, that is an error, not a fresh start.
  flip_byte_of(dir.path / "v00000002.h5", "12345 678");
  flip_byte_of(dir.path / "v00000003.h5", "12345 678");
  BOOST_CHECK_THROW(load_latest(d), CorruptCheckpoint);
  // A fresh run sets the whole directory aside.
  const std::string moved = supersede_directory(d);
  BOOST_TEST(moved.find(".superseded-") != std::string::npos);
  BOOST_TEST(!fs::exists(dir.path));
  fs::rename(moved, dir.path);  // for the TempDir's clean-up
}

BOOST_AUTO_TEST_CASE(tensors_are_partitioned_by_bytes) {
  std::vector<TensorInfo> t{{"a", 100}, {"b", 100}, {"c", 100}, {"d", 100}};
  auto parts = partition_tensors(t, 2);
  BOOST_TEST(parts[0] == (std::vector<std::size_t>{0, 1}));
  BOOST_TEST(parts[1] == (std::vector<std::size_t>{2, 3}));
  parts = partition_tensors(t, 3);
  std::size_t total = 0;
  for (const auto& p : parts) total += p.size();
  BOOST_TEST(total == 4u);
  BOOST_TEST(partition_tensors(t, 1)[0].size() == 4u);
}

BOOST_AUTO_TEST_SUITE_END()
