// libFuzzer target for the store's checkpoint import (store_snapshot.cpp): a checkpoint is
// outside input, and its checksums stop accidents, not a hostile user. Each input edits the
// snapshot of a real store (rollouts ended, open and failed, spans, resource versions):
//   byte 0: bit 0, import as a history that lost segments; bits 1-2, which part to cut short
//           (none, tables, history, span log); bit 3, the rest of the input goes onto the
//           history's end instead of being edits; bit 4, a lazy import (issue 18) of a store
//           that had let records go, from its version boundary (bit 5: from entries bytes 1 and
//           2 name instead; bit 6: of a store that came back with lost records, one of them
//           still in memory and its history entry before the boundary)
//   bytes 1-2: where to cut; bytes 3-4: the lost bytes the import is told of
//   then 3 bytes an edit: a position in the three parts one after another, a byte to xor.
// An import ends in a store or one DecodeError (the store left empty); an imported store
// answers queries, and its export imports again, to the same logs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "arclight/core/clock.hpp"
#include "arclight/store/memory_store.hpp"

using namespace arclight;
using namespace arclight::store;

namespace {
ManualClock clock_;

// An archive of one version's logs, for the store to let records go.
class VersionArchive : public StoreArchive {
 public:
  explicit VersionArchive(const MemoryStore::Snapshot& v) : version_(v) {}
  std::vector<SpanLogEntry> read(std::uint64_t first, std::uint64_t last) override {
    const std::vector<SpanLogEntry> all = decode_span_log(version_.span_log);
    return {all.begin() + std::ptrdiff_t(first), all.begin() + std::ptrdiff_t(last) + 1};
  }
  void history(Order, const std::function<bool(std::string_view)>& visit) override { visit(version_.history); }
  bool holds_spans() const override { return true; }

