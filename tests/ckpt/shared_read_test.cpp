// Restores read each byte once (mpirun -np 4): a version written by three trainers (ranks 1 to
// 3; rank 0 the meta and store) is read back by one, two, three and four ranks together, each its
// share, and every one of them ends with the whole, bit for bit; a damaged share makes every
// rank skip the version for the one before.
#include "../mpi_test_main.hpp"

#include <hdf5.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "arclight/ckpt/checkpoint.hpp"

using namespace arclight;
using namespace arclight::ckpt;
namespace fs = std::filesystem;

namespace {
int rank_ = 0, size_ = 1;

// Every rank builds the same state: tensors of uneven sizes, so that the shares of readers
// and writers differ; step 0 has no optimizer moments yet (a version saved before the first step).
Checkpoint state(std::int64_t step) {
  Checkpoint c;
  c.step = step;
  c.policy_version = step;
  c.config_toml = "run.steps = 9\n";
  c.arclight_version = "test";
  c.tensors = {{"embed", 300000}, {"block0", 250000}, {"block1", 250000}, {"block2", 150000}, {"head", 100000}};
  for (std::size_t i = 0; i < 1050000; ++i) {
    const bool trains = i >= 950000;  // only the head
    c.parameters.push_back(float(i % 101) * 0.37f + (trains ? float(step) : 0.f));
    if (step == 0) continue;
    c.exp_avg.push_back(trains ? float(step) + float(i) * 1e-6f : 0.f);
    c.exp_avg_sq.push_back(trains ? float(step) * 0.5f : float(i % 7));
  }
  c.optimizer_steps = {0, 0, 0, 0, step};
  c.coordinator_rng = "rng " + std::to_string(step);
  c.store_tables = "tables " + std::to_string(step);
  c.store_history = std::string(static_cast<std::size_t>(step) * 10, 'h');
  c.span_log = std::string(static_cast<std::size_t>(step) * 100, 's');
  return c;
}

std::string shared_dir() {
  std::string dir;
  if (rank_ == 0) {
    char name[] = "/tmp/arclight_shared_read_XXXXXX";
    dir = mkdtemp(name);
  }
  int n = static_cast<int>(dir.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<std::size_t>(n));
  MPI_Bcast(dir.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  return dir;
}

// Version `step` written as training writes it: rank 0 the meta and the store, the other ranks
// (three trainers) a share of the tensors each.
std::string write_version(const std::string& dir, std::int64_t step, int full_every) {
  const Checkpoint c = state(step);
  WriteOptions o;
  o.full_every = full_every;
  o.comm = MPI_COMM_WORLD;
  o.part.all_tensors = false;
  o.part.meta_and_store = rank_ == 0;
  o.part.model_index = rank_ == 1;
  if (rank_ > 0) o.part.tensors = partition_tensors(c.tensors, size_ - 1)[static_cast<std::size_t>(rank_ - 1)];
  return write_checkpoint(dir, step, rank_ == 0 ? c : pack_tensors(c, o.part.tensors), o);
}

// The first `readers` ranks, as a communicator of their own (MPI_COMM_NULL on the others).
MPI_Comm first_ranks(int readers) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank_ < readers ? 0 : MPI_UNDEFINED, rank_, &comm);
  return comm;
}

