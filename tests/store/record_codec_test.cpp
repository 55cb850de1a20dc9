#include "arclight/store/record_codec.hpp"

#include <boost/test/unit_test.hpp>
#include <cstdio>

using namespace arclight;
using namespace arclight::store;

namespace {

template <class Record>
std::string encoded(void (*encode)(ByteWriter&, const Record&), const Record& record) {
  std::string bytes;
  ByteWriter out(bytes);
  encode(out, record);
  return bytes;
}

template <class Record>
Record decoded(Record (*decode)(ByteReader&), std::string_view bytes) {
  ByteReader in(bytes);
  Record record = decode(in);
  in.expect_end();
  return record;
}

std::string hex(std::string_view bytes) {
  std::string out;
  char digits[3];
  for (unsigned char c : bytes) {
    std::snprintf(digits, sizeof digits, "%02x", c);
    out += digits;
  }
  return out;
}

// Every field differs from its default and from its neighbours of the same type, so that a field
// dropped or two swapped show in the bytes encoded again. Fields in their declared order.
Rollout some_rollout() {
  return Rollout{
      7,   "2+2",  Mode::val, 3, RolloutStatus::running, RolloutConfig{30.5, 10, 3, bit(AttemptStatus::failed)},
      "m", 100.25, 0,         2};
}
Attempt some_attempt() { return Attempt{9, 7, 2, "w1", AttemptStatus::unresponsive, 101, 0, 102.5}; }
ResourcesVersion some_resources() { return ResourcesVersion{2, "policy", 2, 99.5, std::string("v1\0x", 4)}; }
Worker some_worker() { return Worker{"w1", WorkerStatus::busy, 102.5, 4, 0, 0}; }

// Each cut of a record's bytes short of its end is refused.
template <class Record>
void check_every_truncation_is_refused(Record (*decode)(ByteReader&), const std::string& bytes) {
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    ByteReader in(std::string_view(bytes).substr(0, cut));
    BOOST_CHECK_THROW(decode(in), DecodeError);
  }
}

