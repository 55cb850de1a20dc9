#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "arclight/core/error.hpp"

// The store's data model, after Agent Lightning's LightningStore (v0.3).
namespace arclight::store {

using RolloutId = std::uint64_t;    // dense, from 1; 0 means none
using AttemptId = std::uint64_t;    // dense, from 1; 0 means none
using ResourcesId = std::uint64_t;  // dense, from 1; 0 means none
// In a span query or an attempt update: the rollout's latest attempt.
inline constexpr AttemptId latest_attempt = std::numeric_limits<AttemptId>::max();

enum class RolloutStatus : std::uint8_t { queuing, preparing, running, succeeded, failed, cancelled, requeuing };
enum class AttemptStatus : std::uint8_t { preparing, running, succeeded, failed, timeout, unresponsive };
// none: Agent Lightning's null, a rollout enqueued without a mode. Not train: its runner takes the validation path.
enum class Mode : std::uint8_t { train, val, test, none };
enum class WorkerStatus : std::uint8_t { idle, busy, unknown };
enum class SpanStatus : std::uint8_t { unset, ok, error };

inline constexpr int rollout_status_count = 7;
inline constexpr int attempt_status_count = 6;
inline constexpr int mode_count = 4;
inline constexpr int named_mode_count = 3;  // the modes named on the wire: none is null there
inline constexpr int worker_status_count = 3;

std::string_view to_string(RolloutStatus s);
std::string_view to_string(AttemptStatus s);
std::string_view to_string(Mode m);
std::string_view to_string(WorkerStatus s);
std::optional<AttemptStatus> parse_attempt_status(std::string_view name);

// succeeded, failed and cancelled end a rollout for good.
inline bool is_final(RolloutStatus s) {
  return s == RolloutStatus::succeeded || s == RolloutStatus::failed || s == RolloutStatus::cancelled;
}
// succeeded, failed and timeout end an attempt for good; unresponsive may revive.
inline bool is_final(AttemptStatus s) {
  return s == AttemptStatus::succeeded || s == AttemptStatus::failed || s == AttemptStatus::timeout;
}

// A set of statuses as a bit mask.
template <class Status>
constexpr std::uint8_t bit(Status s) {
  return static_cast<std::uint8_t>(1u << static_cast<unsigned>(s));
}

struct RolloutConfig {
  double timeout_seconds = 0;       // from the attempt's start; 0: no limit
  double unresponsive_seconds = 0;  // since the last heartbeat (or the start); 0: no limit
  std::uint32_t max_attempts = 1;
  std::uint8_t retry_condition = 0;  // bits of the AttemptStatus values that requeue
  bool retries_on(AttemptStatus s) const { return (retry_condition & bit(s)) != 0; }
  bool operator==(const RolloutConfig& o) const {
    return timeout_seconds == o.timeout_seconds && unresponsive_seconds == o.unresponsive_seconds &&
           max_attempts == o.max_attempts && retry_condition == o.retry_condition;
  }
};

struct Rollout {
  RolloutId id = 0;
  std::string input;  // the task, opaque bytes
  Mode mode = Mode::train;
  ResourcesId resources_id = 0;
  RolloutStatus status = RolloutStatus::queuing;
  RolloutConfig config;
  std::string metadata;   // opaque bytes
  double start_time = 0;  // when it was enqueued or started
  double end_time = 0;    // when it ended; 0 until then
  std::uint32_t attempt_count = 0;
};

struct NewRollout {
  std::string input;
  Mode mode = Mode::train;
  ResourcesId resources_id = 0;
  std::optional<RolloutConfig> config;  // the store's default when absent
  std::string metadata;
};

struct Attempt {
  AttemptId id = 0;
  RolloutId rollout_id = 0;
  std::uint32_t sequence_id = 0;  // 1 for the first attempt of a rollout
  std::string worker_id;
  AttemptStatus status = AttemptStatus::preparing;
  double start_time = 0;
  double end_time = 0;
  double last_heartbeat_time = 0;
};

struct AttemptedRollout {
  Rollout rollout;
  Attempt attempt;
};

using TokenIds = std::vector<std::int32_t>;
using Floats = std::vector<float>;
using AttributeValue = std::variant<std::string, double, bool, TokenIds, Floats>;

struct Attribute {
  std::string key;
  AttributeValue value;
  bool operator==(const Attribute& o) const { return key == o.key && value == o.value; }
};

// The largest sequence id a span may name: what a JSON number holds exactly (a store refuses more).
inline constexpr std::uint64_t max_sequence_id = std::uint64_t(1) << 53;

struct Span {
  RolloutId rollout_id = 0;
  AttemptId attempt_id = 0;
  // One counter per rollout (Agent Lightning's): a span added with 0 gets the next, one added with an id
  // (reserved by Store::next_sequence_id, or shared by the spans of one call) keeps it. Spans come back in its order.
  std::uint64_t sequence_id = 0;  // at most max_sequence_id
  std::string trace_id;
  std::string span_id;
  std::string parent_id;
  std::string name;
  SpanStatus status = SpanStatus::unset;
  std::vector<Attribute> attributes;
  double start_time = 0;
  double end_time = 0;
  // What an outside client's span holds beyond the fields above, kept for it and never read by arclight: a JSON
  // object of Agent Lightning's fields (events, links, context, resource, ...), unknown keys, and the attributes whose
  // JSON the values above would change (integers, lists of strings); empty for arclight's own spans.
  std::string extra_json;

