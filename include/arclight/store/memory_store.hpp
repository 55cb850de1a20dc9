#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "arclight/core/clock.hpp"
#include "arclight/store/span_record.hpp"
#include "arclight/store/store.hpp"

namespace arclight::store {

// One entry of the span log, as export_state writes it.
struct SpanLogEntry {
  RolloutId rollout_id = 0;
  AttemptId attempt_id = 0;
  std::uint64_t sequence_id = 0;
  std::string record;  // encode_span_body
};
// A span log's entries (DecodeError on malformed bytes).
std::vector<SpanLogEntry> decode_span_log(std::string_view log);

// Where spans and records released from memory live: a committed checkpoint's span log and
// history. Called without the store's lock, from any thread.
class StoreArchive {
 public:
  virtual ~StoreArchive() = default;
  // The entries [first, last] of the whole span log (positions as log_lengths counts them).
  virtual std::vector<SpanLogEntry> read(std::uint64_t first, std::uint64_t last) = 0;
  // The history as export_history wrote it, a segment at a time (whole records each), oldest or newest
  // first, until `visit` returns false: what is sought is found without reading the whole of it.
  enum class Order { oldest_first, newest_first };
  virtual void history(Order order, const std::function<bool(std::string_view segment)>& visit) = 0;
  // Whether it holds the spans the store lets go of (checkpoint.span_log = "all"); if not, they
  // are not kept, and exports leave them out.
  virtual bool holds_spans() const = 0;
};

// The store itself, in memory, thread-safe. Rank 0 owns one.
//
// Strict where Agent Lightning is lenient: an invalid transition is refused
// with StoreError; a rollout follows its latest attempt only, so an old
// attempt never overrides its newer state; succeeded, failed and cancelled
// rollouts accept no more spans or updates.
class MemoryStore : public Store {
 public:
  explicit MemoryStore(const Clock& clock, RolloutConfig default_config = {});
  using Store::dequeue;
  using Store::enqueue;
  using Store::query_attempts;

  std::vector<Rollout> enqueue(std::vector<NewRollout> rollouts) override;
  std::vector<AttemptedRollout> dequeue(const std::string& worker_id, std::size_t max_count) override;
  AttemptedRollout start_rollout(NewRollout rollout, const std::string& worker_id) override;
  AttemptedRollout start_attempt(RolloutId rollout_id, const std::string& worker_id) override;
  std::vector<std::uint64_t> add_spans(std::vector<Span> spans) override;
  std::uint64_t add_span(Span span) override;
  std::uint64_t next_sequence_id(RolloutId rollout_id) override;
  // The same, for spans already in record form (as the wire protocol carries them): kept
  // as they are, without decoding and encoding again. The bodies must have passed take_span_body.
  std::vector<std::uint64_t> add_span_records(const std::vector<SpanRecordView>& spans);
  std::uint64_t add_span_record(const SpanRecordView& span);
  Attempt update_attempt(RolloutId rollout_id, AttemptId attempt_id, const AttemptUpdate& update) override;
  Rollout update_rollout(RolloutId rollout_id, const RolloutUpdate& update) override;
  Page<Rollout> query_rollouts(const RolloutFilter& filter, Paging paging) override;
  Page<Attempt> query_attempts(const AttemptFilter& filter, Paging paging) override;
  Attempt get_latest_attempt(RolloutId rollout_id) override;
  Page<Span> query_spans(const SpanFilter& filter, Paging paging) override;
  ResourcesVersion add_resources(const std::string& name, std::string content) override;
  ResourcesVersion update_resources(const std::string& name, std::string content) override;
  ResourcesVersion get_resources(ResourcesId id) override;
  std::vector<ResourcesVersion> get_resources(const std::vector<ResourcesId>& ids) override;
  std::vector<ResourcesVersion> list_resources() override;
  ResourcesVersion get_latest_resources(const std::string& name) override;
  std::vector<Rollout> wait_for_rollouts(const std::vector<RolloutId>& ids, double timeout_seconds) override;
  // And how many of the ids were lost with a damaged checkpoint segment (left out of the answer: they never end).
  std::vector<Rollout> wait_for_rollouts(const std::vector<RolloutId>& ids, double timeout_seconds, std::size_t& lost);
  Worker heartbeat(const std::string& worker_id) override;
  std::vector<Worker> query_workers() override;
  Statistics statistics() override;

