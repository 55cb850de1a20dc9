#include "arclight/serve/ids.hpp"

#include <charconv>

namespace arclight::serve {
namespace {

std::optional<std::uint64_t> parse_prefixed(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits[0] == '0') return std::nullopt;  // one spelling per id: no "ro-07", no "ro-0"
  std::uint64_t id = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return id;
}

}  // namespace

std::string rollout_name(store::RolloutId id) { return "ro-" + std::to_string(id); }
std::string attempt_name(store::AttemptId id) { return "at-" + std::to_string(id); }
std::string resources_name(store::ResourcesId id) { return "rs-" + std::to_string(id); }

std::optional<store::RolloutId> parse_rollout_name(std::string_view name) { return parse_prefixed(name, "ro-"); }
std::optional<store::AttemptId> parse_attempt_name(std::string_view name) {
  const auto id = parse_prefixed(name, "at-");
  if (id == store::latest_attempt) return std::nullopt;  // the store's word for "the latest", never an attempt's id
  return id;
}
std::optional<store::ResourcesId> parse_resources_name(std::string_view name) { return parse_prefixed(name, "rs-"); }

}  // namespace arclight::serve
