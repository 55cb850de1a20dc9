// Rank 0's released spans read back from real checkpoint versions (issue 11, point 3): the
// span log written over several versions (one segment each), the store letting go of the
// spans the newest version holds, and every query answered as before.
#include "../../src/app/store_archive.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "../temp_dir.hpp"
#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/clock.hpp"

using namespace arclight;
using namespace arclight::store;

namespace {

// Ended rollouts with `spans` spans each, the spans of two rollouts interleaved as concurrent runners add them.
std::vector<RolloutId> run_two(MemoryStore& store, const std::string& task, int spans) {
  std::vector<NewRollout> two(2);
  two[0].input = task + " a";
  two[1].input = task + " b";
  store.enqueue(two);
  const std::vector<AttemptedRollout> taken = store.dequeue("w", 2);
  for (int k = 0; k < spans; ++k)
    for (const AttemptedRollout& t : taken) {
      Span s;
      s.rollout_id = t.rollout.id;
      s.attempt_id = t.attempt.id;
      s.name = t.rollout.input + " " + std::to_string(k);
      s.attributes.push_back({"completion", std::string(100 + k, 'x')});
      store.add_span(s);
    }
  std::vector<RolloutId> ids;
  for (const AttemptedRollout& t : taken) {
    AttemptUpdate ended;
    ended.status = AttemptStatus::succeeded;
    store.update_attempt(t.rollout.id, t.attempt.id, ended);
    ids.push_back(t.rollout.id);
  }
  return ids;
}

std::vector<std::string> spans_of(MemoryStore& store, RolloutId id) {
  SpanFilter f;
  f.rollout_id = id;
  std::vector<std::string> out;
  for (const Span& s : store.query_spans(f, {}).items)
    out.push_back(std::to_string(s.sequence_id) + " " + s.name + " " +
                  std::to_string(std::get<std::string>(s.attributes.at(0).value).size()));
  return out;
}

// Versions as rank 0 writes them: the logs' new parts only, as new segments.
struct VersionWriter {
  std::size_t history_from = 0, spans_from = 0;
  std::uint64_t history_bytes = 0, span_bytes = 0;