  // The watchdog's scan: attempts past timeout_seconds time out; attempts silent for
  // unresponsive_seconds become unresponsive; silent workers become unknown.
  // Returns how many attempts changed.
  std::size_t check_health();

  const RolloutConfig& default_config() const { return default_config_; }

  // The whole store for a checkpoint, in three parts. What never changes again is
  // append-only, so that a checkpoint writes only what is new since the last one: the
  // history (ended rollouts with their attempts, and resource versions, in the order they
  // ended or were made) and the span log (every span record, in the order they came). The
  // tables hold the rest: rollouts not ended yet with their attempts, workers, counters.
  struct Snapshot {
    std::string tables, history, span_log;
    std::size_t history_end = 0, span_log_end = 0;  // entries in the logs: where the next export begins
    // The entries before these were let go of from memory: a lazy import may begin anywhere up to them.
    std::size_t history_base = 0, span_log_base = 0;
    std::uint64_t span_log_bytes = 0;  // of the span log's part, copied or counted
  };
  // SpanLog::counted leaves the span log's part out of the snapshot, its bytes counted: the caller
  // exports it later (export_span_log), off the thread that serves (tens of megabytes to gigabytes
  // between checkpoints), and must keep its entries from being let go of until then.
  enum class SpanLog { copied, counted };
  // One consistent snapshot, under one lock: the tables, and the history and the span log
  // from the given entries on.
  Snapshot export_state(std::size_t history_from = 0, std::size_t span_log_from = 0,
                        SpanLog span_log = SpanLog::copied) const;
  // The append-only parts between entries [from, until). The span log is copied a piece at a
  // time, each under the store's lock, so that the store serves meanwhile; entries let go of
  // between pieces and kept nowhere are left out, as they would be by a copy under one lock.
  std::string export_history(std::size_t from, std::size_t until) const;
  std::string export_span_log(std::size_t from, std::size_t until) const;
  // The same onto the end of `out`, without counting it first (a caller that knows its size reserves it).
  void append_span_log(std::size_t from, std::size_t until, std::string& out) const;
  // Entries in the history and in the span log.
  std::pair<std::size_t, std::size_t> log_lengths() const;
  // Fills an empty store with what the exports wrote. Rollouts that had not ended are
  // requeued, keeping their attempt counts; an attempt that was in flight is marked
  // unresponsive (its runner is gone); workers are unknown until they are heard from.
  // Throws DecodeError on malformed input.
  //
  // `lost_history_bytes`: the history lost segments (a damaged checkpoint file), which held
  // about that many bytes. The ids they held become lost records: kept as ids (never given
  // again), "lost" to the calls that name them (spans, updates, get_resources), left out of
  // queries, and exported as such, so that the next checkpoint holds the loss and not the damage. The
  // spans of lost attempts are left out.
  struct Imported {
    std::vector<RolloutId> requeued;
    std::size_t lost_rollouts = 0, lost_attempts = 0, lost_resources = 0, lost_spans = 0;
    std::size_t resources = 0;  // resources ids, lost ones included
  };
  //
  // `from`: a lazy import, for a restore whose checkpoint is this store's archive. The history and
  // the span log given begin at these entries (at most the snapshot's bases), and what the
  // snapshot had let go of stays out of memory, read back from the archive as before the save:
  // rank 0 reads and decodes only what it keeps. Without it, the logs whole, every record in memory.
  struct LogStarts {
    std::size_t history = 0, span_log = 0;
  };
  Imported import_state(std::string_view tables, std::string_view history, std::string_view span_log,
                        std::optional<std::uint64_t> lost_history_bytes = std::nullopt,
                        std::optional<LogStarts> from = std::nullopt);
  // Empties the store: an imported state that turned out not to fit.
  void clear();

  // Bounded memory on rank 0: lets go of the spans of ended rollouts (not in `keep`, the ones
  // still to be trained on) whose span log entries all come before `until_entry`. With an
  // archive (a checkpoint that holds those entries), queries read them back from it, and an
  // export can no longer begin before them; without one they are not kept, and exports leave
  // them out (as with an archive that does not hold spans). Returns how many spans it let go.
  std::size_t release_spans(std::size_t until_entry, const std::vector<RolloutId>& keep);
  // Then the records themselves, with an archive only: the oldest rollouts, ended, not in `keep`,
  // their spans let go of and their history entries before `until_history_entry` (a checkpoint
  // holds them), with their attempts. Ids go on; a call that names such a rollout reads it
  // back from the archive (a query) or is refused as for any ended rollout (a change); queries
  // of all rollouts or attempts list those in memory. Returns how many rollouts it let go.
  std::size_t release_records(std::size_t until_history_entry, const std::vector<RolloutId>& keep);
  // One that holds no spans marks every attempt whose spans went as kept nowhere, and forgets where the archive's
  // span log ended (0: no span went to an archive; a record let go of then answers "not kept").
  void set_archive(std::shared_ptr<StoreArchive> archive);

