// Parallel checkpoint writes (mpirun -np 3): rank 0 holds meta and store, ranks 1 and 2 each
// hold a share of the tensors; together they write one file that reads back whole.
#include "../mpi_test_main.hpp"

#include <filesystem>

#include "arclight/ckpt/checkpoint.hpp"
#include "same_checkpoint.hpp"

using namespace arclight;
using namespace arclight::ckpt;
namespace fs = std::filesystem;

namespace {
int rank_ = 0, size_ = 1;

// Every rank builds the same state; what each writes is chosen by its Part.
Checkpoint state(std::int64_t step) {
  Checkpoint c;
  c.step = step;
  c.policy_version = step;
  c.config_toml = "run.steps = 9\n";
  c.arclight_version = "test";
  c.tensors = {{"embed", 3000}, {"block0", 2000}, {"block1", 2000}, {"head", 1000}};
  for (std::size_t i = 0; i < 8000; ++i) {
    const bool trains = i >= 7000;  // only the head
    c.parameters.push_back(float(i % 101) + (trains ? float(step) : 0.f));
    c.exp_avg.push_back(trains ? float(step) : 0.f);
    c.exp_avg_sq.push_back(trains ? float(step) * 0.5f : 0.f);
  }
  c.optimizer_steps = {0, 0, 0, step};
  c.coordinator_rng = "rng " + std::to_string(step);
  for (int s = 1; s <= step; ++s) c.metrics_jsonl += "{\"step\":" + std::to_string(s) + "}\n";
  c.store_tables = "tables " + std::to_string(step);
  c.store_history = std::string(static_cast<std::size_t>(step) * 10, 'h');
  c.span_log = std::string(static_cast<std::size_t>(step) * 100, 's');
  c.untrained_rollouts = {step * 10 + 1, step * 10 + 2};
  return c;
}

std::string shared_dir() {
  std::string dir;
  if (rank_ == 0) {
    char name[] = "/tmp/arclight_pckpt_XXXXXX";
    dir = mkdtemp(name);
  }
  int n = static_cast<int>(dir.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<std::size_t>(n));
  MPI_Bcast(dir.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return dir;
}

WriteOptions options_for_rank(const Checkpoint& c, int full_every) {
  WriteOptions o;
  o.full_every = full_every;
  o.comm = MPI_COMM_WORLD;
  o.part.all_tensors = false;
  o.part.meta_and_store = rank_ == 0;
  o.part.model_index = rank_ == 1;
  if (rank_ > 0) o.part.tensors = partition_tensors(c.tensors, size_ - 1)[static_cast<std::size_t>(rank_ - 1)];
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(parallel_checkpoint)

BOOST_AUTO_TEST_CASE(ranks_write_their_shares_into_one_file) {
  BOOST_REQUIRE(size_ >= 2);
  const std::string dir = shared_dir();
  for (std::int64_t step = 1; step <= 4; ++step) {
    const Checkpoint c = state(step);
    const WriteOptions options = options_for_rank(c, 3);
    write_checkpoint(dir, step, rank_ == 0 ? c : pack_tensors(c, options.part.tensors), options);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) {
    for (std::int64_t step = 1; step <= 4; ++step)
      expect_same(read_checkpoint((fs::path(dir) / version_file_name(step)).string()), state(step));
    // Version 3 is incremental on 2, which is incremental on 1: the frozen tensors live in 1
    // (and the log's segments in files of their own).
    const std::string v3 = (fs::path(dir) / version_file_name(3)).string();
    BOOST_TEST(read_checkpoint(v3).chain == 2);
    std::vector<std::string> versions_linked;
    for (const std::string& f : linked_files(v3))
      if (f[0] == 'v') versions_linked.push_back(f);
    BOOST_TEST(versions_linked == (std::vector<std::string>{"v00000001.h5"}));
    BOOST_TEST(read_checkpoint((fs::path(dir) / version_file_name(4)).string()).chain == 0);
    BOOST_TEST(load_latest(dir)->second.step == 4);
    fs::remove_all(dir);
  }
}

// Rank 0 fails after its temporary went into place (LATEST cannot be written: a directory holds its name): its own
// error, at once, not "another rank's write failed first" (the temporary it looked for was its own, renamed).
BOOST_AUTO_TEST_CASE(a_failure_in_rank_0s_commit_is_its_own) {
  const std::string dir = shared_dir();
  if (rank_ == 0) fs::create_directories(fs::path(dir) / "LATEST" / "occupied");
  MPI_Barrier(MPI_COMM_WORLD);
  const Checkpoint c = state(1);
  const WriteOptions options = options_for_rank(c, 3);
  std::string failure;
  try {
    write_checkpoint(dir, 1, rank_ == 0 ? c : pack_tensors(c, options.part.tensors), options);
  } catch (const PeerWriteFailed& e) {
    failure = std::string("peer: ") + e.what();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (rank_ == 0) {
    BOOST_TEST(failure.rfind("peer: ", 0) == std::string::npos, failure);
    BOOST_TEST(failure.find("LATEST") != std::string::npos, failure);
  } else {
    BOOST_TEST(failure.empty(), failure);  // their part was done before rank 0's commit
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

int main(int argc, char** argv) { return mpi_test_main(argc, argv, rank_, size_); }
