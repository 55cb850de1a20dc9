// Rank 0's checkpoints: when one is due, the blocking capture of the state, the write in the
// background with the trainers' shares; and at start, the restore of a version (or a fresh start).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <exception>
#include <filesystem>
#include <sstream>
#include <thread>
#include <tuple>

#include "arclight/app/cli.hpp"
#include "arclight/comm/work_protocol.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/core/version.hpp"
#include "coordinator.hpp"
#include "store_archive.hpp"
#include "toml_config.hpp"

namespace arclight::app {
namespace {

// A damaged segment of the logs (span log, metrics, the store's history) is left out of them:
// the model, the optimizer and the run's position are intact, the record of the past is not. Said loudly.
void warn_of_damaged_logs(const std::string& path, const ckpt::Checkpoint& c) {
  if (c.damaged_logs.empty()) return;
  std::string files;
  for (const std::string& d : c.damaged_logs) files += "\n  " + d;
  log::warn("RESUMING WITH PART OF THE LOGS MISSING: ", path, " restores the model, the optimizer and the run's ",
            "position, but these segments of its logs are damaged and left out:", files,
            "\nthe next version writes the logs anew without them");
}

// What a damaged segment of the store's history took with it. Untrained rollouts among it
// cannot be trained on: the next step goes without them.
void warn_of_lost_records(const std::string& path, const store::MemoryStore::Imported& imported,
                          std::vector<std::int64_t>& untrained, store::MemoryStore& store) {
  const std::size_t before = untrained.size();
  untrained.erase(std::remove_if(untrained.begin(), untrained.end(),
                                 [&](std::int64_t id) {
                                   try {
                                     store.get_rollout(static_cast<store::RolloutId>(id));
                                     return false;
                                   } catch (const store::StoreError&) {
                                     return true;
                                   }
                                 }),
                  untrained.end());
  log::warn("THE STORE'S HISTORY LOST RECORDS: ", path, " resumes without ", imported.lost_rollouts,
            " ended rollouts (", before - untrained.size(), " of them not yet trained on), ", imported.lost_attempts,
            " attempts, ", imported.lost_spans, " of their spans and ", imported.lost_resources,
            " resource versions (steps of the ledger of trained rollouts among them): their ids stay taken, ",
            "their contents are gone, and what was trained on in those steps can no longer be counted");
}

}  // namespace

// Restores the newest (or the given) version, or starts fresh; then the trainers publish the
// weights the runners start from (only now: a version they read may yet be given up for the one
// before, when the store's part of it does not read back). The checkpoint directory changes
// (LATEST, versions set aside) only once every trainer has its state.
std::optional<ckpt::Checkpoint> Coordinator::restore() {
  std::optional<ckpt::Checkpoint> restored = load_while_holding_requests();
  const std::string message = comm::work::encode(comm::work::Begin{});
  std::vector<MPI_Request> sends = tell_trainers(message);
  for (const std::string& failure : answers_of_trainers(sends))
    if (!failure.empty()) throw UsageError(failure);  // one message, from rank 0; the directory is as it was
  commit_resume(restored ? &*restored : nullptr);
  return restored;
}

// Loading can take minutes on a slow file system: it runs on a thread of its own while this one holds the store's
// requests (their clients told every second to wait on: an outside agent's dequeue through its runner, say),
// answered once the version is restored, its store and the trainers' shares (store_restored_).
// A trainer that hangs meanwhile (the others wait for it in the shares' collectives) ends the job as in a step; a load
// that does not end (a stalled file system, while every rank's pulses go on) ends it after
// checkpoint.read_timeout_seconds.
std::optional<ckpt::Checkpoint> Coordinator::load_while_holding_requests() {
  std::optional<ckpt::Checkpoint> loaded;
  std::exception_ptr failure;
  std::atomic<bool> done{false};
  loading_ = true;
  store_restored_ = false;
  server_.hold();
  std::thread loader([&] {
    try {
      loaded = load();
    } catch (...) {
      failure = std::current_exception();
    }
    done = true;
  });
  const auto began = Stopwatch::now();
  const double limit = config_.checkpoint.read_timeout_seconds;
  while (!done) {
    if (limit > 0 && seconds_since(began) > limit) {
      log::error("checkpoint: the version to resume from has not been loaded in ", limit,
                 " s (checkpoint.read_timeout_seconds): the file system stalls; ending the job, to be requeued");
      MPI_Abort(MPI_COMM_WORLD, exit_requeue);
    }
    if (store_restored_) server_.release();
    try {
      serve_a_little();
    } catch (...) {  // the loader thread still uses this coordinator: the job ends here, not unwound
      end_job_now(std::current_exception());
    }
  }
  loader.join();
  server_.release();
  loading_ = false;
  if (failure) std::rethrow_exception(failure);
  return loaded;
}

// The version to resume from, restored into the store and the task generator here and into
// the trainers (which read its model: this rank reads none of it); nullopt for a fresh run.
std::optional<ckpt::Checkpoint> Coordinator::load() {
  namespace fs = std::filesystem;
  if (resume_.empty()) return std::nullopt;
  if (config_.faults.slow_restore_seconds > 0) {
    log::warn("fault drill: loading the version takes ", config_.faults.slow_restore_seconds,
              " s longer (faults.slow_restore_seconds)");
    std::this_thread::sleep_for(std::chrono::duration<double>(config_.faults.slow_restore_seconds));
  }
  const auto t = Stopwatch::now();
  const std::uint64_t bytes_before = ckpt::bytes_read_by_this_thread();
  RestoreFigures figures;
  // A version restores when its store, its random state and the trainers' shares of its model
  // read back; otherwise the one before is tried.
  // In this run's checkpoint directory, the store's logs are read only from where the store that
  // saved had let go of records (they stay in the version, LATEST from here on, for the store to
  // read back); from another directory, whole. A file there under another name than a version's
  // (one set aside) is as from another directory: LATEST names versions only.
  std::error_code ec;
  const fs::path named = fs::path(resume_).filename();
  const bool in_place = resume_ == "auto" || (ckpt::is_version_file_name(named.string()) &&
                                              fs::equivalent(resume_, fs::path(checkpoint_dir_) / named, ec));
  const ckpt::Contents contents = in_place ? ckpt::Contents::restore : ckpt::Contents::no_tensor_data;
  auto accept = [this, &figures, t, contents](const std::string& path, ckpt::Checkpoint& c) {
    check_same_model(path, c);
    // The trainers read their shares of the model while this rank imports the store.
    const std::string request = comm::work::encode(comm::work::Restore{path});
    std::vector<MPI_Request> sends = tell_trainers(request);
    std::exception_ptr store_failure;
    try {
      restore_state(path, c, contents);
    } catch (...) {
      store_failure = std::current_exception();
    }
    figures.rank0_seconds = seconds_since(t);  // its reads and the store's import
    // Every trainer answers before anything else happens: the answers to this version must not be
    // taken for the next one's.
    const std::string damaged = trainers_restored(sends, figures);
    if (store_failure) std::rethrow_exception(store_failure);
    if (!damaged.empty()) {
      store_.clear();  // for the version before
      throw ckpt::CorruptCheckpoint(damaged);
    }
    store_restored_ = true;  // the held requests are answered from this version's store, never from one given up
  };
  std::optional<std::pair<std::string, ckpt::Checkpoint>> found;
  if (resume_ == "auto") {
    found = ckpt::load_latest(checkpoint_dir_, accept, contents);
    if (!found) {
      log::info("no checkpoint in ", checkpoint_dir_, ": starting fresh");
      return std::nullopt;
    }
  } else {
    found = std::make_pair(resume_, ckpt::read_checkpoint(resume_, contents));
    accept(found->first, found->second);
  }
  const std::uint64_t rank0_bytes = ckpt::bytes_read_by_this_thread() - bytes_before;
  ckpt::Checkpoint& c = found->second;
  warn_of_damaged_logs(found->first, c);
  log::info("resuming from ", found->first, ": step ", c.step, ", policy version ", c.policy_version);
  const double seconds = seconds_since(t);
  const ckpt::VersionSizes size = ckpt::version_sizes(found->first);
  std::size_t given_up = 0;  // by --resume auto: the versions after the one found, each read (some of it) first
  if (resume_ == "auto")
    for (const auto& entry : fs::directory_iterator(checkpoint_dir_, ec))
      given_up += ckpt::is_version_file_name(entry.path().filename().string()) &&
                  entry.path().filename() > fs::path(found->first).filename();
  const std::uint64_t version_bytes = size.own + size.linked;
  log::info("restore: read ",
            double(rank0_bytes + figures.bytes_read) / double(std::max<std::uint64_t>(1, version_bytes)),
            " times the version's ", version_bytes, " bytes (rank 0 ", rank0_bytes, ", the ", layout_.trainers().size(),
            " trainers ", figures.bytes_read, ") in ", seconds, " s (rank 0's reads and the store's import ",
            figures.rank0_seconds, " s); the slowest trainer's restore ", figures.seconds, " s (its share read ",
            figures.read_seconds, " s, broadcast ", figures.broadcast_seconds, " s)",
            given_up > 0 ? log::concat("; the reads of the ", given_up, " newer versions given up count too") : "");
  const fs::path here = fs::path(checkpoint_dir_) / fs::path(found->first).filename();
  resumed_in_place_ = in_place;
  restored_path_ = resumed_in_place_ ? here.string() : found->first;
  version_ = static_cast<std::uint64_t>(c.policy_version);
  return std::move(c);
}

// The trainers' answers to `sends` (a Restore: each reads its share of the model and optimizer of
// the version): why a share is damaged (they all say so), or empty when every share read back;
// UsageError when the version holds another model, Error when a trainer could not restore it (its memory: the job
// ends, the version is left as it is). The trainers ask the store nothing before
// work::Begin: a store still held (its import under way, or failed) does not hold them up.
std::string Coordinator::trainers_restored(std::vector<MPI_Request>& sends, RestoreFigures& figures) {
  using Outcome = comm::work::Restored::Outcome;
  std::string damaged, failed, unfit;
  for (const std::string& reply : answers_of_trainers(sends)) {
    comm::work::Restored answer;
    try {
      answer = comm::work::decode_restored(reply);
    } catch (const DecodeError& e) {
      answer.outcome = Outcome::failed,
      answer.why = "a trainer's answer to restore does not decode: " + std::string(e.what());
    }
    figures.bytes_read += answer.bytes_read;
    figures.read_seconds = std::max(figures.read_seconds, answer.read_seconds);
    figures.broadcast_seconds = std::max(figures.broadcast_seconds, answer.broadcast_seconds);
    figures.seconds = std::max(figures.seconds, answer.seconds);
    if (answer.outcome == Outcome::damaged) damaged = answer.why;
    if (answer.outcome == Outcome::failed) failed = answer.why;
    if (answer.outcome == Outcome::unfit) unfit = answer.why;
  }
  // One message, from rank 0; the directory is as it was.
  if (!unfit.empty()) throw UsageError(unfit);
  if (!failed.empty()) throw Error("a trainer could not restore the version (the version is left as it is): " + failed);
  return damaged;
}

// Once every trainer has its state: one timeline from here on. A version resumed from in
// this run's checkpoint directory becomes LATEST, and the next version adds to its logs; the
// versions after it (named by --resume PATH, or skipped by auto as not reading: an I/O error
// that passes reads the same) are set aside, else a later --resume auto would go back to them
// and leave this run's versions behind. A fresh run, or one resumed from another directory,
// sets an old directory aside.
void Coordinator::commit_resume(const ckpt::Checkpoint* restored) {
  if (restored && resumed_in_place_) {
    const std::string set_aside = ckpt::supersede_newer_versions(checkpoint_dir_, restored->step);
    if (!set_aside.empty()) log::warn("versions after the one resumed from are set aside: ", set_aside);
    ckpt::set_latest(checkpoint_dir_, std::filesystem::path(restored_path_).filename().string());
    std::tie(logs_.history, logs_.spans) = imported_log_lengths_;
    logs_.history_bytes = restored->store_history_offset + restored->store_history.size();
    logs_.span_bytes = restored->span_log_offset + restored->span_log.size();
    const std::vector<std::int64_t>& starts = restored->store_log_starts;
    if (restored->store_history_offset > 0 || restored->span_log_offset > 0) {  // read from the starts
      history_marks_ = {LogMark{std::size_t(starts[0]), std::uint64_t(starts[1])}};
      span_marks_ = {LogMark{std::size_t(starts[2]), std::uint64_t(starts[3])}};
    }
    // The history's lost records are new entries: the next version writes the logs whole,
    // holding the loss and no longer linking the damaged segment.
    if (restored->store_history_lost_bytes) logs_ = {}, history_marks_ = span_marks_ = {LogMark{}};
    // LATEST's span log is the store's, entry for entry, unless a segment of it is damaged (the next version
    // writes it whole).
    if (restored->damaged_logs.empty()) {
      committed_history_ = logs_.history;
      committed_spans_ = logs_.spans;
    }
    return;
  }
  const std::string moved = ckpt::supersede_directory(checkpoint_dir_);
  if (!moved.empty())
    log::warn(restored ? "resuming from another directory" : "a fresh run", ": the versions in ", checkpoint_dir_,
              " are set aside in ", moved, restored ? "" : " (run with --resume auto to continue them)");
}

// Rebuilds the store and the task generator from a version (`read` as it was read);
// CorruptCheckpoint (and an empty store) when they do not read back.
void Coordinator::restore_state(const std::string& path, ckpt::Checkpoint& c, ckpt::Contents read) {
  if (config_.faults.store_unreadable_step > 0 && c.step == config_.faults.store_unreadable_step)
    throw ckpt::CorruptCheckpoint(path + ": the store does not read back (fault drill: faults.store_unreadable_step)");
  std::mt19937_64 rng;
  std::istringstream text(c.coordinator_rng);
  text >> rng;
  if (!text) throw ckpt::CorruptCheckpoint(path + ": the coordinator's random state does not read back");
  import_store(path, c, read);
  for (std::int64_t id : c.untrained_rollouts) {
    bool known = id > 0;
    try {
      known = known && store_.get_rollout(static_cast<store::RolloutId>(id)).mode == store::Mode::train;
    } catch (const store::StoreError&) {
      known = false;
    }
    if (!known) {
      store_.clear();
      throw ckpt::CorruptCheckpoint(path + ": untrained rollout " + std::to_string(id) +
                                    " is not a training rollout of its store");
    }
  }
  rng_ = rng;
}

// The version's store into rank 0's: lazily when its logs were read from their starts; read whole
// and imported so when that does not read back (a damaged segment, starts that do not fit).
void Coordinator::import_store(const std::string& path, ckpt::Checkpoint& c, ckpt::Contents read) {
  std::optional<store::MemoryStore::LogStarts> from;
  if (read == ckpt::Contents::restore && !c.store_log_starts.empty())
    from = store::MemoryStore::LogStarts{std::size_t(c.store_log_starts[0]), std::size_t(c.store_log_starts[2])};
  store::MemoryStore::Imported imported;
  try {
    if (from && !c.damaged_logs.empty()) throw DecodeError("a damaged segment: " + c.damaged_logs.front());
    imported = store_.import_state(c.store_tables, c.store_history, c.span_log, c.store_history_lost_bytes, from);
  } catch (const DecodeError& e) {
    if (!from) throw ckpt::CorruptCheckpoint(path + ": the store does not read back: " + e.what());
    log::warn(path, ": the store's newest entries do not read back alone (", e.what(), "); reading its logs whole");
    c = ckpt::read_checkpoint(path, ckpt::Contents::no_tensor_data);
    import_store(path, c, ckpt::Contents::no_tensor_data);
    return;
  }
  // What the version's logs hold: taken now, since the store is served (and its logs grow) before the resume
  // commits, and the next version appends to the version's logs from exactly here.
  imported_log_lengths_ = store_.log_lengths();
  if (c.store_history_lost_bytes) warn_of_lost_records(path, imported, c.untrained_rollouts, store_);
  if (!imported.requeued.empty())
    log::info(imported.requeued.size(), " rollouts that had not ended at the save are requeued");
}

// A checkpoint at the step boundary: every N steps, every T minutes, on a signal, and at the end.
bool Coordinator::checkpoint_due(int step, bool stop_requested) const {
  const auto& every = config_.checkpoint;
  return (every.every_steps > 0 && step % every.every_steps == 0) ||
         (every.every_minutes > 0 && seconds_since(last_checkpoint_) >= 60 * every.every_minutes) || stop_requested ||
         step == config_.run.steps;
}

// The blocking part of a checkpoint: every trainer copies its state to host memory (and
// then writes its share of the file in the background); rank 0 copies the store.
ckpt::Checkpoint Coordinator::capture(int step, const std::vector<store::RolloutId>& untrained) {
  const std::string request = comm::work::encode(comm::work::Save{step});
  std::vector<MPI_Request> sends = tell_trainers(request);
  ckpt::Checkpoint c;
  c.step = step;
  c.policy_version = static_cast<std::int64_t>(version_);
  c.config_toml = effective_config_;
  c.model_definition = model_definition_;
  c.arclight_version = std::string(build_info().version) + " " + build_info().git_hash;
  c.created = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::ostringstream rng;
  rng << rng_;
  c.coordinator_rng = rng.str();
  // One consistent snapshot of the store; of its append-only parts only what came since the
  // last version (LATEST holds the rest). The trainers copy their shares meanwhile. The span
  // log's part, the bulk of it, is only counted here: the writer copies it (export_spans).
  store::MemoryStore::Snapshot snapshot =
      store_.export_state(logs_.history, logs_.spans, store::MemoryStore::SpanLog::counted);
  c.store_log_starts = log_starts(snapshot);
  c.store_tables = std::move(snapshot.tables);
  c.store_history = std::move(snapshot.history);
  c.store_history_offset = logs_.history_bytes;
  c.span_log_offset = logs_.span_bytes;
  span_part_ = {logs_.spans, snapshot.span_log_end, snapshot.span_log_bytes};
  logs_.history = snapshot.history_end;
  logs_.spans = snapshot.span_log_end;
  logs_.history_bytes += c.store_history.size();
  logs_.span_bytes += snapshot.span_log_bytes;
  for (store::RolloutId id : untrained) c.untrained_rollouts.push_back(static_cast<std::int64_t>(id));
  answers_of_trainers(sends);  // they answer once they have copied
  return c;
}

// Where a restore in place begins this version's logs: the newest version boundary at or before
// what the store has let go of (this version's part begins at one too).
std::vector<std::int64_t> Coordinator::log_starts(const store::MemoryStore::Snapshot& snapshot) {
  auto newest_before = [](std::vector<LogMark>& marks, LogMark part, std::size_t released) {
    if (part.entry > marks.back().entry) marks.push_back(part);
    // marks.front() is at or before `released`: it was chosen for an earlier version, or is the start
    std::size_t newest = 0;
    while (newest + 1 < marks.size() && marks[newest + 1].entry <= released) ++newest;
    marks.erase(marks.begin(), marks.begin() + static_cast<std::ptrdiff_t>(newest));
    return marks.front();
  };
  const LogMark history = newest_before(history_marks_, {logs_.history, logs_.history_bytes}, snapshot.history_base),
                spans = newest_before(span_marks_, {logs_.spans, logs_.span_bytes}, snapshot.span_log_base);
  return {std::int64_t(history.entry), std::int64_t(history.byte), std::int64_t(spans.entry), std::int64_t(spans.byte)};
}

// Rank 0's share of the version (meta, store, metrics) goes with the trainers' shards into
// one file; rank 0 commits it. Training goes on meanwhile; one write at a time.
void Coordinator::write_in_background(int step, ckpt::Checkpoint c) {
  ckpt::WriteOptions options;
  options.full_every = config_.checkpoint.full_every;
  options.comm = ch_.checkpoint.get();
  options.part.model_index = false;
  options.part.all_tensors = false;
  // Should LATEST not hold the logs' earlier parts after all, the whole logs up to this version.
  const std::size_t history_end = logs_.history, spans_end = logs_.spans;
  options.whole_log = [this, history_end, spans_end](const std::string& path) {
    if (path == "/store/history") {
      std::string whole = whole_history(history_end);
      history_rewrite_.whole_bytes = whole.size();
      return whole;
    }
    std::string whole;
    try {
      spans_exporting_from_ = 0;  // every entry stays in memory until the write is done
      whole = store_.export_span_log(0, spans_end);
    } catch (const store::StoreError& e) {  // spans let go of live in LATEST, which does not read
      log::warn("the span log is written anew without the spans rank 0 let go of (", e.what(),
                "): from here on they are not kept, as with checkpoint.span_log = \"none\"");
      store_.set_archive(archive_ = std::make_shared<CheckpointStoreArchive>(checkpoint_dir_, false));
      whole = store_.export_span_log(0, spans_end);
    }
    span_rewrite_.whole_bytes = whole.size();
    return whole;
  };
  if (config_.faults.kill_in_checkpoint == step)
    options.before_close = [] {
      log::warn("fault drill: rank 0 is killed in the middle of a checkpoint write (faults.kill_in_checkpoint)");
      std::raise(SIGKILL);
    };
  finish_writing();  // one write at a time
  // Here, not in capture(): the write before (whose part came first) has copied its own part and let go of the mark.
  // Only this thread lets go of spans (let_go_of_trained), so none went since capture().
  spans_exporting_from_ = span_part_.from;
  writer_.start(log::concat("writing version ", step),
                [this, step, options, history_end, spans_end, part = span_part_, c = std::move(c)]() mutable {
                  const auto t = Stopwatch::now();
                  if (config_.faults.slow_checkpoint_seconds > 0) {
                    log::warn("fault drill: writing version ", step, " begins ", config_.faults.slow_checkpoint_seconds,
                              " s late (faults.slow_checkpoint_seconds)");
                    std::this_thread::sleep_for(std::chrono::duration<double>(config_.faults.slow_checkpoint_seconds));
                  }
                  export_spans(c, part);
                  rebase_logs(c);
                  std::string path = ckpt::write_checkpoint(checkpoint_dir_, step, c, options);
                  note_rewrites(c, history_end, spans_end);
                  spans_exporting_from_ = std::numeric_limits<std::size_t>::max();
                  committed_history_ = history_end;
                  committed_spans_ = spans_end;
                  for (const std::string& old : ckpt::apply_retention(checkpoint_dir_, config_.checkpoint.keep))
                    log::debug("retention removed ", old);
                  log::debug("checkpoint ", path, " written in ", seconds_since(t), " s");
                });
}

// The version's part of the span log, as capture() counted it: nothing of it was let go of since (entries at or
// after spans_exporting_from_ stay in memory until the write is done), so a difference is a defect, and the version
// would not hold what the next one's offsets say.
void Coordinator::export_spans(ckpt::Checkpoint& c, const SpanPart& part) {
  c.span_log.reserve(part.bytes);
  store_.append_span_log(part.from, part.until, c.span_log);
  c.span_log_entries = part.until - part.from;
  if (c.span_log.size() != part.bytes)
    throw Error(log::concat("the span log's entries [", part.from, ", ", part.until, ") came to ", c.span_log.size(),
                            " bytes, not the ", part.bytes, " counted at the step boundary"));
}

// The offsets of a version's parts of the logs, and its restore starts, as the logs lie in LATEST since one was
// written whole (without that, each later version found LATEST not holding what it counted and wrote its logs whole
// again).
void Coordinator::rebase_logs(ckpt::Checkpoint& c) {
  history_rewrite_.whole_bytes.reset();  // of a write that failed: LATEST did not move
  span_rewrite_.whole_bytes.reset();
  const auto moved = [](std::uint64_t at, std::int64_t delta) {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(at) + delta);
  };
  c.store_history_offset = moved(c.store_history_offset, history_rewrite_.delta);
  c.span_log_offset = moved(c.span_log_offset, span_rewrite_.delta);
  if (c.store_log_starts.size() != 4) return;
  std::vector<std::int64_t>& starts = c.store_log_starts;
  if (static_cast<std::size_t>(starts[0]) < history_rewrite_.from_entry ||
      static_cast<std::size_t>(starts[2]) < span_rewrite_.from_entry) {
    starts.clear();  // a place in a log that was since written anew
    return;
  }
  starts[1] += history_rewrite_.delta;
  starts[3] += span_rewrite_.delta;
}