 private:
  MemoryStore::Snapshot version_;
};

void must(bool holds) {
  if (!holds) std::abort();
}

RolloutConfig retrying() {
  RolloutConfig config;
  config.max_attempts = 2;
  config.retry_condition = bit(AttemptStatus::failed);
  return config;
}

void run_some(MemoryStore& store) {
  std::vector<NewRollout> rollouts(5);
  for (std::size_t i = 0; i < rollouts.size(); ++i) rollouts[i].input = "task " + std::to_string(i);
  store.enqueue(rollouts);
  for (const AttemptedRollout& taken : store.dequeue("w1", 3)) {
    Span span;
    span.rollout_id = taken.rollout.id;
    span.attempt_id = taken.attempt.id;
    span.name = "llm";
    store.add_span(span);
    AttemptUpdate update;
    update.status = taken.rollout.id == 1 ? AttemptStatus::succeeded : AttemptStatus::failed;
    store.update_attempt(taken.rollout.id, taken.attempt.id, update);
  }
}

MemoryStore::Snapshot real_snapshot() {
  MemoryStore store(clock_, retrying());
  store.add_resources("policy", "v0");
  run_some(store);
  store.update_resources("policy", "v1");
  store.add_resources("trained", "ledger");
  store.dequeue("w2", 1);
  return store.export_state();
}

// A version after one whose records the store let go of: its logs from that version's end.
std::pair<MemoryStore::Snapshot, MemoryStore::LogStarts> real_lazy_snapshot() {
  MemoryStore store(clock_, retrying());
  store.add_resources("policy", "v0");
  run_some(store);
  store.update_resources("policy", "v1");
  const MemoryStore::Snapshot first = store.export_state();
  store.set_archive(std::make_shared<VersionArchive>(first));
  store.release_spans(first.span_log_end, {});
  store.release_records(first.history_end, {});
  run_some(store);
  store.add_resources("trained", "ledger");
  return {store.export_state(first.history_end, first.span_log_end), {first.history_end, first.span_log_end}};
}

AttemptedRollout take(MemoryStore& store, RolloutId id) {
  AttemptedRollout taken = *store.dequeue("w1");
  must(taken.rollout.id == id);
  return taken;
}

void end(MemoryStore& store, const AttemptedRollout& taken) {
  AttemptUpdate update;
  update.status = AttemptStatus::succeeded;
  store.update_attempt(taken.rollout.id, taken.attempt.id, update);
}

// As real_lazy_snapshot, from a store that came back from a version whose first history segment
// was damaged: rollout 3 and the first resources version are lost records. Rollout 2, untrained,
// keeps rollout 3 in memory after rollout 1 left; their history entries lie before the version
// boundary the import starts at, so only the tables place them.
std::pair<MemoryStore::Snapshot, MemoryStore::LogStarts> real_lazy_lost_snapshot() {
  MemoryStore damaged(clock_, retrying());
  damaged.add_resources("policy", "v0");
  std::vector<NewRollout> rollouts(3);
  damaged.enqueue(rollouts);
  const AttemptedRollout one = take(damaged, 1), two = take(damaged, 2), three = take(damaged, 3);
  end(damaged, three);
  const std::string first_segment = damaged.export_history(0, damaged.log_lengths().first);
  end(damaged, one);
  const MemoryStore::Snapshot saved = damaged.export_state();
  MemoryStore store(clock_, retrying());
  store.import_state(saved.tables, saved.history.substr(first_segment.size()), saved.span_log, first_segment.size());
  const MemoryStore::Snapshot first = store.export_state();
  end(store, take(store, 2));  // requeued by the import
  run_some(store);
  const MemoryStore::Snapshot second = store.export_state(first.history_end, first.span_log_end);
  MemoryStore::Snapshot whole = second;
  whole.history = first.history + second.history;
  whole.span_log = first.span_log + second.span_log;
  store.set_archive(std::make_shared<VersionArchive>(whole));
  store.release_spans(second.span_log_end, {2});
  store.release_records(second.history_end, {2});
  MemoryStore::Snapshot third = store.export_state(first.history_end, first.span_log_end);
  must(third.history_base == first.history_end);
  const MemoryStore::LogStarts from{first.history_end, first.span_log_end};
  MemoryStore lazy(clock_);  // places the lost rollout in memory from the tables
  lazy.import_state(third.tables, third.history, third.span_log, std::nullopt, from);
  try {
    lazy.get_latest_attempt(3);
    must(false);
  } catch (const StoreError& e) {
    must(std::string(e.what()).find("lost") != std::string::npos);
  }
  return {std::move(third), from};
}

const MemoryStore::Snapshot base = real_snapshot();
const auto [lazy_base, lazy_from] = real_lazy_snapshot();
const auto [lazy_lost_base, lazy_lost_from] = real_lazy_lost_snapshot();

std::uint16_t u16(const std::uint8_t* at) { return static_cast<std::uint16_t>(at[0] | at[1] << 8); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return 0;
  const std::uint8_t flags = data[0];
  const bool lazy = flags & 16, lost_in_memory = lazy && (flags & 64);
  const MemoryStore::Snapshot& saved = lost_in_memory ? lazy_lost_base : lazy ? lazy_base : base;
  std::string parts[3] = {saved.tables, saved.history, saved.span_log};
  if (flags & 8) {
    parts[1].append(reinterpret_cast<const char*>(data + 5), size - 5);
  } else {
    const std::size_t total = parts[0].size() + parts[1].size() + parts[2].size();
    for (std::size_t at = 5; at + 3 <= size; at += 3) {
      std::size_t position = u16(data + at) % total;
      for (std::string& part : parts) {
        if (position < part.size()) {
          part[position] = static_cast<char>(part[position] ^ data[at + 2]);
          break;
        }
        position -= part.size();
      }
    }
  }
  if (const int cut = (flags >> 1) & 3)
    parts[cut - 1].resize(std::min<std::size_t>(u16(data + 1), parts[cut - 1].size()));
  const std::optional<std::uint64_t> lost = (flags & 1) ? std::optional<std::uint64_t>(u16(data + 3)) : std::nullopt;

  std::optional<MemoryStore::LogStarts> from;
  if (lazy)
    from = (flags & 32) ? MemoryStore::LogStarts{data[1], data[2]} : lost_in_memory ? lazy_lost_from : lazy_from;

  MemoryStore store(clock_);
  try {
    store.import_state(parts[0], parts[1], parts[2], lost, from);
  } catch (const DecodeError&) {
    must(store.statistics().resources == 0 && store.query_rollouts({}, {}).total == 0);
    return 0;
  }
  store.query_rollouts({}, {});
  store.query_attempts(AttemptFilter{}, {});
  store.statistics();
  try {
    store.get_latest_resources("");
  } catch (const StoreError&) {
  }
  // What it kept exports and imports again, to the same logs.
  const MemoryStore::LogStarts kept = from.value_or(MemoryStore::LogStarts{});
  MemoryStore::Snapshot again;
  try {
    again = store.export_state(kept.history, kept.span_log);
  } catch (const StoreError&) {  // entries of records let go of after the start: they live in the archive
    must(lazy);
    return 0;
  }
  MemoryStore second(clock_);
  second.import_state(again.tables, again.history, again.span_log, std::nullopt, from);  // a DecodeError: a finding
  const MemoryStore::Snapshot third = second.export_state(kept.history, kept.span_log);
  must(third.history == again.history && third.span_log == again.span_log);
  return 0;
}
