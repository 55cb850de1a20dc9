#pragma once
// Versioned HDF5 checkpoints: one file per version, <dir>/v<NNNNNNNN>.h5, written under a
// temporary name, fsynced and renamed, then LATEST replaced by rename, so that a crash at
// any point leaves the previous version valid. Every dataset carries a CRC-32C attribute;
// a version that is incomplete or fails a checksum is skipped, with a warning, for the one before.
//
// Incremental: a version links (HDF5 external links) to its parent's datasets that did not
// change, and writes append-only state (the span log, the metrics) as new segments only;
// every full_every-th version is full, so a restore follows a bounded chain.
//
// Parallel: with a communicator, its ranks create the file together (MPI-IO, collective
// metadata) and each writes the datasets it holds: trainers their tensor shards, rank 0
// the rest.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "arclight/core/error.hpp"
#include "arclight/core/uninit_floats.hpp"

namespace arclight::ckpt {

// One parameter tensor of the policy, in the policy's parameter order.
struct TensorInfo {
  std::string name;
  std::size_t size = 0;
};

// Everything a run needs to go on as if nothing had happened, at a step boundary.
struct Checkpoint {
  // meta
  std::int64_t step = 0;
  std::int64_t policy_version = 0;
  std::string config_toml;  // the effective configuration of the run that saved
  // A run of a Hugging Face model: the files beside its weights that define it, as model::definition_digest writes
  // them (a resume from another model.path goes on only where they are alike); empty otherwise and in versions
  // written before it was kept
  std::string model_definition;
  std::string arclight_version;  // version and git hash
  double created = 0;            // seconds since the epoch
  std::string parent;            // read back: the version file this one links to ("" when full)
  std::int64_t chain = 0;        // read back: versions since the last full one (0: full)
  // model and optimizer (AdamW), flat in the policy's parameter order; `tensors` splits them
  // into one dataset per tensor (empty: one tensor named "all")
  std::vector<TensorInfo> tensors;
  UninitFloats parameters;
  UninitFloats exp_avg, exp_avg_sq;           // empty before the first step
  std::vector<std::int64_t> optimizer_steps;  // per parameter tensor
  // A LoRA run: the frozen base model's CRC-32C as the run read it (Policy::base_crc32c); none in other runs and in
  // versions written before it was kept
  std::optional<std::uint32_t> base_crc32c;
  // the coordinator's random state (task generation) and the metrics history (append-only)
  std::string coordinator_rng;
  std::string metrics_jsonl;
  // the store: its tables (rollouts not ended, with their attempts; workers), its history
  // (ended rollouts with their attempts, resource versions such as the policy's:
  // append-only), its span log (append-only) and the rollouts not yet trained on
  std::string store_tables;
  std::string store_history;
  std::string span_log;
  // Writing: the bytes of the history and the span log before the parts above, which LATEST's
  // segments hold already (0: the parts above are the whole logs). Read back: the bytes before
  // them, which were not read (Contents::restore), else 0.
  std::uint64_t store_history_offset = 0, span_log_offset = 0;
  // Writing: the entries `span_log` holds, when known (its segment says so: a query finds an entry without
  // reading the segments before it).
  std::optional<std::uint64_t> span_log_entries;
  // Where a restore in place begins the logs: {history entry, its byte, span log entry, its byte},
  // segment boundaries before what the store had let go of from memory (empty: from the start).
  std::vector<std::int64_t> store_log_starts;
  std::vector<std::int64_t> untrained_rollouts;
  // Read back: segments of the metrics or the span log that did not read and are left out
  // of them, each "file (why)". The rest of the version is intact.
  std::vector<std::string> damaged_logs;
  // Read back: set when segments of the store's history (named in damaged_logs too) did not
  // read and are left out: the bytes they held, as far as the version's links say.
  std::optional<std::uint64_t> store_history_lost_bytes;
};

// Which parts of a Checkpoint a rank holds in a parallel write.
struct Part {
  bool meta_and_store = true;        // meta, rng, metrics and the store (rank 0)
  bool model_index = true;           // the tensor names and sizes and the optimizer's step counts
  bool all_tensors = true;           // every tensor's data (a write by one process)
  std::vector<std::size_t> tensors;  // otherwise these tensors' data (indices into Checkpoint::tensors, ascending),
                                     // which the flat vectors hold one after another (and nothing else)
};

struct WriteOptions {
  int full_every = 1;  // 1: every version is full; K: every K-th, the others incremental
  // A parallel write: every rank of `comm` calls write_checkpoint for the same version, each
  // with its part (rank 0 of comm holds meta_and_store and commits). MPI_COMM_NULL: alone.
  MPI_Comm comm = MPI_COMM_NULL;
  Part part;
  // Fault drills: called on rank 0 once every dataset is written, before the file is closed.
  std::function<void()> before_close;
  // Rank 0, when an append-only blob carries only its tail (an offset) and LATEST turns out
  // not to hold the rest: the whole bytes of the blob at that path.
  std::function<std::string(const std::string& blob_path)> whole_log;
};

// Versions are named with 8 digits: a step past them would be written and never found again.
inline constexpr std::int64_t max_step = 99'999'999;
std::string version_file_name(std::int64_t version);  // v00000042.h5
bool is_version_file_name(const std::string& name);   // v<NNNNNNNN>.h5

// The file name LATEST holds in `dir`; empty when there is none.
std::string latest_version(const std::string& dir);
// Makes `version_file` LATEST (atomically): a resumed run's next version builds on it.
void set_latest(const std::string& dir, const std::string& version_file);

// Writes `checkpoint` as version `version` in `dir` and makes it LATEST; returns the path.
// The parent of an incremental version is the LATEST version at the time of writing, when it
// is an earlier step. A failure throws, on the ranks that see it: a parallel write is
// collective, so the caller must then end the job (the other ranks may wait in it for ever).
// A rank whose failure follows another's (that rank removed the temporary file first) throws
// PeerWriteFailed: the rank that failed first names the cause, and ends the job.
std::string write_checkpoint(const std::string& dir, std::int64_t version, const Checkpoint& checkpoint,
                             const WriteOptions& options = {});

// Which tensors each of `ranks` writers holds: contiguous runs of about equal bytes.
std::vector<std::vector<std::size_t>> partition_tensors(const std::vector<TensorInfo>& tensors, int ranks);
// A checkpoint's flat vectors cut down to the given tensors, one after another (a Part's data).
Checkpoint pack_tensors(const Checkpoint& whole, const std::vector<std::size_t>& tensors);

// Reads one version file (following its links, only to files inside its directory), verifying
// every checksum and every length against the bytes stored; throws CorruptCheckpoint, also
// when a file named v<N>.h5 holds another step. A damaged segment of the metrics, the span
// log or the store's history is left out instead, and named in Checkpoint::damaged_logs. Contents::model: meta and the
// model's parameters (an export; the moments' lengths checked, their data not read); no_tensor_data: everything but the
// tensors' data, whose lengths are checked against the bytes stored but which is not read (rank 0 at a restore: the
// trainers read and check it, read_model_shared); restore: that, with the store's logs only from store_log_starts (rank
// 0 resuming in place: what the store had let go of stays in the version, for the store's archive to read back).
enum class Contents { all, model, no_tensor_data, restore };
Checkpoint read_checkpoint(const std::string& path, Contents contents = Contents::all);

// How reads of versions take the tensors: `automatic`, straight from the disk (O_DIRECT, past the page cache) unless
// the page cache holds more than half of their bytes already; `always` directly even then; `never` through the page
// cache (a file system on which direct reads are slow, such as NFS). Process-wide; automatic unless set.
enum class DirectReads { automatic, always, never };
void set_direct_reads(DirectReads how);
DirectReads direct_reads_now();

// While one lives, this process writes no version and removes none (retention), so that the
// version LATEST names stays; and its thread's calls into HDF5 (not built thread-safe here) are
// safe beside another thread's write.
class CheckpointsHeld {
 public:
  CheckpointsHeld();
  ~CheckpointsHeld();
  CheckpointsHeld(const CheckpointsHeld&) = delete;
  CheckpointsHeld& operator=(const CheckpointsHeld&) = delete;
};

// An append-only log of a version ("/store/span_log"), one segment at a time: its segments'
// dataset names in order, and one segment's bytes (checksum checked; CorruptCheckpoint when
// it does not read). Safe beside a write on another thread.
std::vector<std::string> log_segments(const std::string& version_path, const std::string& group);
std::string read_log_segment(const std::string& version_path, const std::string& segment);
// The entries a segment of the span log holds, where its writer said (none: read it to count them).
std::optional<std::uint64_t> log_segment_entries(const std::string& version_path, const std::string& segment);

struct PeerWriteFailed : Error {
  explicit PeerWriteFailed(const std::string& what) : Error(what) {}
};

// What one rank's part of a shared read cost.
struct SharedReadFigures {
  std::uint64_t bytes_read = 0;  // read from the version's files by this rank (bytes_read_by_this_thread)
  double read_seconds = 0;       // to read and check its share
  double broadcast_seconds = 0;  // to send and receive the shares
};
// The model and the optimizer's moments of a version, read by every rank of `comm` together, each byte once: each
// rank reads the meta and the index, then its share of the tensors (partition_tensors for comm's
// size: any number of ranks restores a version however many wrote it), checking each tensor's
// checksum over its pieces as they arrive; then the shares are broadcast over `comm`, so that every
// rank returns the whole. Collective, and every rank ends alike: all return, or all throw the
// same CorruptCheckpoint (a share damaged on any rank: the version is to be skipped everywhere) or
// Error (another failure, such as memory), with the message of the lowest rank that saw it.
Checkpoint read_model_shared(const std::string& path, MPI_Comm comm, SharedReadFigures* figures = nullptr);

// The same read without the broadcasts, for ranks that bring the shares together themselves (trainers on GPUs: over
// NCCL, in device memory): `model` has the meta, the index and the optimizer's steps, and in its parameters, exp_avg
// and exp_avg_sq only this rank's share, which `shares[rank]` places in the whole. Collective, and ends alike on every
// rank, as read_model_shared does.
struct ModelShare {
  struct Range {
    std::size_t at = 0, count = 0;  // in the flat vectors of the whole model
  };
  Checkpoint model;
  std::vector<Range> shares;  // by rank of comm
  std::size_t total = 0;      // values of the whole model
  bool moments = false;       // the optimizer's moments are stored (saved after the first step)
};
ModelShare read_model_share(const std::string& path, MPI_Comm comm, SharedReadFigures* figures = nullptr);

// Bytes this thread has read through system calls so far (Linux's rchar of /proc/thread-self/io;
// 0 where it is not counted): the difference over a read of a version is what it read from the
// files, HDF5's own reads included.
std::uint64_t bytes_read_by_this_thread();

// A version file that is incomplete, unreadable or fails a checksum: bad input.
struct CorruptCheckpoint : Error {
  explicit CorruptCheckpoint(const std::string& what) : Error(what, exit_usage) {}
};

// The newest valid version in `dir` (by step: a version renamed into place is committed even
// if a crash came before LATEST named it), each bad one skipped with a warning; `accept`
// may reject one more (throwing CorruptCheckpoint), e.g. when its store does not decode.
// nullopt when `dir` holds no version; CorruptCheckpoint when none of its versions restores.
using Accept = std::function<void(const std::string& path, Checkpoint&)>;
std::optional<std::pair<std::string, Checkpoint>> load_latest(const std::string& dir, const Accept& accept = {},
                                                              Contents contents = Contents::all);

// A run resumed from an earlier version continues one timeline: versions of later steps are
// renamed to <name>.superseded-<UTC time>-<token>, newest first (never read again; what only
// they link to goes with the next retention). Returns their file names, separated by spaces
// (empty when there was none).
std::string supersede_newer_versions(const std::string& dir, std::int64_t step);
// A fresh run into a directory that holds versions renames the directory, intact, to
// <dir>.superseded-<UTC time>-<token> and returns that name (empty when there was nothing).
// Its lock file comes back into a new, empty <dir>: a DirectoryLock on it stays held.
std::string supersede_directory(const std::string& dir);

// One job at a time in a directory (run.dir, checkpoint.dir): an exclusive flock(2) on
// <dir>/.arclight.lock, which names the holder's host and PID, held while this lives (the
// kernel drops it when the process ends, however it ends). Throws UsageError naming the
// holder when another job holds it `wait_seconds` on; `what` names the directory in that message.
// The wait ends early, with an Error of exit_requeue, once `stop_waiting` says so (a pre-emption's
// signal: waiting on past Slurm's KillWait would end in SIGKILL).
class DirectoryLock {
 public:
  DirectoryLock(const std::string& dir, const std::string& what, double wait_seconds = 0,
                const std::function<bool()>& stop_waiting = {});
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};
inline constexpr const char* lock_file_name = ".arclight.lock";

// Keeps the newest `keep` versions (0: all), LATEST, and every file a kept one links to;
// removes the rest, segment files no kept version links to, and leftovers of writes that
// never committed. Returns the paths it removed.
std::vector<std::string> apply_retention(const std::string& dir, int keep);

// The files (names in the same directory) whose datasets a version links to; throws CorruptCheckpoint.
std::vector<std::string> linked_files(const std::string& path);

// Bytes of dataset data held in the file itself and reached through its links.
struct VersionSizes {
  unsigned long long own = 0, linked = 0;
};
VersionSizes version_sizes(const std::string& path);

}  // namespace arclight::ckpt
