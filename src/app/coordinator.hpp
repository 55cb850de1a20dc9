#pragma once
// Rank 0 of a training job (app-private): the store, served to every other rank, and the
// algorithm's step loop (coordinator.cpp); checkpoints and restore (coordinator_checkpoint.cpp).
#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "arclight/agent/agent.hpp"
#include "arclight/algo/adapter.hpp"
#include "arclight/app/run_report.hpp"
#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/comm/pulse.hpp"
#include "arclight/comm/store_service.hpp"
#include "arclight/comm/work_protocol.hpp"
#include "arclight/model/architecture.hpp"
#include "arclight/store/memory_store.hpp"
#include "roles.hpp"
#include "store_api_server.hpp"

namespace arclight::app {

// Sums over the episodes of a step (or of a validation).
struct EpisodeFigures {
  double reward = 0, success = 0, tokens = 0;
  std::vector<std::map<std::string, double>> results;  // validation only: each episode's metrics (empty: failed)
  int episodes = 0, failed = 0, retries = 0;
};

class Coordinator {
 public:
  Coordinator(const Config& config, const comm::Channels& ch, const Layout& layout, std::string resume,
              std::string effective_config, std::string secret);
  // Returns exit_ok, or exit_requeue when a signal asked the job to stop after a checkpoint.
  int run();
  // Tells the trainers to stop and serves the store until every rank has said bye, or every
  // rank that has not hangs. Returns those that hang (the job must end without them: MPI_Abort).
  std::vector<int> shut_down();

 private:
  // ---- the step loop (coordinator.cpp) ----
  std::vector<Figure> train_step(int step);
  void add_validation(std::vector<Figure>& figures);
  std::vector<store::RolloutId> enqueue_step();
  store::ResourcesId current_policy();
  void wait_for(const std::vector<store::RolloutId>& ids);
  std::size_t serve_a_little();
  std::vector<int> hung_ranks();
  void end_if_training_cannot_go_on();
  void finish_writing();
  std::vector<store::Span> spans_of(store::RolloutId id);
  std::vector<algo::Sample> build_samples(const std::vector<store::RolloutId>& ids, EpisodeFigures& fig,
                                          double& staleness, std::vector<store::RolloutId>& trained_on);
  std::vector<algo::Sample> samples_of_groups(std::map<std::string, std::vector<algo::Trajectory>>& groups) const;
  static void add_figures(const algo::Trajectory& t, EpisodeFigures& fig);
  comm::work::TrainerFigures train(const std::vector<algo::Sample>& samples);
  EpisodeFigures validate();
  std::vector<MPI_Request> tell_trainers(const std::string& message);
  std::vector<std::string> answers_of_trainers(std::vector<MPI_Request>& sends);

  // ---- checkpoints and restore (coordinator_checkpoint.cpp) ----
  std::optional<ckpt::Checkpoint> restore();
  std::optional<ckpt::Checkpoint> load_while_holding_requests();
  std::optional<ckpt::Checkpoint> load();
  // What the trainers' reads of the versions tried cost: bytes summed, seconds of the slowest.
  struct RestoreFigures {
    std::uint64_t bytes_read = 0;
    double read_seconds = 0, broadcast_seconds = 0, seconds = 0;
    double rank0_seconds = 0;  // from the start to the end of the store's import (the trainers read meanwhile)
  };
  std::string trainers_restored(std::vector<MPI_Request>& sends, RestoreFigures& figures);
  void check_same_model(const std::string& path, const ckpt::Checkpoint& saved) const;
  void commit_resume(const ckpt::Checkpoint* restored);
  void restore_state(const std::string& path, ckpt::Checkpoint& c, ckpt::Contents read);
  void import_store(const std::string& path, ckpt::Checkpoint& c, ckpt::Contents read);
  std::vector<std::int64_t> log_starts(const store::MemoryStore::Snapshot& snapshot);
  bool checkpoint_due(int step, bool stop_requested) const;
  ckpt::Checkpoint capture(int step, const std::vector<store::RolloutId>& untrained);
  void write_in_background(int step, ckpt::Checkpoint c);
  void record_trained(int step, const std::vector<store::RolloutId>& ids);
  void let_go_of_trained();
  std::string whole_history(std::size_t history_end);