 private:
  static constexpr const char* lost_with_damage = " was lost with a damaged checkpoint segment";
  static constexpr const char* spans_not_kept = ": its spans are not kept (checkpoint.span_log = \"none\")";
  struct StoredSpan {
    std::uint64_t sequence_id;
    std::string record;  // encode_span_body
  };
  struct RolloutRecord {
    Rollout rollout;
    bool lost = false;  // its record was in a damaged checkpoint segment
    std::vector<AttemptId> attempts;
    std::uint64_t queue_ticket = 0;      // matches the queue entry that is current
    std::uint64_t last_sequence_id = 0;  // the rollout's span counter
    std::uint64_t history_entry = 0;     // where it ended in the history
  };
  // A rollout let go of, as the archive's history holds it.
  struct ArchivedRollout {
    Rollout rollout;
    std::vector<Attempt> attempts;
    bool lost = false;  // only its id: a damaged segment held it
    // By attempt, where its spans lie in the span log (state: snapshot::SpanPlace); empty where the record (one
    // written before places were) does not say.
    struct SpanPlace {
      std::uint8_t state = 0;
      std::uint64_t first_log_entry = 0, last_log_entry = 0;
    };
    std::vector<SpanPlace> span_places;
  };
  struct AttemptRecord {
    Attempt attempt;
    bool lost = false;
    bool spans_released = false;                            // release_spans: they live in the archive, or nowhere
    bool spans_unkept = false;                              // ... nowhere: no archive held them when they went
    std::uint64_t first_log_entry = 0, last_log_entry = 0;  // its spans' places in the span log
    std::vector<StoredSpan> spans;
    std::unordered_set<std::string> span_ids;  // of the spans that have one: a span sent again is found at once
  };

