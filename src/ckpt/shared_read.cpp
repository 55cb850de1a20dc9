// The trainers' shared read of a version's model: each reads its share, the shares then broadcast
// among them, each byte read once; they agree on the outcome before anything is broadcast.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "arclight/ckpt/checkpoint.hpp"
#include "reader.hpp"
#include "restore_helper.hpp"

namespace arclight::ckpt {

std::uint64_t bytes_read_by_this_thread() {
  std::ifstream io("/proc/thread-self/io");
  std::string key;
  std::uint64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return 0;
}

namespace {

// Values [at, at + count) of `values`, sent by `root` to every rank of `comm`, in calls of at
// most 2^28 values (MPI counts are ints).
void broadcast(UninitFloats& values, std::size_t at, std::size_t count, int root, MPI_Comm comm) {
  constexpr std::size_t most = std::size_t(1) << 28;
  for (std::size_t done = 0; done < count; done += most)
    MPI_Bcast(values.data() + at + done, static_cast<int>(std::min(most, count - done)), MPI_FLOAT, root, comm);
}

// How a rank's part of a shared read went; every rank learns the worst.
enum Outcome : int { read_ok = 0, damaged = 1, failed = 2 };

// MPI_Allreduce(MPI_MAX) of `values`, the wait for the slowest reader asleep: a rank blocked in
// MPI polls, and where ranks outnumber cores (a workstation) the ranks done first took the CPU
// that the last reader needed to copy and check its share.
void agree_on_max(int* values, int count, MPI_Comm comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_INT, MPI_MAX, comm, &request);
  std::chrono::microseconds sleep{20};
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(2 * sleep, std::chrono::microseconds{1000});
  }
}

// What the rank that first saw the agreed outcome says about it, sent to every rank.
std::string agreed_failure(Outcome mine, Outcome agreed, const std::string& failure, MPI_Comm comm) {
  int me = 0, ranks = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &ranks);
  int speaker = mine == agreed ? me : ranks;
  MPI_Allreduce(MPI_IN_PLACE, &speaker, 1, MPI_INT, MPI_MIN, comm);
  std::uint64_t size = failure.size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, speaker, comm);
  std::string said = failure;
  said.resize(size);
  MPI_Bcast(said.data(), static_cast<int>(size), MPI_CHAR, speaker, comm);
  return said;
}

}  // namespace

namespace {

double seconds_since(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// This rank's share read and checked, every rank agreeing on the outcome. `whole`: the flat vectors hold the whole
// model, the share in its place (the broadcasts fill the rest); otherwise only the share.
ModelShare read_share(const std::string& path, MPI_Comm comm, SharedReadFigures* figures, bool whole) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t bytes_before = bytes_read_by_this_thread();
  int me = 0, ranks = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &ranks);
  ModelShare s;
  Checkpoint& c = s.model;
  Moments moments;
  Outcome outcome = read_ok;
  std::string failure;
  // Every rank reaches the agreement below, whatever happens before it: a rank that left
  // early would leave the others waiting for ever.
  try {
    Reader r(path);
    read_meta(r, c);
    s.total = read_index(r, c);
    const std::vector<std::size_t> offsets = tensor_offsets(c);  // of each tensor in the flat vectors
    const std::vector<std::vector<std::size_t>> partition = partition_tensors(c.tensors, ranks);
    for (const std::vector<std::size_t>& share : partition)
      // runs of tensors: a share is one range of the flat vectors
      s.shares.push_back(share.empty() ? ModelShare::Range{}
                                       : ModelShare::Range{offsets[share.front()],
                                                           offsets[share.back() + 1] - offsets[share.front()]});
    const ModelShare::Range mine = s.shares[static_cast<std::size_t>(me)];
    const std::size_t room = whole ? s.total : mine.count, base = whole ? 0 : mine.at;
    reserve_model(c, room);
    std::vector<PlannedRead> plan;
    for (std::size_t i : partition[static_cast<std::size_t>(me)])
      plan_tensor(r, c, i, offsets[i] - base, moments, plan);
    order_by_place(plan);
    // Then the room of the rest, which the broadcasts fill (pages already in cost little). Where it lies is taken
    // now: the helper's jobs grow the vectors while the reads go on.
    std::vector<float*> rooms;
    if (whole)
      for (UninitFloats* values : {&c.parameters, &c.exp_avg, &c.exp_avg_sq}) rooms.push_back(values->data());
    RestoreHelper helper;
    r.read_planned(plan, helper);
    for (float* begin : rooms) helper.fault_in(begin, room * sizeof(float));
    helper.finish();
    for (UninitFloats* values : {&c.parameters, &c.exp_avg, &c.exp_avg_sq}) values->resize(room);
  } catch (const CorruptCheckpoint& e) {
    outcome = damaged, failure = e.what();
  } catch (const std::exception& e) {
    outcome = failed, failure = path + ": " + e.what();
  }
  if (figures) {
    figures->bytes_read = bytes_read_by_this_thread() - bytes_before;
    figures->read_seconds = seconds_since(start);
  }
  int agreed[3] = {outcome, moments.some, moments.missing};
  agree_on_max(agreed, 3, comm);
  if (agreed[0] != read_ok) {
    const std::string why = agreed_failure(outcome, Outcome(agreed[0]), failure, comm);
    if (agreed[0] == damaged) throw CorruptCheckpoint(why);
    throw Error(why);
  }
  if (agreed[1] && agreed[2]) throw CorruptCheckpoint(path + mixed_moments);
  s.moments = agreed[1] != 0;
  if (!s.moments) c.exp_avg = {}, c.exp_avg_sq = {};
  if (c.tensors.size() == 1 && c.tensors[0].name == "all") c.tensors.clear();
  return s;
}

}  // namespace

Checkpoint read_model_shared(const std::string& path, MPI_Comm comm, SharedReadFigures* figures) {
  ModelShare s = read_share(path, comm, figures, true);
  Checkpoint& c = s.model;
  const auto sent = std::chrono::steady_clock::now();
  for (int q = 0; q < static_cast<int>(s.shares.size()); ++q) {
    const ModelShare::Range share = s.shares[static_cast<std::size_t>(q)];
    if (share.count == 0) continue;
    broadcast(c.parameters, share.at, share.count, q, comm);
    if (s.moments)
      broadcast(c.exp_avg, share.at, share.count, q, comm), broadcast(c.exp_avg_sq, share.at, share.count, q, comm);
  }
  if (figures) figures->broadcast_seconds = seconds_since(sent);
  return std::move(c);
}

ModelShare read_model_share(const std::string& path, MPI_Comm comm, SharedReadFigures* figures) {
  return read_share(path, comm, figures, false);
}

}  // namespace arclight::ckpt