  const Config& config_;
  const comm::Channels& ch_;
  const Layout& layout_;
  SystemClock clock_;
  store::MemoryStore store_;
  store::Watchdog watchdog_;
  comm::StoreServer server_;
  comm::IdleBackoff backoff_{comm::IdleBackoff::Awaiting::next_message};
  comm::PulseWatch pulses_;
  comm::PulseSender pulse_to_watcher_;  // the last rank watches rank 0 (run_worker)
  Stopwatch::time_point pulses_taken_;
  std::vector<int> named_hung_;  // ranks already said to hang
  std::unique_ptr<agent::Agent> agent_;
  model::Architecture model_;  // what the trainers' forward takes: a rollout beyond it is not trained on
  std::mt19937_64 rng_;
  std::uint64_t version_ = 0;
  std::vector<store::RolloutId> next_;  // the next step's rollouts, once enqueued
  std::string resume_;
  std::string effective_config_;
  std::string model_definition_;  // a Hugging Face model's: model::definition_digest of model.path, in each version
  std::string checkpoint_dir_;
  Stopwatch::time_point start_, last_checkpoint_;
  double elapsed_before_ = 0;                                 // the run's seconds before the version resumed from
  std::string restored_path_;                                 // the version resumed from
  bool resumed_in_place_ = false;                             // from a version in this run's checkpoint directory
  std::pair<std::size_t, std::size_t> imported_log_lengths_;  // the store's history and span log, as restored
  // While a version loads on a thread of its own (load_while_holding_requests): the main thread alone serves the
  // store, holding its requests until the loader has restored it.
  std::atomic<bool> loading_{false}, store_restored_{false};
  // How much of the store's append-only logs LATEST holds: entries and bytes.
  struct {
    std::size_t history = 0, spans = 0;
    std::uint64_t history_bytes = 0, span_bytes = 0;
  } logs_;
  // Where each version's part of the logs begins (entries, bytes), from the newest one at or
  // before what the store has let go of: a restore in place reads the logs from there.
  struct LogMark {
    std::size_t entry = 0;
    std::uint64_t byte = 0;
  };
  std::vector<LogMark> history_marks_{LogMark{}}, span_marks_{LogMark{}};
  // The writer's own. A log written whole (LATEST did not hold its earlier part: a damaged segment) begins anew,
  // its bytes no longer as the main thread counts them: each later version's offset and restore start move by
  // `delta`, and a start before `from_entry` (a place in the log as it was) is none (the resume reads it whole).
  struct LogRewrite {
    std::int64_t delta = 0;
    std::size_t from_entry = 0;
    std::optional<std::uint64_t> whole_bytes;  // what whole_log wrote, in the write under way
  };
  LogRewrite history_rewrite_, span_rewrite_;
  void rebase_logs(ckpt::Checkpoint& c);
  void note_rewrites(const ckpt::Checkpoint& c, std::size_t history_end, std::size_t spans_end);
  // The history's and the span log's entries in the newest version written (the writer's).
  std::atomic<std::size_t> committed_history_{0}, committed_spans_{0};
  // A version's part of the span log, counted at the step boundary (capture) and copied by the writer; until its
  // write is done, the entries from spans_exporting_from_ on are not let go of (set as the write starts, to 0 when it
  // writes the log whole; the writer resets it).
  struct SpanPart {
    std::size_t from = 0, until = 0;
    std::uint64_t bytes = 0;
  } span_part_;
  std::atomic<std::size_t> spans_exporting_from_{std::numeric_limits<std::size_t>::max()};
  void export_spans(ckpt::Checkpoint& c, const SpanPart& part);
  std::shared_ptr<store::StoreArchive> archive_;  // checkpoint.span_log = "all": LATEST, for what the store let go of
  std::string secret_;                            // the job's: the store API's token
  std::unique_ptr<StoreApiServer> store_api_;     // store.http: gone before the store it serves
  BackgroundWriter writer_;                       // last: joined before the store it reads is gone
};

}  // namespace arclight::app
