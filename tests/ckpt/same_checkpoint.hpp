#pragma once
#include <boost/test/unit_test.hpp>

#include "arclight/ckpt/checkpoint.hpp"

// Two checkpoints hold the same state (a version read back against what was written).
inline void expect_same(const arclight::ckpt::Checkpoint& a, const arclight::ckpt::Checkpoint& b) {
  BOOST_TEST(a.step == b.step);
  BOOST_TEST(a.parameters == b.parameters);
  BOOST_TEST(a.exp_avg == b.exp_avg);
  BOOST_TEST(a.exp_avg_sq == b.exp_avg_sq);
  BOOST_TEST(a.optimizer_steps == b.optimizer_steps);
  BOOST_TEST((a.base_crc32c == b.base_crc32c));
  BOOST_TEST(a.model_definition == b.model_definition);
  BOOST_TEST(a.metrics_jsonl == b.metrics_jsonl);
  BOOST_TEST(a.span_log == b.span_log);
  BOOST_TEST(a.store_tables == b.store_tables);
  BOOST_TEST(a.store_history == b.store_history);
  BOOST_TEST(a.untrained_rollouts == b.untrained_rollouts);
  BOOST_TEST(a.coordinator_rng == b.coordinator_rng);
  BOOST_TEST(a.tensors.size() == b.tensors.size());
}
