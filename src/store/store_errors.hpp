#pragma once
// The store's refusals, worded alike in each of its files.
#include <string>

#include "arclight/core/log.hpp"
#include "arclight/store/types.hpp"

namespace arclight::store {

inline StoreError refused(const std::string& what) { return StoreError(StoreError::invalid_transition, what); }
inline StoreError missing(const std::string& what) { return StoreError(StoreError::not_found, what); }

inline std::string name_of(const Rollout& r) { return log::concat("rollout ", r.id); }
inline std::string name_of(const Attempt& a) {
  return log::concat("attempt ", a.id, " (#", a.sequence_id, " of rollout ", a.rollout_id, ")");
}

}  // namespace arclight::store