// Flips one byte in the middle of a tensor's stored values (rank 0, the others wait).
void damage(const std::string& path, const std::string& dataset) {
  if (rank_ == 0) {
    haddr_t offset = HADDR_UNDEF;
    hsize_t bytes = 0;
    {
      const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      const hid_t set = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
      offset = H5Dget_offset(set);
      bytes = H5Dget_storage_size(set);
      H5Dclose(set);
      H5Fclose(file);
    }
    BOOST_REQUIRE(offset != HADDR_UNDEF);
    const int fd = ::open(path.c_str(), O_RDWR);
    unsigned char byte = 0;
    const off_t at = static_cast<off_t>(offset + bytes / 2);
    BOOST_REQUIRE(::pread(fd, &byte, 1, at) == 1);
    byte ^= 0x10;
    BOOST_REQUIRE(::pwrite(fd, &byte, 1, at) == 1);
    ::close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shared_read)

BOOST_AUTO_TEST_CASE(a_version_of_three_writers_reads_back_whole_on_one_to_four_readers) {
  BOOST_REQUIRE(size_ == 4);
  const std::string dir = shared_dir();
  // Version 0 without moments; 1 full; 2 incremental on 1 (its frozen tensors are links to 1).
  std::vector<std::string> paths;
  for (std::int64_t step = 0; step <= 2; ++step) paths.push_back(write_version(dir, step, 2));
  BOOST_TEST(!linked_files(paths[2]).empty());
  for (int readers = 1; readers <= size_; ++readers) {
    MPI_Comm comm = first_ranks(readers);
    for (std::int64_t step = 0; step <= 2; ++step) {
      if (comm == MPI_COMM_NULL) continue;
      BOOST_TEST_CONTEXT(readers << " readers, version " << step) {
        SharedReadFigures figures;
        const Checkpoint back = read_model_shared(paths[step], comm, &figures);
        const Checkpoint whole = state(step);
        BOOST_TEST(back.step == step);
        BOOST_TEST(back.policy_version == step);
        BOOST_TEST(back.tensors.size() == whole.tensors.size());
        BOOST_TEST(back.optimizer_steps == whole.optimizer_steps);
        // Bit for bit: the same bytes, not just equal values.
        BOOST_TEST(back.parameters.size() == whole.parameters.size());
        BOOST_TEST(back.exp_avg.size() == whole.exp_avg.size());
        BOOST_TEST(back.exp_avg_sq.size() == whole.exp_avg_sq.size());
        const auto same_bytes = [](const arclight::UninitFloats& a, const arclight::UninitFloats& b) {
          return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        };
        BOOST_TEST(same_bytes(back.parameters, whole.parameters));
        BOOST_TEST(same_bytes(back.exp_avg, whole.exp_avg));
        BOOST_TEST(same_bytes(back.exp_avg_sq, whole.exp_avg_sq));
        // Each byte of the model read once: the readers together read the version about once.
        std::uint64_t bytes = figures.bytes_read;
        MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_UINT64_T, MPI_SUM, comm);
        const VersionSizes size = version_sizes(paths[step]);
        const double model_bytes = 3.0 * sizeof(float) * double(whole.parameters.size());
        if (bytes_read_by_this_thread() > 0) {  // Linux counts them
          BOOST_TEST(double(bytes) >= (step == 0 ? 1.0 : 3.0) * sizeof(float) * double(whole.parameters.size()));
          BOOST_TEST(double(bytes) <= 1.1 * double(size.own + size.linked), bytes << " bytes read of " << model_bytes);
        }
      }
    }
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(ranks_without_a_share_receive_the_whole) {
  // One tensor (a version written by one process, its values one dataset "all"): one of the
  // four readers reads it, three read none of it, and all end with it.
  const std::string dir = shared_dir();
  Checkpoint one = state(1);
  one.tensors.clear();
  one.optimizer_steps = {1};
  if (rank_ == 0) write_checkpoint(dir, 1, one);
  MPI_Barrier(MPI_COMM_WORLD);
  SharedReadFigures figures;
  const Checkpoint back = read_model_shared((fs::path(dir) / version_file_name(1)).string(), MPI_COMM_WORLD, &figures);
  BOOST_TEST(back.tensors.empty());
  BOOST_TEST(back.parameters == one.parameters);
  BOOST_TEST(back.exp_avg == one.exp_avg);
  BOOST_TEST(back.exp_avg_sq == one.exp_avg_sq);
  const bool reads_it = !partition_tensors({{"all", one.parameters.size()}}, size_)[std::size_t(rank_)].empty();
  if (!reads_it && bytes_read_by_this_thread() > 0)
    BOOST_TEST(figures.bytes_read < 1'000'000u);  // the meta and the index only
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) fs::remove_all(dir);
}

// Without the broadcasts (trainers on GPUs bring the shares together over NCCL): each of one to four readers holds its
// share alone, in its place in the whole, and the shares cover the whole once; before the first step, no moments.
BOOST_AUTO_TEST_CASE(each_reader_holds_just_its_share_in_its_place) {
  const std::string dir = shared_dir();
  const std::string before_a_step = write_version(dir, 0, 1), after = write_version(dir, 1, 1);
  for (int readers = 1; readers <= size_; ++readers) {
    MPI_Comm comm = first_ranks(readers);
    if (comm == MPI_COMM_NULL) continue;
    for (const std::string& path : {before_a_step, after}) {
      const Checkpoint whole = state(path == after ? 1 : 0);
      const ModelShare s = read_model_share(path, comm);
      BOOST_REQUIRE_EQUAL(s.shares.size(), std::size_t(readers));
      BOOST_TEST(s.total == whole.parameters.size());
      BOOST_TEST(s.moments == !whole.exp_avg.empty());
      BOOST_TEST(s.model.optimizer_steps == whole.optimizer_steps);
      std::size_t covered = 0;
      for (const ModelShare::Range& r : s.shares) {
        BOOST_TEST(r.at == covered, "shares run one after another");
        covered += r.count;
      }
      BOOST_TEST(covered == s.total);
      const ModelShare::Range mine = s.shares[std::size_t(rank_)];
      const auto slice = [&](const arclight::UninitFloats& v) {
        return v.empty() ? v : arclight::UninitFloats(v.begin() + mine.at, v.begin() + mine.at + mine.count);
      };
      BOOST_TEST(s.model.parameters == slice(whole.parameters), readers << " readers, rank " << rank_);
      BOOST_TEST(s.model.exp_avg == slice(whole.exp_avg));
      BOOST_TEST(s.model.exp_avg_sq == slice(whole.exp_avg_sq));
    }
    MPI_Comm_free(&comm);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_damaged_share_makes_every_rank_restore_the_version_before) {
  const std::string dir = shared_dir();
  write_version(dir, 1, 1);
  const std::string newest = write_version(dir, 2, 1);
  // block1 is the third reader's (of four) share: ranks 0, 1 and 3 read nothing wrong.
  BOOST_REQUIRE(partition_tensors(state(2).tensors, 4)[2] == std::vector<std::size_t>{2});
  damage(newest, "/optim/exp_avg_sq/block1");
  // Every rank: the damage is found by the rank that reads it, and every rank throws the same.
  std::string why;
  try {
    read_model_shared(newest, MPI_COMM_WORLD);
  } catch (const CorruptCheckpoint& e) {
    why = e.what();
  }
  BOOST_TEST(why.find("checksum mismatch in /optim/exp_avg_sq/block1") != std::string::npos, why);
  BOOST_TEST(why.find(newest) != std::string::npos, why);
  // As a resume does it: the newest version whose store reads (read here) and whose shares
  // read (read by every rank together); each rank skips the damaged one, none hangs.
  auto found = load_latest(
      dir,
      [](const std::string& path, Checkpoint& c) {
        Checkpoint model = read_model_shared(path, MPI_COMM_WORLD);
        c.parameters = std::move(model.parameters);
        c.exp_avg = std::move(model.exp_avg);
        c.exp_avg_sq = std::move(model.exp_avg_sq);
      },
      Contents::no_tensor_data);
  BOOST_REQUIRE(found.has_value());
  BOOST_TEST(found->second.step == 1);
  const Checkpoint whole = state(1);
  BOOST_TEST(found->second.parameters == whole.parameters);
  BOOST_TEST(found->second.exp_avg_sq == whole.exp_avg_sq);
  BOOST_TEST(found->second.store_tables == whole.store_tables);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(rank0_reads_none_of_the_model_at_a_restore) {
  // Contents::no_tensor_data reads the meta, the index and the store, but no tensor data:
  // far fewer bytes than the version holds, and a damaged tensor goes unnoticed here (the
  // trainers' reads catch it).
  const std::string dir = shared_dir();
  const std::string path = write_version(dir, 1, 1);
  damage(path, "/model/parameters/embed");
  if (rank_ == 0) {
    const std::uint64_t before = bytes_read_by_this_thread();
    const Checkpoint c = read_checkpoint(path, Contents::no_tensor_data);
    const std::uint64_t bytes = bytes_read_by_this_thread() - before;
    BOOST_TEST(c.store_tables == "tables 1");
    BOOST_TEST(c.tensors.size() == 5u);
    BOOST_TEST(c.parameters.empty());
    if (before > 0) BOOST_TEST(bytes < 1'000'000u, bytes << " bytes read of " << fs::file_size(path));
    BOOST_CHECK_THROW(read_checkpoint(path, Contents::model), CorruptCheckpoint);
    fs::remove_all(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

BOOST_AUTO_TEST_SUITE_END()

int main(int argc, char** argv) { return mpi_test_main(argc, argv, rank_, size_); }
