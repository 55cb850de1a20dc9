// The file system failing under a checkpoint directory (a permission, a full disk): never taken for damage, never a
// version committed with bytes missing. The permission cases run as nobody in a child where the tests run as root.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "../temp_dir.hpp"
#include "arclight/ckpt/checkpoint.hpp"
#include "checkpoint_samples.hpp"

using namespace arclight;
using namespace arclight::ckpt;
namespace fs = std::filesystem;

namespace {

// Runs `f` as a user whom file permissions bind: root reads any file, so where the tests run as root, `f` runs in a
// child as nobody. Returns what `f` returned.
int as_unprivileged(const std::function<int()>& f) {
  if (::geteuid() != 0) return f();
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(100);
    ::_exit(f());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 101;
}

// What reading the newest version of `dir` ends in, as an exit code: 0 for an error (not damage) whose message has
// `expected`.
int outcome_of_reading(const std::string& dir, const std::string& expected) {
  try {
    return load_latest(dir) ? 1 : 2;
  } catch (const CorruptCheckpoint& e) {
    std::fprintf(stderr, "taken for damage: %s\n", e.what());
    return 3;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return std::string(e.what()).find(expected) != std::string::npos ? 0 : 4;
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_storage_failures)

// A segment that is there and does not open (no permission here; an I/O error or a stale NFS handle alike) is not
// damage: the read stops and names why. Left out, its records were gone from the run, and retention deleted the file.
BOOST_AUTO_TEST_CASE(a_segment_there_that_does_not_open_stops_the_read) {
  TempDir dir;
  const std::string d = dir.file("checkpoints");
  WriteOptions incremental;
  incremental.full_every = 10;
  write_checkpoint(d, 1, growing(1));
  write_checkpoint(d, 2, growing(2), incremental);
  const fs::path history_of_step_1 = segment_file(d, "store.history.s00000001");
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::permissions(history_of_step_1, fs::perms::none);
  const int outcome = as_unprivileged([&] { return outcome_of_reading(d, "cannot be read now (Permission denied)"); });
  fs::permissions(history_of_step_1, fs::perms::owner_read | fs::perms::owner_write);
  BOOST_TEST(outcome == 0);
  BOOST_TEST(fs::exists(history_of_step_1));
}

// A checkpoint directory that does not list is an error, not "no checkpoint": the run started afresh and set the
// versions it could not see aside.
BOOST_AUTO_TEST_CASE(a_checkpoint_directory_that_does_not_list_is_an_error) {
  TempDir dir;
  const std::string d = dir.file("checkpoints");
  write_checkpoint(d, 1, growing(1));
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  const fs::perms write_and_search = fs::perms::owner_write | fs::perms::owner_exec | fs::perms::group_write |
                                     fs::perms::group_exec | fs::perms::others_write | fs::perms::others_exec;
  fs::permissions(d, write_and_search);
  const int outcome = as_unprivileged([&] { return outcome_of_reading(d, "cannot list checkpoint directory"); });
  fs::permissions(d, fs::perms::owner_all);
  BOOST_TEST(outcome == 0);
}

// A segment whose last bytes do not reach the file is not committed: HDF5 writes a small dataset as it closes it, and
// a failure there (the file size limit here, a full disk alike) was not seen: the file went into place, its tail
// zeros under the checksum of the data.
BOOST_AUTO_TEST_CASE(a_segment_that_does_not_close_is_not_committed) {
  TempDir dir;
  const std::string d = dir.file("checkpoints");
  Checkpoint c = growing(1);
  c.store_history = std::string(40000, 'h');  // under the sieve buffer (64 KiB), over the limit
  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails (EFBIG) instead
    const rlimit limit{16384, 16384};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write_checkpoint(d, 1, c);
    } catch (const std::exception&) {
      ::_exit(0);
    }
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  for (const auto& e : fs::directory_iterator(fs::path(d) / "segments"))
    BOOST_TEST(e.path().filename().string().rfind("store.history", 0) != 0, e.path());
}

BOOST_AUTO_TEST_SUITE_END()