  // Returns the version's part of the history.
  std::string write(const std::string& dir, int step, MemoryStore& store) {
    const MemoryStore::Snapshot s = store.export_state(history_from, spans_from);
    ckpt::Checkpoint c;
    c.step = step;
    c.config_toml = "run.steps=3\n";
    c.coordinator_rng = "1";
    c.parameters.assign(10, float(step));
    c.store_tables = s.tables;
    c.store_history = s.history;
    c.store_history_offset = history_bytes;
    c.span_log = s.span_log;
    c.span_log_offset = span_bytes;
    c.span_log_entries = s.span_log_end - spans_from;
    ckpt::WriteOptions incremental;
    incremental.full_every = 100;
    ckpt::write_checkpoint(dir, step, c, incremental);
    history_from = s.history_end, spans_from = s.span_log_end;
    history_bytes += s.history.size(), span_bytes += s.span_log.size();
    return s.history;
  }
};

// Three versions, each with two rollouts of 3, 4 and 5 spans.
std::vector<RolloutId> three_versions(const std::string& dir, MemoryStore& store, VersionWriter& versions) {
  std::vector<RolloutId> ids;
  for (int step = 1; step <= 3; ++step) {
    for (RolloutId id : run_two(store, "step " + std::to_string(step), 2 + step)) ids.push_back(id);
    versions.write(dir, step, store);
  }
  return ids;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(store_archive)

BOOST_AUTO_TEST_CASE(released_spans_read_back_from_the_versions_span_log) {
  TempDir dir;
  ManualClock clock;
  MemoryStore store(clock);
  VersionWriter versions;
  const std::vector<RolloutId> ids = three_versions(dir.dir(), store, versions);
  BOOST_REQUIRE(ckpt::log_segments(dir.file("v00000003.h5"), "/store/span_log").size() == 3u);
  const RolloutId unsaved = run_two(store, "after the checkpoint", 2).front();

  std::vector<std::vector<std::string>> before;
  for (RolloutId id : ids) before.push_back(spans_of(store, id));
  store.set_archive(std::make_shared<app::CheckpointStoreArchive>(dir.dir(), true));
  BOOST_TEST(store.release_spans(versions.spans_from, {}) == 2u * (3 + 4 + 5));
  for (std::size_t i = 0; i < ids.size(); ++i) BOOST_TEST(spans_of(store, ids[i]) == before[i], "rollout " << ids[i]);
  BOOST_TEST(spans_of(store, unsaved).size() == 2u);
  // A version gone from under the store is an answer, not the end of rank 0.
  std::filesystem::remove_all(dir.path / "segments");
  BOOST_CHECK_THROW(spans_of(store, ids.front()), StoreError);
}

// A segment says how many entries it holds: a query of late spans reads their segment alone, not every one before it
// to count entries (the span log is ~GBs late in a run). A damaged first segment shows which were read.
BOOST_AUTO_TEST_CASE(a_query_reads_only_the_segment_that_holds_its_spans) {
  TempDir dir;
  ManualClock clock;
  MemoryStore store(clock);
  VersionWriter versions;
  const std::vector<RolloutId> ids = three_versions(dir.dir(), store, versions);
  const std::string latest = dir.file("v00000003.h5");
  const std::vector<std::string> segments = ckpt::log_segments(latest, "/store/span_log");
  BOOST_REQUIRE(segments.size() == 3u);
  BOOST_TEST(ckpt::log_segment_entries(latest, segments[0]).value_or(0) == 2u * 3);
  BOOST_TEST(ckpt::log_segment_entries(latest, segments[2]).value_or(0) == 2u * 5);
  const std::vector<std::string> step3 = spans_of(store, ids[4]), step1 = spans_of(store, ids[0]);

  // The first segment's data damaged: its spans ("x" * 100...) overwritten in place.
  std::filesystem::path first;
  for (const auto& f : std::filesystem::directory_iterator(dir.path / "segments"))
    if (f.path().filename().string().rfind("store.span_log.s00000001-", 0) == 0) first = f.path();
  BOOST_REQUIRE(!first.empty());
  std::fstream file(first, std::ios::in | std::ios::out | std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::size_t at = bytes.find(std::string(100, 'x'));
  BOOST_REQUIRE(at != std::string::npos);
  file.seekp(static_cast<std::streamoff>(at));
  file.put('y');
  file.close();

  store.set_archive(std::make_shared<app::CheckpointStoreArchive>(dir.dir(), true));
  store.release_spans(versions.spans_from, {});
  BOOST_TEST(spans_of(store, ids[4]) == step3);
  BOOST_CHECK_THROW(spans_of(store, ids[0]), StoreError);  // its own segment is damaged: an answer, as before
  BOOST_TEST(step1.size() == 3u);
}

// The history a segment a time: a resources version asked for is sought newest first and the walk ends where it is
// found (a runner's rollout that waited past a checkpoint names a recent one; the whole history is ~GBs late in a run).
BOOST_AUTO_TEST_CASE(the_history_reads_a_segment_at_a_time_newest_first) {
  TempDir dir;
  ManualClock clock;
  MemoryStore store(clock);
  std::vector<std::string> parts;
  VersionWriter versions;
  for (int step = 1; step <= 3; ++step) {
    if (step == 1)
      store.add_resources("policy", "weights 1");
    else
      store.update_resources("policy", "weights " + std::to_string(step));
    run_two(store, "step " + std::to_string(step), 1);
    parts.push_back(versions.write(dir.dir(), step, store));
  }
  store.update_resources("policy", "weights 4");
  app::CheckpointStoreArchive archive(dir.dir(), false);
  std::vector<std::string> seen;
  archive.history(StoreArchive::Order::newest_first, [&](std::string_view segment) {
    seen.emplace_back(segment);
    return false;
  });
  BOOST_TEST(seen == std::vector<std::string>{parts.back()}, "the newest segment alone");
  seen.clear();
  archive.history(StoreArchive::Order::oldest_first, [&](std::string_view segment) {
    seen.emplace_back(segment);
    return true;
  });
  BOOST_TEST(seen == parts);

  store.set_archive(std::make_shared<app::CheckpointStoreArchive>(dir.dir(), false));
  store.release_spans(versions.spans_from, {});
  BOOST_TEST(store.release_records(versions.history_from, {}) == 6u);
  for (ResourcesId id = 1; id <= 4; ++id)
    BOOST_TEST(store.get_resources(id).content == "weights " + std::to_string(id));
}

BOOST_AUTO_TEST_SUITE_END()
