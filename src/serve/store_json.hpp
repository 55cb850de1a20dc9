#pragma once
// The store's types as Agent Lightning v0.3's JSON (../shared/agl-v0.3-interfaces.md, 1.1): rollouts, attempts and
// spans, ids as "ro-<n>" and "at-<n>" (ids.hpp). For the runner's task routes and rank 0's store API.
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "arclight/store/types.hpp"

namespace arclight::serve {

using Json = nlohmann::ordered_json;

// A JSON body that does not make the type: the message names the field.
class StoreJsonError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

Json rollout_json(const store::Rollout& rollout);
Json attempt_json(const store::Attempt& attempt);
Json attempted_rollout_json(const store::AttemptedRollout& attempted);  // the rollout's fields and "attempt"

// An AGL Span: name, status, start and end times, ids, and the attributes (str, bool, int, float; lists of integers
// as token ids, lists of numbers as floats; anything else kept as its JSON text). Throws StoreJsonError.
store::Span span_from_json(const Json& span);
Json span_json(const store::Span& span);

}  // namespace arclight::serve
