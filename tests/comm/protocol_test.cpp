#include "arclight/comm/protocol.hpp"

#include <boost/test/unit_test.hpp>

#include "arclight/core/clock.hpp"
#include "arclight/store/memory_store.hpp"

using namespace arclight;
using namespace arclight::store;
namespace wire = arclight::comm::wire;

namespace {
struct Fixture {
  ManualClock clock;
  MemoryStore store{clock};
};

// The error code of a reply, or -1 for a success reply.
int error_code(const std::string& reply) {
  wire::Header h = wire::decode_header(reply);
  BOOST_REQUIRE(h.reply);
  if (h.type != wire::Type::error) return -1;
  ByteReader in(wire::body_of(reply));
  return static_cast<int>(in.u32());
}

template <class T>
T decode_reply(const std::string& reply) {
  ByteReader in(wire::body_of(reply));
  T out{};
  wire::get(in, out);
  in.expect_end();
  return out;
}

NewRollout task(const std::string& input) {
  NewRollout r;
  r.input = input;
  return r;
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(protocol, Fixture)

BOOST_AUTO_TEST_CASE(requests_round_trip_through_the_handler) {
  std::vector<NewRollout> rollouts{task("a"), task("b")};
  std::string reply = *wire::handle_request(store, wire::encode(wire::Type::enqueue, false, 7, rollouts));
  BOOST_TEST(wire::decode_header(reply).request_id == 7u);
  BOOST_TEST(error_code(reply) == -1);
  auto queued = decode_reply<std::vector<Rollout>>(reply);
  BOOST_REQUIRE(queued.size() == 2u);
  BOOST_TEST(queued[1].input == "b");

  std::string worker = "w1";
  std::uint32_t count = 1;
  auto got = decode_reply<std::vector<AttemptedRollout>>(
      *wire::handle_request(store, wire::encode(wire::Type::dequeue, false, 8, worker, count)));
  BOOST_REQUIRE(got.size() == 1u);
  BOOST_TEST(got[0].attempt.worker_id == "w1");

  Span span;
  span.rollout_id = got[0].rollout.id;
  span.attempt_id = got[0].attempt.id;
  span.name = "llm";
  span.attributes = {{"ids", TokenIds{5, 6}}, {"lp", Floats{-1.f}}};
  std::vector<Span> spans{span, span};
  auto seq = decode_reply<std::vector<std::uint64_t>>(
      *wire::handle_request(store, wire::encode(wire::Type::add_spans, false, 9, spans)));
  BOOST_TEST(seq == (std::vector<std::uint64_t>{1, 2}));

  SpanFilter filter;
  filter.rollout_id = span.rollout_id;
  Paging paging;
  auto page = decode_reply<Page<Span>>(
      *wire::handle_request(store, wire::encode(wire::Type::query_spans, false, 10, filter, paging)));
  BOOST_REQUIRE(page.total == 2u);
  BOOST_TEST((page.items[1].attributes == span.attributes));
  BOOST_TEST(page.items[1].sequence_id == 2u);
}

BOOST_AUTO_TEST_CASE(refusals_come_back_as_store_error_codes) {
  RolloutId id = 12345;
  std::string reply = *wire::handle_request(store, wire::encode(wire::Type::get_latest_attempt, false, 1, id));
  BOOST_TEST(error_code(reply) == int(StoreError::not_found));
}

// Past 1 GiB the length field and MPI's int count would wrap (a truncated frame, a job aborted by MPI): a message that
// large is not encoded (a client's request fails before it is sent), a reply that large is an error reply to its
// request.
BOOST_AUTO_TEST_CASE(a_message_past_the_body_limit_is_refused_with_its_request_id) {
  for (int i = 0; i < 2; ++i) store.enqueue(task(std::string(wire::max_body / 2, 'y')));
  const RolloutFilter all;
  const Paging paging;
  const std::string reply =
      *wire::handle_request(store, wire::encode(wire::Type::query_rollouts, false, 11, all, paging));
  BOOST_TEST(wire::decode_header(reply).request_id == 11u);
  BOOST_TEST(error_code(reply) == int(StoreError::invalid_argument));
}

BOOST_AUTO_TEST_CASE(every_truncation_is_answered_with_an_error_and_changes_nothing) {
  std::vector<NewRollout> rollouts{task("abc"), task("def")};
  std::string request = wire::encode(wire::Type::enqueue, false, 3, rollouts);
  for (std::size_t cut = 0; cut < request.size(); ++cut) {
    auto reply = wire::handle_request(store, request.substr(0, cut));
    BOOST_REQUIRE(reply.has_value());
    BOOST_TEST(error_code(*reply) == int(wire::malformed), "cut at " << cut);
  }
  // A body that is cut but carries a matching length field still fails in the body, before any change.
  std::string body_cut = request.substr(0, request.size() - 2);
  ByteWriter(body_cut).patch_u32(8, static_cast<std::uint32_t>(body_cut.size() - wire::header_size));
  BOOST_TEST(error_code(*wire::handle_request(store, body_cut)) == int(wire::malformed));
  BOOST_TEST(store.statistics().rollouts[int(RolloutStatus::queuing)] == 0u);
}

// Spans and ends in one request: cut anywhere (the length field saying so), neither the spans nor the ends land.
BOOST_AUTO_TEST_CASE(an_end_attempts_request_cut_anywhere_changes_nothing) {
  store.enqueue({task("ending")});
  const AttemptedRollout ar = *store.dequeue("w");
  Span span;
  span.rollout_id = ar.rollout.id;
  span.attempt_id = ar.attempt.id;
  span.name = "llm";
  AttemptReport end{ar.rollout.id, ar.attempt.id, {}};
  end.update.status = AttemptStatus::succeeded;
  const std::string request =
      wire::encode(wire::Type::end_attempts, false, 3, std::vector<Span>{span, span}, std::vector<AttemptReport>{end});
  for (std::size_t cut = wire::header_size; cut < request.size(); ++cut) {
    std::string body_cut = request.substr(0, cut);
    ByteWriter(body_cut).patch_u32(8, static_cast<std::uint32_t>(cut - wire::header_size));
    BOOST_TEST(error_code(*wire::handle_request(store, body_cut)) == int(wire::malformed), "cut at " << cut);
  }
  BOOST_TEST(store.statistics().spans == 0u);
  BOOST_TEST((store.get_latest_attempt(ar.rollout.id).status == AttemptStatus::preparing));
  const auto done = decode_reply<AttemptsEnded>(*wire::handle_request(store, request));
  BOOST_TEST(done.span_ids == (std::vector<std::uint64_t>{1, 2}));
  BOOST_REQUIRE(done.outcomes.size() == 1u);
  BOOST_TEST((done.outcomes[0].attempt->status == AttemptStatus::succeeded));
}

BOOST_AUTO_TEST_CASE(bad_headers_are_refused) {
  std::string good = wire::encode(wire::Type::statistics, false, 1);
  BOOST_TEST(error_code(*wire::handle_request(store, good)) == -1);
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  std::string bad_version = good;
  bad_version[2] = 99;
  std::string unknown_type = good;
  unknown_type[3] = 0x7E;
  std::string reply_as_request = good;
  reply_as_request[3] = static_cast<char>(reply_as_request[3] | 0x80);
  std::string trailing = good + "x";
  for (const std::string& bad :
       {bad_magic, bad_version, unknown_type, reply_as_request, trailing, std::string("\x41\x4c")}) {
    BOOST_TEST(error_code(*wire::handle_request(store, bad)) == int(wire::malformed));
  }
  // The version is checked and named.
  ByteReader in(wire::body_of(*wire::handle_request(store, bad_version)));
  in.u32();
  BOOST_TEST(std::string(in.bytes()).find("version 99") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_lying_count_is_refused_without_allocating) {
  std::string request = wire::encode(wire::Type::enqueue, false, 1);
  ByteWriter w(request);
  w.u32(0xFFFFFFF0u);  // "four billion rollouts follow"
  ByteWriter(request).patch_u32(8, 4);
  BOOST_TEST(error_code(*wire::handle_request(store, request)) == int(wire::malformed));
}

// A count's bound is the least encoding of what it counts: a larger one would refuse true messages.
template <class T>
std::size_t least_encoding() {
  std::string bytes;
  ByteWriter w(bytes);
  wire::put(w, T{});
  return bytes.size();
}

BOOST_AUTO_TEST_CASE(count_bounds_are_the_least_encodings) {
  BOOST_TEST(wire::min_encoded_bytes<std::uint64_t> == least_encoding<std::uint64_t>());
  BOOST_TEST(wire::min_encoded_bytes<Rollout> == least_encoding<Rollout>());
  BOOST_TEST(wire::min_encoded_bytes<Attempt> == least_encoding<Attempt>());
  BOOST_TEST(wire::min_encoded_bytes<AttemptedRollout> == least_encoding<AttemptedRollout>());
  BOOST_TEST(wire::min_encoded_bytes<Worker> == least_encoding<Worker>());
}

BOOST_AUTO_TEST_CASE(random_mutations_never_crash_the_handler) {
  std::vector<NewRollout> rollouts{task("seed")};
  store.enqueue(rollouts);
  auto ar = *store.dequeue("w");
  Span span;
  span.rollout_id = ar.rollout.id;
  span.attempt_id = ar.attempt.id;
  span.attributes = {{"k", std::string("v")}, {"n", 1.0}};
  std::vector<std::string> seeds = {
      wire::encode(wire::Type::enqueue, false, 1, rollouts),
      wire::encode(wire::Type::add_span, false, 2, span),
      wire::encode(wire::Type::query_rollouts, false, 3, RolloutFilter{}, Paging{}),
      wire::encode(wire::Type::update_rollout, false, 4, ar.rollout.id, RolloutUpdate{}),
      wire::encode(wire::Type::end_attempts, false, 5, std::vector<Span>{span, span},
                   std::vector<AttemptReport>{{ar.rollout.id, ar.attempt.id, {}}}),
  };
  std::uint64_t rng = 42;
  auto next = [&rng] {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng >> 33;
  };
  for (int i = 0; i < 20000; ++i) {
    std::string m = seeds[next() % seeds.size()];
    for (int flips = 1 + next() % 4; flips > 0; --flips) m[next() % m.size()] = static_cast<char>(next());
    if (next() % 3 == 0) m.resize(next() % (m.size() + 1));
    auto reply = wire::handle_request(store, m);
    if (reply) BOOST_REQUIRE_NO_THROW(wire::decode_header(*reply));
  }
}

BOOST_AUTO_TEST_SUITE_END()