  // Records by id; the ones let go of come before rollout_base_ and attempt_base_.
  RolloutRecord& rollout_at(RolloutId id) { return rollouts_[id - 1 - rollout_base_]; }
  const RolloutRecord& rollout_at(RolloutId id) const { return rollouts_[id - 1 - rollout_base_]; }
  AttemptRecord& attempt_at(AttemptId id) { return attempts_[id - 1 - attempt_base_]; }
  const AttemptRecord& attempt_at(AttemptId id) const { return attempts_[id - 1 - attempt_base_]; }
  bool rollout_released(RolloutId id) const { return id != 0 && id <= rollout_base_; }
  bool attempt_released(AttemptId id) const { return id != 0 && id <= attempt_base_; }
  RolloutId rollout_count() const { return rollout_base_ + rollouts_.size(); }
  AttemptId attempt_count() const { return attempt_base_ + attempts_.size(); }
  // A rollout in memory; one let go of is refused as ended (callers that read read it back).
  RolloutRecord& rollout_record(RolloutId id);
  AttemptRecord& attempt_record(RolloutRecord& rollout, AttemptId id);
  // Refuses a rollout create_rollout would refuse, changing nothing: a batch is checked whole first.
  void check_new_rollout(const NewRollout& rollout) const;
  RolloutRecord& create_rollout(NewRollout&& rollout, RolloutStatus status, double now);
  AttemptRecord& create_attempt(RolloutRecord& rollout, const std::string& worker_id, double now);
  void set_rollout_status(RolloutRecord& rollout, RolloutStatus status, double now);
  void set_attempt_status(AttemptRecord& attempt, AttemptStatus status, double now);
  // Moves an attempt to `status` (refusing invalid moves) and, when it is its rollout's
  // latest attempt, moves the rollout along: running, succeeded, or requeued / failed.
  void transition_attempt(AttemptRecord& attempt, AttemptStatus status, double now);
  // A sign of life (a span, a report of running): running, heartbeat now, a revived attempt's worker taken back.
  void note_alive(AttemptRecord& attempt, double now);
  // Checks a span's sequence id and that its attempt takes spans now, marks it running and heartbeats it.
  AttemptRecord& span_target(RolloutId rollout_id, AttemptId attempt_id, std::uint64_t sequence_id, double now);
  // Keeps a span record under its attempt with `sequence_id` (0: the rollout's next) and returns its sequence id;
  // 0, keeping nothing, when the attempt holds a span of the same span id already (a client's retry).
  std::uint64_t store_record(AttemptRecord& attempt, std::uint64_t sequence_id, std::string record);
  // A span of `rec` (its id, if any, already in span_ids): in the attempt, in the span log, in the figures.
  void keep_span(AttemptRecord& rec, std::uint64_t sequence_id, std::string record);
  template <class Add>
  std::vector<std::uint64_t> add_each(std::size_t count, const Add& add);
  Worker& worker_record(const std::string& id, double now);
  void take_worker(Worker& worker, const Attempt& attempt, double now);
  void release_worker(const Attempt& attempt, double now);
  // The spans a query wants from what query_spans gathered under the lock and the archive.
  struct ReleasedSpans {
    RolloutId rollout_id;
    AttemptId attempt_id;
    std::uint64_t first_log_entry, last_log_entry;
    bool unkept;
  };
  // Empty where the log's entries at an attempt's places are not its own (a log written anew since its record was).
  std::optional<std::vector<Span>> archived_spans(const std::vector<ReleasedSpans>& released, const SpanFilter& filter);
  // Rollouts let go of, read back from the archive's history (without the lock), by id; one
  // lost with a damaged segment is left out; an id it does not hold is an error.
  std::unordered_map<RolloutId, ArchivedRollout> read_back(const std::vector<RolloutId>& ids);
  ArchivedRollout read_back_one(RolloutId id);  // and a lost one is an error too
  // Versions let go of, read back from the archive's history in one pass (without the lock), by id.
  std::unordered_map<ResourcesId, ResourcesVersion> read_back_resources(std::unordered_set<ResourcesId> wanted);
  // Each record of the archive's history, segment by segment in `order`, until a visitor returns false; `what` names
  // the record sought in the error a failed read becomes.
  void walk_archived_history(const std::string& what, StoreArchive::Order order,
                             const std::function<bool(ArchivedRollout&&)>& on_rollout,
                             const std::function<bool(ResourcesVersion&&)>& on_resources);
  // A resources version whose content lives in the archive: one a checkpoint's history holds,
  // not the latest of its name.
  bool content_archived(const ResourcesVersion& v) const {
    return v.id <= resources_released_ && !v.name.empty() && resources_by_name_.at(v.name).back() != v.id;
  }
  // Whether get_resources finds its content in memory: not archived, or held for a rollout that may ask for it.
  bool content_in_memory(const ResourcesVersion& v) const {
    return !content_archived(v) ||
           std::find(contents_held_.begin(), contents_held_.end(), v.id) != contents_held_.end();
  }
  // The content of archived versions goes, but for those a rollout that has not ended names (its runner asks for it
  // when it takes the rollout: with max_staleness a step's rollouts wait in the queue past the next version).
  void let_go_of_archived_contents_locked();
  std::shared_ptr<StoreArchive> archive() const;
  bool spans_archived() const { return archive_ && archive_->holds_spans(); }
  // A query's answer for a rollout let go of: its spans, from the entries its record places them at, or else from the
  // archive's whole span log.
  std::vector<Span> read_back_spans(const ArchivedRollout& rollout, const SpanFilter& filter);
  // The exports' work, under a lock the caller holds.
  std::string tables_locked() const;
  std::string history_locked(std::size_t from, std::size_t until) const;
  std::string span_log_locked(std::size_t from, std::size_t until) const;
  // The span log's entries in [from, until) whose spans are in memory, each to `visit(rollout, attempt, span)`.
  template <class Visit>
  void visit_span_log_locked(std::size_t from, std::size_t until, Visit&& visit) const;
  std::uint64_t span_log_bytes_locked(std::size_t from, std::size_t until) const;
  void append_span_log_locked(std::size_t from, std::size_t until, std::string& out) const;
  // What the tables say of the records let go of (a lazy import's use).
  struct Released {
    std::uint64_t rollout_base = 0, attempt_base = 0, resources_released = 0, archived_spans_end = 0;
    std::uint64_t history_base = 0, span_log_base = 0;  // a lazy import begins at most here
    bool present = false;                               // format 2's tables have none: imported whole
    Statistics stats;
    std::vector<ResourcesVersion> resources;                      // ids 1..resources_released
    std::vector<std::pair<AttemptId, RolloutId>> other_attempts;  // in memory, their rollout let go of (0: lost)
    std::vector<RolloutId> lost_rollouts;                         // in memory
    struct SpansReleased {
      AttemptId attempt;
      std::uint64_t first_log_entry, last_log_entry;
      std::uint64_t last_sequence_id;  // its rollout's span counter
      bool unkept = false;             // kept nowhere (format 4; format 3's tables do not say)
    };
    std::vector<SpansReleased> spans_released;  // in memory, their spans let go of, and where they were
    bool unkept_known = false;                  // format 4: each of them says whether it was kept
  };
  void encode_released(ByteWriter& out) const;
  static Released decode_released(ByteReader& in, std::uint32_t format);
  Imported import_locked(std::string_view tables, std::string_view history, std::string_view span_log,
                         std::optional<std::uint64_t> lost_history_bytes, std::optional<LogStarts> from);
  // import_locked's steps (store_snapshot.cpp).
  Released import_tables(std::string_view tables, std::string_view history, std::uint64_t lost_bytes,
                         std::optional<LogStarts> from);
  void place_released(const Released& released);
  RolloutId place_rollout(ArchivedRollout r, bool ended);
  // `placed`: the history's kind 6, its attempts' span places after them (the tables' open rollouts: none).
  static ArchivedRollout decode_history_rollout(ByteReader& from, bool placed);
  void import_history(std::string_view history, bool lazy);
  void place_lost(std::uint8_t kind, std::uint64_t id);
  bool placed_lost(std::uint8_t kind, std::uint64_t id) const;
  void mark_lost(Imported& imported);
  void count_imported(bool lazy);
  void restore_span_counters(const Released& released);
  bool mark_unkept_spans(const Released& released);
  void import_span_log(std::string_view span_log, Imported& imported);
  std::vector<RolloutId> requeue_unended();
  void clear_locked();

