#include "arclight/ckpt/checkpoint.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "arclight/ckpt/inspect.hpp"

using namespace arclight;
using namespace arclight::ckpt;
namespace fs = std::filesystem;

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/arclight_ckpt_XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() { fs::remove_all(path); }
};

Checkpoint sample(std::int64_t step) {
  Checkpoint c;
  c.step = step;
  c.policy_version = step;
  c.config_toml = "run.steps=10\n";
  c.arclight_version = "0.1.0 test";
  c.created = 1.5;
  for (int i = 0; i < 1000; ++i) c.parameters.push_back(float(i) * 0.25f + float(step));
  c.exp_avg.assign(1000, 0.5f);
  c.exp_avg_sq.assign(1000, 0.125f);
  c.optimizer_steps = {step, step};
  c.coordinator_rng = "12345 678";
  c.metrics_jsonl = "{\"step\":1,\"reward\":2}\n";
  c.policy_resources = {"version=0 checksum=1", "version=1 checksum=2"};
  c.store_statistics = {1, 2, 3};
  return c;
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
  Checkpoint back = read_checkpoint(path);
  Checkpoint want = sample(7);
  BOOST_TEST(back.step == 7);
  BOOST_TEST(back.parameters == want.parameters);
  BOOST_TEST(back.exp_avg_sq == want.exp_avg_sq);
  BOOST_TEST(back.optimizer_steps == want.optimizer_steps);
  BOOST_TEST(back.policy_resources == want.policy_resources);
  BOOST_TEST(back.metrics_jsonl == want.metrics_jsonl);
  BOOST_TEST(back.coordinator_rng == want.coordinator_rng);
  auto latest = load_latest(dir.path.string());
  BOOST_REQUIRE(latest.has_value());
  BOOST_TEST(latest->second.step == 7);
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
}

BOOST_AUTO_TEST_SUITE_END()