// After a write: a log written whole holds `whole_bytes` where this version's offset and part said otherwise.
void Coordinator::note_rewrites(const ckpt::Checkpoint& c, std::size_t history_end, std::size_t spans_end) {
  const auto note = [](LogRewrite& r, std::uint64_t offset, std::size_t part, std::size_t end) {
    if (!r.whole_bytes) return;
    r.delta += static_cast<std::int64_t>(*r.whole_bytes) - static_cast<std::int64_t>(offset + part);
    r.from_entry = end;
    r.whole_bytes.reset();
  };
  note(history_rewrite_, c.store_history_offset, c.store_history.size(), history_end);
  note(span_rewrite_, c.span_log_offset, c.span_log.size(), spans_end);
}

// Bounded memory: the spans of rollouts trained on leave rank 0 once a committed version holds
// them (span_log = "all": a query reads them back from it), or at once (span_log = "none"); their
// records go too once the version's history holds them.
void Coordinator::let_go_of_trained() {
  // Never what the write under way still copies (export_spans, or the whole log: spans_exporting_from_).
  const std::size_t until =
      std::min(config_.checkpoint.span_log == "none" ? store_.log_lengths().second : committed_spans_.load(),
               spans_exporting_from_.load());
  const std::size_t spans = store_.release_spans(until, next_);
  const std::size_t records = store_.release_records(committed_history_, next_);
  if (spans == 0 && records == 0) return;
  log::debug(spans, " spans and ", records, " rollouts left rank 0's memory");
}