// The bytes with the enum at `offset` one past its last value are refused, with a message that names the enum.
template <class Record>
void check_enum_past_its_last_is_refused(Record (*decode)(ByteReader&), std::string bytes, std::size_t offset,
                                         int count, const std::string& name) {
  bytes[offset] = static_cast<char>(count);
  ByteReader in(bytes);
  BOOST_CHECK_EXCEPTION(decode(in), DecodeError, [&](const DecodeError& e) {
    return std::string(e.what()).find("bad " + name + " " + std::to_string(count)) != std::string::npos;
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(record_codec)

BOOST_AUTO_TEST_CASE(every_record_round_trips) {
  const std::string rollout = encoded(encode_rollout, some_rollout());
  const Rollout r = decoded(decode_rollout, rollout);
  BOOST_TEST(r.input == "2+2");
  BOOST_TEST((r.status == RolloutStatus::running));
  BOOST_TEST((r.config == some_rollout().config));
  BOOST_TEST(encoded(encode_rollout, r) == rollout);

  const std::string attempt = encoded(encode_attempt, some_attempt());
  const Attempt a = decoded(decode_attempt, attempt);
  BOOST_TEST(a.worker_id == "w1");
  BOOST_TEST((a.status == AttemptStatus::unresponsive));
  BOOST_TEST(encoded(encode_attempt, a) == attempt);

  const std::string resources = encoded(encode_resources, some_resources());
  const ResourcesVersion v = decoded(decode_resources, resources);
  BOOST_TEST(v.content == some_resources().content);  // a NUL byte too
  BOOST_TEST(encoded(encode_resources, v) == resources);

  const std::string worker = encoded(encode_worker_liveness, some_worker());
  const Worker w = decoded(decode_worker_liveness, worker);
  BOOST_TEST((w.status == WorkerStatus::busy));
  BOOST_TEST(w.heartbeats == 4u);
  BOOST_TEST(w.current_rollout == 0u);  // not part of what is kept
  BOOST_TEST(encoded(encode_worker_liveness, w) == worker);

  const RolloutConfig config{1.5, 0.25, 4, 0x3c};
  BOOST_TEST((decoded(decode_rollout_config, encoded(encode_rollout_config, config)) == config));
}

// Checkpoints hold these bytes: the encoding of the snapshot's format 2, as the code before the codec wrote it.
BOOST_AUTO_TEST_CASE(the_encoding_is_the_checkpoints) {
  BOOST_TEST(hex(encoded(encode_rollout, some_rollout())) ==
             "0700000000000000"
             "03000000"
             "322b32"
             "01"
             "0300000000000000"
             "02"
             "0000000000803e40"
             "0000000000002440"
             "03000000"
             "08"
             "01000000"
             "6d"
             "0000000000105940"
             "0000000000000000"
             "02000000");
  BOOST_TEST(hex(encoded(encode_attempt, some_attempt())) ==
             "0900000000000000"
             "0700000000000000"
             "02000000"
             "02000000"
             "7731"
             "05"
             "0000000000405940"
             "0000000000000000"
             "0000000000a05940");
  BOOST_TEST(hex(encoded(encode_resources, some_resources())) ==
             "0200000000000000"
             "06000000"
             "706f6c696379"
             "0200000000000000"
             "0000000000e05840"
             "04000000"
             "76310078");
  BOOST_TEST(hex(encoded(encode_worker_liveness, some_worker())) ==
             "02000000"
             "7731"
             "01"
             "0000000000a05940"
             "0400000000000000");
}

BOOST_AUTO_TEST_CASE(the_least_sizes_are_those_of_records_with_empty_strings) {
  BOOST_TEST(encoded(encode_rollout_config, RolloutConfig{}).size() == min_rollout_config_bytes);
  BOOST_TEST(encoded(encode_rollout, Rollout{}).size() == min_rollout_bytes);
  BOOST_TEST(encoded(encode_attempt, Attempt{}).size() == min_attempt_bytes);
  BOOST_TEST(encoded(encode_resources, ResourcesVersion{}).size() == min_resources_bytes);
  BOOST_TEST(encoded(encode_worker_liveness, Worker{}).size() == min_worker_liveness_bytes);
}

BOOST_AUTO_TEST_CASE(every_truncation_is_refused) {
  check_every_truncation_is_refused(decode_rollout_config, encoded(encode_rollout_config, some_rollout().config));
  check_every_truncation_is_refused(decode_rollout, encoded(encode_rollout, some_rollout()));
  check_every_truncation_is_refused(decode_attempt, encoded(encode_attempt, some_attempt()));
  check_every_truncation_is_refused(decode_resources, encoded(encode_resources, some_resources()));
  check_every_truncation_is_refused(decode_worker_liveness, encoded(encode_worker_liveness, some_worker()));
}

BOOST_AUTO_TEST_CASE(an_enum_out_of_range_is_refused) {
  const std::string rollout = encoded(encode_rollout, Rollout{});
  const std::size_t mode_at = sizeof(RolloutId) + empty_bytes_size;
  const std::size_t rollout_status_at = mode_at + sizeof(Mode) + sizeof(ResourcesId);
  check_enum_past_its_last_is_refused(decode_rollout, rollout, mode_at, mode_count, "mode");
  check_enum_past_its_last_is_refused(decode_rollout, rollout, rollout_status_at, rollout_status_count,
                                      "rollout status");
  const std::size_t attempt_status_at =  // after the ids, the sequence id and the worker id
      sizeof(AttemptId) + sizeof(RolloutId) + sizeof(std::uint32_t) + empty_bytes_size;
  check_enum_past_its_last_is_refused(decode_attempt, encoded(encode_attempt, Attempt{}), attempt_status_at,
                                      attempt_status_count, "attempt status");
  check_enum_past_its_last_is_refused(decode_worker_liveness, encoded(encode_worker_liveness, Worker{}),
                                      empty_bytes_size, worker_status_count, "worker status");
  // The last value of each is still read.
  std::string last = rollout;
  last[rollout_status_at] = static_cast<char>(rollout_status_count - 1);
  BOOST_TEST((decoded(decode_rollout, last).status == RolloutStatus::requeuing));
}

BOOST_AUTO_TEST_SUITE_END()