  const AttributeValue* find(std::string_view key) const {
    for (const Attribute& a : attributes)
      if (a.key == key) return &a.value;
    return nullptr;
  }
};

// The resources arclight writes itself, not a client: the trainers' policy versions, and rank 0's ledger of the
// rollouts each step trained on (a version per step). Both wire-encoded.
inline constexpr const char policy_resources[] = "policy";
inline constexpr const char trained_resources[] = "trained";

// One immutable version of a named resource (a policy version and its checksum, a prompt template).
struct ResourcesVersion {
  ResourcesId id = 0;
  std::string name;
  std::uint64_t version = 0;  // 1, 2, ... per name
  double create_time = 0;
  std::string content;
};

struct Worker {
  std::string id;
  WorkerStatus status = WorkerStatus::idle;
  double last_heartbeat_time = 0;
  std::uint64_t heartbeats = 0;
  RolloutId current_rollout = 0;
  AttemptId current_attempt = 0;
  // As Agent Lightning keeps them (0: never): its last dequeue, and when it last became busy and idle (or unknown).
  double last_dequeue_time = 0, last_busy_time = 0, last_idle_time = 0;
};

struct AttemptUpdate {
  std::optional<AttemptStatus> status;
  std::optional<std::string> worker_id;
  std::optional<double> last_heartbeat_time;
};

// One attempt's update in a batch of them (Store::update_attempts).
struct AttemptReport {
  RolloutId rollout_id = 0;
  AttemptId attempt_id = 0;
  AttemptUpdate update;
};

// What became of one report: the attempt as it is now, or why the store refused it.
struct ReportOutcome {
  std::optional<Attempt> attempt;
  std::string refusal;  // when refused
};

// What Store::end_attempts did: the spans' sequence ids (0: refused), then each end's outcome.
struct AttemptsEnded {
  std::vector<std::uint64_t> span_ids;
  std::vector<ReportOutcome> outcomes;
};

struct RolloutUpdate {
  std::optional<RolloutStatus> status;
  std::optional<Mode> mode;
  std::optional<ResourcesId> resources_id;
  std::optional<RolloutConfig> config;
  std::optional<std::string> metadata;
};

struct RolloutFilter {
  std::uint8_t statuses = 0;   // bits of RolloutStatus; 0: any
  std::vector<RolloutId> ids;  // empty: any
  std::optional<Mode> mode;
};

struct AttemptFilter {
  RolloutId rollout_id = 0;   // 0: every rollout
  std::uint8_t statuses = 0;  // bits of AttemptStatus; 0: any
  std::string worker_id;      // empty: any
};

struct SpanFilter {
  RolloutId rollout_id = 0;
  AttemptId attempt_id = latest_attempt;  // an attempt, latest_attempt, or 0 for every attempt
  std::string name;                       // empty: any
  std::uint64_t after_sequence_id = 0;    // only spans with a larger sequence id
};

struct Paging {
  std::size_t offset = 0;
  std::size_t limit = std::numeric_limits<std::size_t>::max();
};

template <class T>
struct Page {
  std::vector<T> items;
  std::size_t total = 0;  // matches before paging
};

struct Statistics {
  std::uint64_t rollouts[rollout_status_count] = {};
  std::uint64_t attempts[attempt_status_count] = {};
  std::uint64_t spans = 0;
  std::uint64_t span_bytes = 0;  // bytes of stored span records
  std::uint64_t workers = 0;
  std::uint64_t resources = 0;
  std::uint64_t queue_length = 0;  // rollouts waiting (queuing or requeuing)
};

// An operation the store refuses. The remote client raises the same error as the local store.
class StoreError : public Error {
 public:
  enum Code : std::uint8_t { not_found = 1, invalid_transition = 2, invalid_argument = 3 };
  StoreError(Code code, const std::string& what) : Error(what, exit_failure), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

}  // namespace arclight::store
