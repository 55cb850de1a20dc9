// A checkpoint directory is input, like a wire message: versions edited by a hostile user (links
// and storage that lead outside, forged sizes, planted symlinks, renamed copies, damaged log
// segments) must give one clear error or a skip to the version before, never a read outside the
// directory, a hang, a crash or a write through a link (issue 17, points 7 to 11 and 15).
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "../temp_dir.hpp"
#include "checkpoint_samples.hpp"
#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/ckpt/inspect.hpp"
#include "arclight/core/crc32c.hpp"

using namespace arclight;
using namespace arclight::ckpt;
namespace fs = std::filesystem;

namespace {

// Versions 1 to `last` in `dir`, each incremental on the one before.
void write_versions(const TempDir& dir, int last) {
  WriteOptions incremental;
  incremental.full_every = 100;
  for (int v = 1; v <= last; ++v) write_checkpoint(dir.dir(), v, growing(v), incremental);
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A version opened for writing, edited as a hostile user would.
struct Edit {
  hid_t file;
  explicit Edit(const fs::path& path) : file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) {
    BOOST_REQUIRE(file >= 0);
  }
  ~Edit() { H5Fclose(file); }
  void remove(const std::string& name) { BOOST_REQUIRE(H5Ldelete(file, name.c_str(), H5P_DEFAULT) >= 0); }
  void link(const std::string& name, const std::string& target_file, const std::string& target_object) {
    remove(name);
    BOOST_REQUIRE(H5Lcreate_external(target_file.c_str(), target_object.c_str(), file, name.c_str(), H5P_DEFAULT,
                                     H5P_DEFAULT) >= 0);
  }
  // Replaces `name` with `count` bytes laid out by `dcpl`, with the checksum of `expected`.
  void bytes_dataset(const std::string& name, hsize_t count, hid_t dcpl, const std::string& expected) {
    remove(name);
    hid_t space = H5Screate_simple(1, &count, nullptr);
    hid_t set = H5Dcreate2(file, name.c_str(), H5T_NATIVE_UINT8, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    BOOST_REQUIRE(set >= 0);
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(set, "crc32c", H5T_NATIVE_UINT32, scalar, H5P_DEFAULT, H5P_DEFAULT);
    const std::uint32_t crc = crc32c(expected.data(), expected.size());
    H5Awrite(attr, H5T_NATIVE_UINT32, &crc);
    H5Aclose(attr);
    H5Sclose(scalar);
    H5Dclose(set);
    H5Sclose(space);
  }
  // Replaces an int64 dataset's values, with their checksum.
  void numbers(const std::string& name, const std::vector<std::int64_t>& values) {
    remove(name);
    hsize_t count = values.size();
    hid_t space = H5Screate_simple(1, &count, nullptr);
    hid_t set = H5Dcreate2(file, name.c_str(), H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(set, "crc32c", H5T_NATIVE_UINT32, scalar, H5P_DEFAULT, H5P_DEFAULT);
    const std::uint32_t crc = crc32c(values.data(), values.size() * sizeof(std::int64_t));
    H5Awrite(attr, H5T_NATIVE_UINT32, &crc);
    H5Aclose(attr);
    H5Sclose(scalar);
    H5Dclose(set);
    H5Sclose(space);
  }
};

// Version 2 refused, for `why`, by every reader: the read, the restore (which takes version 1)
// and inspect.
void expect_refused(const TempDir& dir, const std::string& why) {
  const std::string v2 = dir.file("v00000002.h5");
  try {
    read_checkpoint(v2);
    BOOST_ERROR("version 2 read back");
  } catch (const CorruptCheckpoint& e) {
    BOOST_TEST(std::string(e.what()).find(why) != std::string::npos, e.what());
  }
  auto latest = load_latest(dir.dir());
  BOOST_REQUIRE(latest.has_value());
  BOOST_TEST(latest->second.step == 1);
  BOOST_TEST(latest->second.coordinator_rng == "12345 678");
  const DirectoryReport report = inspect_directory(dir.dir());
  BOOST_REQUIRE(report.versions.size() == 2u);
  BOOST_TEST(!report.versions[1].valid);
}

// A file outside the checkpoint directory that holds what version 2's random state should.
struct Outside {
  TempDir dir;
  std::string copy_of(const TempDir& checkpoints) {
    fs::copy_file(checkpoints.file("v00000001.h5"), dir.file("outside.h5"));
    return dir.file("outside.h5");
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(hostile_checkpoint_directory)

// Point 7: an external link may name only a file inside the checkpoint directory.
BOOST_AUTO_TEST_CASE(an_external_link_to_an_absolute_path_is_refused) {
  TempDir dir;
  Outside outside;
  write_versions(dir, 2);
  const std::string target = outside.copy_of(dir);
  Edit(dir.file("v00000002.h5")).link("/rng/coordinator", target, "/rng/coordinator");
  expect_refused(dir, "absolute path");
}

BOOST_AUTO_TEST_CASE(an_external_link_through_dotdot_is_refused) {
  TempDir dir;
  Outside outside;
  write_versions(dir, 2);
  outside.copy_of(dir);
  const std::string up = "../" + outside.dir.path.filename().string() + "/outside.h5";
  Edit(dir.file("v00000002.h5")).link("/rng/coordinator", up, "/rng/coordinator");
  expect_refused(dir, "climbs out");
}

BOOST_AUTO_TEST_CASE(an_external_link_to_a_symlink_is_refused) {
  TempDir dir;
  Outside outside;
  write_versions(dir, 2);
  fs::create_symlink(outside.copy_of(dir), dir.path / "inside.h5");
  Edit(dir.file("v00000002.h5")).link("/rng/coordinator", "inside.h5", "/rng/coordinator");
  expect_refused(dir, "not a regular file");
}

BOOST_AUTO_TEST_CASE(a_symlinked_segments_folder_is_not_read_through) {
  TempDir dir;
  Outside outside;
  write_versions(dir, 2);
  fs::rename(dir.path / "segments", outside.dir.path / "segments");
  fs::create_directory_symlink(outside.dir.path / "segments", dir.path / "segments");
  // Every log is damaged (and said so): none of it is read from outside.
  const Checkpoint c = read_checkpoint(dir.file("v00000002.h5"));
  BOOST_TEST(c.span_log.empty());
  BOOST_TEST(c.store_history.empty());
  BOOST_TEST(c.metrics_jsonl.empty());
  BOOST_TEST(c.store_history_lost_bytes.value_or(0) == growing(2).store_history.size());
  BOOST_REQUIRE(c.damaged_logs.size() == 6u);  // two segments of each of three logs
  for (const std::string& d : c.damaged_logs) BOOST_TEST(d.find("not a folder") != std::string::npos, d);
}

BOOST_AUTO_TEST_CASE(an_external_link_to_a_fifo_does_not_hang) {
  TempDir dir;
  write_versions(dir, 2);
  BOOST_REQUIRE(::mkfifo(dir.file("fifo.h5").c_str(), 0600) == 0);
  Edit(dir.file("v00000002.h5")).link("/rng/coordinator", "fifo.h5", "/rng/coordinator");
  expect_refused(dir, "not a regular file");
}

BOOST_AUTO_TEST_CASE(a_fifo_in_place_of_a_version_does_not_hang) {
  TempDir dir;
  write_versions(dir, 1);
  BOOST_REQUIRE(::mkfifo(dir.file("v00000002.h5").c_str(), 0600) == 0);
  BOOST_CHECK_THROW(read_checkpoint(dir.file("v00000002.h5")), CorruptCheckpoint);
  BOOST_TEST(load_latest(dir.dir())->second.step == 1);
  BOOST_TEST(apply_retention(dir.dir(), 1).empty());  // it does not read: nothing is deleted
}

BOOST_AUTO_TEST_CASE(a_symlink_in_place_of_a_version_is_refused) {
  TempDir dir;
  Outside outside;
  write_versions(dir, 2);
  fs::copy_file(dir.path / "v00000002.h5", outside.dir.path / "v00000002.h5");
  fs::remove(dir.path / "v00000002.h5");
  fs::create_symlink(outside.dir.path / "v00000002.h5", dir.path / "v00000002.h5");
  expect_refused(dir, "symbolic link");
}

BOOST_AUTO_TEST_CASE(external_raw_storage_is_refused) {
  TempDir dir;
  Outside outside;
  write_versions(dir, 2);
  std::ofstream(outside.dir.file("secret.txt")) << "12345 678";
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_external(dcpl, outside.dir.file("secret.txt").c_str(), 0, 9);
  Edit(dir.file("v00000002.h5")).bytes_dataset("/rng/coordinator", 9, dcpl, "12345 678");
  H5Pclose(dcpl);
  expect_refused(dir, "external storage");
}

BOOST_AUTO_TEST_CASE(a_virtual_dataset_is_refused) {
  TempDir dir;
  Outside outside;
  write_versions(dir, 2);
  const std::string source = outside.copy_of(dir);
  hsize_t count = 9;
  hid_t space = H5Screate_simple(1, &count, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  BOOST_REQUIRE(H5Pset_virtual(dcpl, space, source.c_str(), "/rng/coordinator", space) >= 0);
  Edit(dir.file("v00000002.h5")).bytes_dataset("/rng/coordinator", 9, dcpl, "12345 678");
  H5Pclose(dcpl);
  H5Sclose(space);
  expect_refused(dir, "not stored contiguously");
}

// Point 8: a size the file does not hold skips the version; it never allocates.
BOOST_AUTO_TEST_CASE(a_terabyte_declared_through_external_storage_skips_the_version) {
  TempDir dir;
  write_versions(dir, 2);
  const hsize_t terabyte = hsize_t(1) << 40;
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_external(dcpl, "nothing.bin", 0, terabyte);
  Edit(dir.file("v00000002.h5")).bytes_dataset("/meta/config_toml", terabyte, dcpl, "");
  H5Pclose(dcpl);
  expect_refused(dir, "external storage");
}

BOOST_AUTO_TEST_CASE(forged_tensor_sizes_skip_the_version) {
  TempDir dir;
  write_versions(dir, 2);
  {
    Edit edit(dir.file("v00000002.h5"));
    edit.remove("/meta/links");  // what each link must find: a forger drops it too
    edit.numbers("/model/tensor_sizes", {std::int64_t(1) << 40});
  }
  expect_refused(dir, "wrong size");
}

BOOST_AUTO_TEST_CASE(two_datasets_on_the_same_bytes_skip_the_version) {
  TempDir dir;
  write_versions(dir, 2);
  {
    Edit edit(dir.file("v00000002.h5"));  // the optimizer's moments read the parameters' bytes again
    edit.remove("/meta/links");
    edit.remove("/optim/exp_avg/all");
    BOOST_REQUIRE(H5Lcreate_hard(edit.file, "/model/parameters/all", edit.file, "/optim/exp_avg/all", H5P_DEFAULT,
                                 H5P_DEFAULT) >= 0);
  }
  expect_refused(dir, "bytes another dataset holds");
}

// A version written before datasets carried XXH3-64 (only CRC-32C) restores, and a version incremental on it writes
// such a dataset anew rather than trusting the CRC alone to link it.
BOOST_AUTO_TEST_CASE(a_parent_dataset_without_xxh3_is_written_anew_not_linked) {
  TempDir dir;
  write_versions(dir, 1);
  const fs::path v1 = fs::path(dir.dir()) / "v00000001.h5";
  {
    Edit e(v1);
    BOOST_REQUIRE(H5Adelete_by_name(e.file, "/optim/exp_avg/all", "xxh3_64", H5P_DEFAULT) >= 0);
  }
  BOOST_TEST(read_checkpoint(v1.string()).exp_avg == growing(1).exp_avg);
  WriteOptions incremental;
  incremental.full_every = 100;
  const std::string v2 = write_checkpoint(dir.dir(), 2, growing(2), incremental);
  auto link_type = [&](const char* name) {
    hid_t file = H5Fopen(v2.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    H5L_info_t info;
    const herr_t got = H5Lget_info(file, name, &info, H5P_DEFAULT);
    H5Fclose(file);
    BOOST_REQUIRE(got >= 0);
    return info.type;
  };
  BOOST_TEST(link_type("/optim/exp_avg/all") == H5L_TYPE_HARD);
  BOOST_TEST(link_type("/optim/exp_avg_sq/all") == H5L_TYPE_EXTERNAL);  // unchanged, with both checksums
  const Checkpoint back = read_checkpoint(v2);
  BOOST_TEST(back.exp_avg == growing(2).exp_avg);
  BOOST_TEST(back.parameters == growing(2).parameters);
}

// A negative policy version would reach the runners as the weight channel's end of training.
BOOST_AUTO_TEST_CASE(a_negative_policy_version_is_refused) {
  TempDir dir;
  write_versions(dir, 2);
  Edit(dir.path / "v00000002.h5").numbers("/meta/policy_version", {-1});
  expect_refused(dir, "policy_version is negative");
}

// A step outside 0..99999999 would go on to versions named outside the 8-digit pattern, never found again: refused in
// a directory and in a version given by path alike (a copy under another name skips the name's check).
BOOST_AUTO_TEST_CASE(a_step_no_version_name_holds_is_refused) {
  for (const std::int64_t step : {std::int64_t(-1), std::int64_t(100000000)}) {
    TempDir dir;
    write_versions(dir, 2);
    Edit(dir.path / "v00000002.h5").numbers("/meta/step", {step});
    expect_refused(dir, "/meta/step is " + std::to_string(step));
    const fs::path copy = dir.path / "copy.h5";
    fs::copy_file(dir.path / "v00000002.h5", copy);
    BOOST_CHECK_THROW(read_checkpoint(copy.string()), CorruptCheckpoint);
  }
}

// The optimizer's steps, one per tensor and none negative, are checked where a version is read: the trainers found a
// wrong count "does not fit this model" and ended the job, where the version before restores.
BOOST_AUTO_TEST_CASE(forged_optimizer_steps_skip_the_version) {
  TempDir dir;
  write_versions(dir, 2);
  {  // one tensor (the values as one dataset, "all"), two steps
    Edit edit(dir.path / "v00000002.h5");
    edit.remove("/meta/links");
    edit.numbers("/optim/steps", {2, 2});
  }
  expect_refused(dir, "2 steps for 1 tensors");
  Edit(dir.path / "v00000002.h5").numbers("/optim/steps", {-1});
  expect_refused(dir, "negative step");
}

// Point 10: a version whose file name says another step is skipped.
BOOST_AUTO_TEST_CASE(a_version_named_for_another_step_is_skipped) {
  TempDir dir;
  write_versions(dir, 3);
  fs::copy_file(dir.path / "v00000002.h5", dir.path / "v00000010.h5");
  BOOST_CHECK_THROW(read_checkpoint(dir.file("v00000010.h5")), CorruptCheckpoint);
  BOOST_TEST(load_latest(dir.dir())->second.step == 3);
  const DirectoryReport report = inspect_directory(dir.dir());
  BOOST_REQUIRE(report.versions.size() == 4u);
  BOOST_TEST(!report.versions[3].valid);
  BOOST_TEST(report.versions[3].problem.find("holds step 2") != std::string::npos, report.versions[3].problem);
}

// Names of versions that are no file to read (a link to itself, a dangling link, a directory): inspect reports each
// invalid beside the good versions, and the restore takes the newest good one.
BOOST_AUTO_TEST_CASE(version_names_that_are_no_files_are_reported_invalid) {
  TempDir dir;
  write_versions(dir, 2);
  fs::create_symlink("v00000009.h5", dir.path / "v00000009.h5");
  fs::create_symlink("gone.h5", dir.path / "v00000008.h5");
  fs::create_directory(dir.path / "v00000007.h5");
  const DirectoryReport report = inspect_directory(dir.dir());
  BOOST_REQUIRE(report.versions.size() == 5u);
  BOOST_TEST(report.versions[0].valid);
  BOOST_TEST(report.versions[1].valid);
  for (std::size_t i = 2; i < 5; ++i) {
    BOOST_TEST(!report.versions[i].valid);
    BOOST_TEST(report.versions[i].problem.find("not a readable file") != std::string::npos, report.versions[i].problem);
  }
  BOOST_TEST(report.versions[4].problem.find("symbolic links") != std::string::npos, report.versions[4].problem);
  BOOST_TEST(load_latest(dir.dir())->second.step == 2);
}

// Versions 1 to 3, and one bit of the first segment of a log flipped where it holds `text`
// (every version links that segment); the newest version, read back, without that part of the
// log; inspect and the version name the segment's file.
Checkpoint restored_without_a_damaged_segment(const TempDir& dir, const std::string& log, const std::string& text) {
  write_versions(dir, 3);
  fs::path first;
  for (const auto& e : fs::directory_iterator(dir.path / "segments"))
    if (e.path().filename().string().rfind(log + ".s00000001-", 0) == 0) first = e.path();
  BOOST_REQUIRE(!first.empty());
  std::string bytes = read_text(first);
  const auto at = bytes.find(text);
  BOOST_REQUIRE(at != std::string::npos);
  bytes[at] ^= 1;
  std::ofstream(first, std::ios::binary | std::ios::trunc) << bytes;

  auto latest = load_latest(dir.dir());
  BOOST_REQUIRE(latest.has_value());
  const Checkpoint c = latest->second;
  BOOST_TEST(c.step == 3);
  BOOST_TEST(c.parameters == growing(3).parameters);
  BOOST_REQUIRE(c.damaged_logs.size() == 1u);
  BOOST_TEST(c.damaged_logs[0].find(first.filename().string()) != std::string::npos, c.damaged_logs[0]);
  const std::string described = describe(inspect_directory(dir.dir()));
  BOOST_TEST(described.find("DAMAGED") != std::string::npos, described);
  BOOST_TEST(described.find(first.filename().string()) != std::string::npos, described);
  return c;
}

// Point 11: a damaged segment of the span log, shared by every version, leaves the model,
// the optimizer and the run's position restorable; inspect names the file.
BOOST_AUTO_TEST_CASE(a_damaged_span_log_segment_leaves_every_version_restorable) {
  TempDir dir;
  const Checkpoint c = restored_without_a_damaged_segment(dir, "store.span_log", "spans of step 1");
  BOOST_TEST(c.store_history == growing(3).store_history);
  BOOST_TEST(c.span_log == "spans of step 2;spans of step 3;");  // without the damaged part
  BOOST_TEST(!c.store_history_lost_bytes.has_value());
  // The run goes on from it: its next version holds the logs it restored, whole again.
  Checkpoint next = growing(4);
  next.span_log = "spans of step 4;";
  next.span_log_offset = c.span_log.size();
  WriteOptions options;
  options.full_every = 100;
  options.whole_log = [&c](const std::string&) { return c.span_log + "spans of step 4;"; };
  const Checkpoint v4 = read_checkpoint(write_checkpoint(dir.dir(), 4, next, options));
  BOOST_TEST(v4.damaged_logs.empty());
  BOOST_TEST(v4.span_log == "spans of step 2;spans of step 3;spans of step 4;");
}

// The same for the store's history, with the bytes the damaged segment held, as the version's
// links give them (the store keeps the ids it held as lost: memory_store_test).
BOOST_AUTO_TEST_CASE(a_damaged_history_segment_leaves_every_version_restorable) {
  TempDir dir;
  const Checkpoint c = restored_without_a_damaged_segment(dir, "store.history", "history of step 1");
  BOOST_TEST(c.span_log == growing(3).span_log);
  BOOST_TEST(c.store_history == "history of step 2;history of step 3;");
  BOOST_TEST(c.store_history_lost_bytes.value_or(0) == std::string("history of step 1;").size());
}

// Point 9: temporaries are created anew, never written through a planted link.
BOOST_AUTO_TEST_CASE(a_planted_latest_tmp_symlink_is_not_written_through) {
  TempDir dir;
  Outside outside;
  std::ofstream(outside.dir.file("precious")) << "precious";
  fs::create_symlink(outside.dir.file("precious"), dir.path / "LATEST.tmp");
  write_versions(dir, 1);
  BOOST_TEST(read_text(outside.dir.file("precious")) == "precious");
  BOOST_TEST(latest_version(dir.dir()) == "v00000001.h5");
}

BOOST_AUTO_TEST_CASE(a_planted_version_tmp_symlink_is_not_written_through) {
  TempDir dir;
  Outside outside;
  std::ofstream(outside.dir.file("precious")) << "precious";
  fs::create_symlink(outside.dir.file("precious"), dir.path / "v00000002.h5.tmp");
  write_versions(dir, 2);
  BOOST_TEST(read_text(outside.dir.file("precious")) == "precious");
  BOOST_TEST(read_checkpoint(dir.file("v00000002.h5")).step == 2);
}

BOOST_AUTO_TEST_CASE(retention_deletes_only_segment_names_and_never_through_a_link) {
  TempDir dir;
  Outside outside;
  write_versions(dir, 3);
  std::ofstream(dir.path / "segments" / "notes.txt") << "mine";
  apply_retention(dir.dir(), 1);
  BOOST_TEST(fs::exists(dir.path / "segments" / "notes.txt"));
  // segments/ as a link to a folder elsewhere: nothing there is deleted, and no write goes there.
  fs::rename(dir.path / "segments", outside.dir.path / "segments");
  fs::create_directory_symlink(outside.dir.path / "segments", dir.path / "segments");
  // A file there named as a segment that no version links: what retention deletes in a real segments/ folder.
  const fs::path unlinked = outside.dir.path / "segments" / "store.span_log.s00000009-00000000000000ff.h5";
  std::ofstream(unlinked) << "theirs";
  const std::size_t before = std::distance(fs::directory_iterator(outside.dir.path / "segments"), {});
  BOOST_CHECK_THROW(write_checkpoint(dir.dir(), 4, growing(4)), Error);
  apply_retention(dir.dir(), 1);
  BOOST_TEST(fs::exists(unlinked));
  BOOST_TEST(std::size_t(std::distance(fs::directory_iterator(outside.dir.path / "segments"), {})) == before);
}

// Point 12's mechanism: one holder at a time, named to the next; setting the directory aside keeps it.
BOOST_AUTO_TEST_CASE(a_directory_lock_names_its_holder_and_survives_setting_the_directory_aside) {
  TempDir dir;
  const std::string checkpoints = dir.file("checkpoints");
  fs::create_directory(checkpoints);
  DirectoryLock held(checkpoints, "checkpoint.dir");
  try {
    DirectoryLock second(checkpoints, "checkpoint.dir");
    BOOST_ERROR("a second lock was granted");
  } catch (const UsageError& e) {
    BOOST_TEST(std::string(e.what()).find("PID " + std::to_string(::getpid())) != std::string::npos, e.what());
  }
  write_checkpoint(checkpoints, 1, growing(1));
  const std::string moved = supersede_directory(checkpoints);
  BOOST_TEST(!moved.empty());
  BOOST_CHECK_THROW(DirectoryLock(checkpoints, "checkpoint.dir"), UsageError);
}

// Point 15: LATEST is shown only when it names a version; anything else is one plain sentence.
BOOST_AUTO_TEST_CASE(latest_with_terminal_escapes_is_not_printed) {
  TempDir dir;
  write_versions(dir, 1);
  std::ofstream(dir.path / "LATEST", std::ios::trunc) << "\x1b[2J\x1b]0;owned\x07../../etc/passwd\n";
  BOOST_TEST(latest_version(dir.dir()).empty());
  const std::string text = describe(inspect_directory(dir.dir()));
  BOOST_TEST(text.find('\x1b') == std::string::npos);
  BOOST_TEST(text.find("LATEST does not name a version file") != std::string::npos, text);
  BOOST_TEST(load_latest(dir.dir())->second.step == 1);
}

BOOST_AUTO_TEST_SUITE_END()
