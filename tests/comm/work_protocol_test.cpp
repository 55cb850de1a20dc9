#include "arclight/comm/work_protocol.hpp"

#include <boost/test/unit_test.hpp>

using namespace arclight;
namespace work = arclight::comm::work;

BOOST_AUTO_TEST_SUITE(work_protocol)

BOOST_AUTO_TEST_CASE(every_request_round_trips) {
  const std::string samples("\x01\x00\x02samples", 10);  // opaque bytes, zeros included
  work::Request train = work::decode_request(work::encode(work::Train{1234.5, samples}));
  BOOST_REQUIRE(std::holds_alternative<work::Train>(train));
  BOOST_TEST(std::get<work::Train>(train).total_tokens == 1234.5);
  BOOST_TEST(std::get<work::Train>(train).samples == samples);

  work::Request save = work::decode_request(work::encode(work::Save{-7}));
  BOOST_REQUIRE(std::holds_alternative<work::Save>(save));
  BOOST_TEST(std::get<work::Save>(save).step == -7);

  work::Request restore = work::decode_request(work::encode(work::Restore{"/ckpt/v 12.h5"}));
  BOOST_REQUIRE(std::holds_alternative<work::Restore>(restore));
  BOOST_TEST(std::get<work::Restore>(restore).path == "/ckpt/v 12.h5");

  BOOST_TEST(std::holds_alternative<work::Stop>(work::decode_request(work::encode(work::Stop{}))));
  BOOST_TEST(std::holds_alternative<work::Begin>(work::decode_request(work::encode(work::Begin{}))));
}

BOOST_AUTO_TEST_CASE(a_bad_request_is_a_decode_error) {
  std::string unknown = work::encode(work::Stop{});
  unknown[0] = 9;  // no such kind
  BOOST_CHECK_THROW(work::decode_request(unknown), DecodeError);
  BOOST_CHECK_THROW(work::decode_request(std::string(3, '\0')), DecodeError);  // no whole kind
  std::string save = work::encode(work::Save{3});
  BOOST_CHECK_THROW(work::decode_request(save.substr(0, save.size() - 1)), DecodeError);
  BOOST_CHECK_THROW(work::decode_request(save + "x"), DecodeError);  // trailing bytes
  std::string restore = work::encode(work::Restore{"abc"});
  BOOST_CHECK_THROW(work::decode_request(restore.substr(0, restore.size() - 1)), DecodeError);
}

BOOST_AUTO_TEST_CASE(trainer_figures_round_trip_by_name) {
  work::TrainerFigures f{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::string bytes = work::encode(f);
  BOOST_TEST(bytes.size() == work::trainer_figures_bytes);
  work::TrainerFigures back = work::decode_figures(bytes);
  BOOST_TEST(back.loss == 1);
  BOOST_TEST(back.policy_loss == 2);
  BOOST_TEST(back.kl == 3);
  BOOST_TEST(back.entropy == 4);
  BOOST_TEST(back.clip_fraction == 5);
  BOOST_TEST(back.clip_fraction_lower == 6);
  BOOST_TEST(back.grad_norm == 7);
  BOOST_TEST(back.action_tokens == 8);
  BOOST_TEST(back.train_seconds == 9);
  BOOST_TEST(back.sync_seconds == 10);
  BOOST_CHECK_THROW(work::decode_figures(bytes.substr(1)), DecodeError);
  BOOST_CHECK_THROW(work::decode_figures(bytes + '\0'), DecodeError);
}

BOOST_AUTO_TEST_CASE(a_restore_answer_round_trips_and_refuses_anything_else) {
  const work::Restored r{work::Restored::Outcome::damaged, "v2.h5: checksum mismatch", 12345, 0.5, 0.25, 1.5};
  const std::string bytes = work::encode(r);
  const work::Restored back = work::decode_restored(bytes);
  BOOST_TEST(static_cast<int>(back.outcome) == static_cast<int>(r.outcome));
  BOOST_TEST(back.why == r.why);
  BOOST_TEST(back.bytes_read == r.bytes_read);
  BOOST_TEST(back.read_seconds == r.read_seconds);
  BOOST_TEST(back.broadcast_seconds == r.broadcast_seconds);
  BOOST_TEST(back.seconds == r.seconds);
  BOOST_CHECK_THROW(work::decode_restored(bytes.substr(0, bytes.size() - 1)), DecodeError);
  BOOST_CHECK_THROW(work::decode_restored(bytes + '\0'), DecodeError);
  BOOST_CHECK_THROW(work::decode_restored(""), DecodeError);  // an empty answer is no restore's
  std::string unfit = bytes;
  unfit[0] = 3;
  BOOST_TEST(static_cast<int>(work::decode_restored(unfit).outcome) ==
             static_cast<int>(work::Restored::Outcome::unfit));
  std::string unknown = bytes;
  unknown[0] = 4;
  BOOST_CHECK_THROW(work::decode_restored(unknown), DecodeError);
}

BOOST_AUTO_TEST_CASE(the_policy_resource_text_round_trips_and_refuses_anything_else) {
  const work::PolicyResource p{18446744073709551615ull, 4294967295u};
  BOOST_TEST(work::encode(p) == "version=18446744073709551615 checksum=4294967295");
  const work::PolicyResource back = work::decode_policy_resource(work::encode(p));
  BOOST_TEST(back.version == p.version);
  BOOST_TEST(back.checksum == p.checksum);
  BOOST_TEST(work::decode_policy_resource("version=3 checksum=17").version == 3u);  // as older versions wrote it
  for (const char* bad : {"", "version=", "version=x checksum=1", "version=1", "version=1 checksum=", "v=1 checksum=2",
                          "version=1 checksum=2 more", "version=1 checksum=99999999999", "version=-1 checksum=2"})
    BOOST_CHECK_THROW(work::decode_policy_resource(bad), DecodeError);
}

BOOST_AUTO_TEST_CASE(the_ledger_entry_round_trips_and_refuses_anything_else) {
  const work::LedgerEntry e{12, {5, 6, 700}};
  BOOST_TEST(work::encode(e) == "step=12 rollouts=5,6,700");
  const work::LedgerEntry back = work::decode_ledger_entry(work::encode(e));
  BOOST_TEST(back.step == 12);
  BOOST_TEST(back.rollouts == e.rollouts);
  BOOST_TEST(work::decode_ledger_entry("step=3 rollouts=").rollouts.empty());  // a step where nothing was trained on
  for (const char* bad : {"", "step=1", "step=1 rollouts=1,", "step=1 rollouts=,1", "step=1 rollouts=1,,2",
                          "step=x rollouts=1", "step=1 rollouts=1 2", "step=1 rollouts=-1"})
    BOOST_CHECK_THROW(work::decode_ledger_entry(bad), DecodeError);
}

BOOST_AUTO_TEST_SUITE_END()