// The history up to `history_end` for a version that writes it whole: from memory, or, once the
// store has let go of its oldest records, LATEST's history (what the store let go of lies
// before the version last written) and the rest from memory.
std::string Coordinator::whole_history(std::size_t history_end) {
  try {
    return store_.export_history(0, history_end);
  } catch (const store::StoreError&) {
    std::string released;
    try {
      archive_->history(store::StoreArchive::Order::oldest_first, [&](std::string_view segment) {
        released += segment;
        return true;
      });
    } catch (const std::exception& e) {
      throw Error(log::concat("the store has let go of records that only LATEST holds, and it does not read (",
                              e.what(),
                              "): this version cannot hold the whole history; resume from the newest good version "
                              "(--resume auto)"));
    }
    return released + store_.export_history(committed_history_, history_end);
  }
}

// Which rollouts each step trained on, as versions of the store's "trained" resource: a
// ledger in the store that travels with its checkpoints.
void Coordinator::record_trained(int step, const std::vector<store::RolloutId>& ids) {
  std::string entry = comm::work::encode(comm::work::LedgerEntry{step, {ids.begin(), ids.end()}});
  bool started = true;  // by an earlier step, perhaps of the run that saved the checkpoint
  try {
    store_.get_latest_resources(store::trained_resources);
  } catch (const store::StoreError&) {
    started = false;
  }
  if (started)
    store_.update_resources(store::trained_resources, std::move(entry));
  else
    store_.add_resources(store::trained_resources, std::move(entry));
}

}  // namespace arclight::app
