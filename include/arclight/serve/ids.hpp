#pragma once
// The store's numeric ids as the strings HTTP clients see (Agent Lightning's ids are opaque strings): rollout 7 is
// "ro-7", attempt 3 "at-3", resources 2 "rs-2". One mapping for the endpoint's tracing and the store API.
#include <optional>
#include <string>
#include <string_view>

#include "arclight/store/types.hpp"

namespace arclight::serve {

std::string rollout_name(store::RolloutId id);
std::string attempt_name(store::AttemptId id);
std::string resources_name(store::ResourcesId id);

// The id a name stands for; nullopt for anything else (another prefix, no digits, 0, overflow).
std::optional<store::RolloutId> parse_rollout_name(std::string_view name);
std::optional<store::AttemptId> parse_attempt_name(std::string_view name);
std::optional<store::ResourcesId> parse_resources_name(std::string_view name);

}  // namespace arclight::serve