  const Clock& clock_;
  const RolloutConfig default_config_;
  mutable std::mutex mutex_;
  std::condition_variable rollout_ended_;
  // Deques, not vectors: they grow a block at a time, never holding a copy of the whole table
  // as it moves (rank 0's peak memory), and records stay where they are.
  std::deque<RolloutRecord> rollouts_;                     // by id - 1 - rollout_base_
  std::deque<AttemptRecord> attempts_;                     // by id - 1 - attempt_base_
  std::size_t rollout_base_ = 0, attempt_base_ = 0;        // records let go of (release_records)
  std::deque<std::pair<RolloutId, std::uint64_t>> queue_;  // (rollout, ticket); stale entries are skipped
  std::unordered_set<AttemptId> watched_;                  // attempts the watchdog checks: not final, rollout not final
  std::unordered_map<std::string, Worker> workers_;
  std::deque<ResourcesVersion> resources_;  // by id - 1; a lost version has no name
  std::unordered_map<std::string, std::vector<ResourcesId>> resources_by_name_;
  std::deque<std::pair<AttemptId, std::uint32_t>> span_log_;  // (attempt, index in its spans), as they came,
  std::size_t span_log_base_ = 0;                             // from this entry on: the ones before were released
  std::size_t release_scan_ = 0;                              // release_spans looked at the entries before this one
  std::vector<AttemptId> held_back_;                          // ... and kept these attempts' spans, to look at again
  std::shared_ptr<StoreArchive> archive_;
  std::size_t archived_spans_end_ = 0;  // the span log entries the archive holds, as release_spans was told
  struct HistoryEntry {
    // lost_*: a record a damaged checkpoint segment held; its id only
    enum Kind : std::uint8_t {
      rollout = 1,
      resources = 2,
      lost_rollout = 3,
      lost_attempt = 4,
      lost_resources = 5
    } kind;
    std::uint64_t id;
  };
  std::deque<HistoryEntry> history_;        // rollouts as they ended, resource versions as they were made,
  std::size_t history_base_ = 0;            // from this entry on: the ones before were let go of
  ResourcesId resources_released_ = 0;      // versions up to this one: content_archived
  std::vector<ResourcesId> contents_held_;  // content_archived, content still in memory (few: a step's versions)
  Statistics stats_;
};

// Runs a store's check_health on a thread of its own, every `interval_seconds`.
class Watchdog {
 public:
  Watchdog(MemoryStore& store, double interval_seconds);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  MemoryStore& store_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// How often a watchdog must scan to notice a limit within a quarter of it (bounded to [0.01, 1] s).
double watchdog_interval(const RolloutConfig& config);

}  // namespace arclight::store
