#include "arclight/store/types.hpp"

namespace arclight::store {

std::string_view to_string(RolloutStatus s) {
  static constexpr std::string_view names[] = {"queuing", "preparing", "running",  "succeeded",
                                               "failed",  "cancelled", "requeuing"};
  return names[static_cast<int>(s)];
}

std::string_view to_string(AttemptStatus s) {
  static constexpr std::string_view names[] = {"preparing", "running", "succeeded",
                                               "failed",    "timeout", "unresponsive"};
  return names[static_cast<int>(s)];
}

std::string_view to_string(Mode m) {
  static constexpr std::string_view names[] = {"train", "val", "test", "none"};
  return names[static_cast<int>(m)];
}

std::string_view to_string(WorkerStatus s) {
  static constexpr std::string_view names[] = {"idle", "busy", "unknown"};
  return names[static_cast<int>(s)];
}

std::optional<AttemptStatus> parse_attempt_status(std::string_view name) {
  for (int i = 0; i < attempt_status_count; ++i)
    if (to_string(static_cast<AttemptStatus>(i)) == name) return static_cast<AttemptStatus>(i);
  return std::nullopt;
}

}  // namespace arclight::store

#include "arclight/store/store.hpp"

namespace arclight::store {

std::vector<ReportOutcome> Store::update_attempts(const std::vector<AttemptReport>& reports) {
  std::vector<ReportOutcome> outcomes(reports.size());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    try {
      outcomes[i].attempt = update_attempt(reports[i].rollout_id, reports[i].attempt_id, reports[i].update);
    } catch (const StoreError& e) {
      outcomes[i].refusal = e.what();
    }
  }
  return outcomes;
}

AttemptsEnded Store::end_attempts(std::vector<Span> spans, const std::vector<AttemptReport>& ends) {
  AttemptsEnded out;
  if (!spans.empty()) out.span_ids = add_spans(std::move(spans));
  out.outcomes = update_attempts(ends);
  return out;
}

Rollout Store::get_rollout(RolloutId rollout_id) {
  RolloutFilter filter;
  filter.ids = {rollout_id};
  Page<Rollout> page = query_rollouts(filter, {});
  if (page.items.empty()) throw StoreError(StoreError::not_found, "no rollout " + std::to_string(rollout_id));
  return std::move(page.items.front());
}

}  // namespace arclight::store
