#include "arclight/comm/protocol.hpp"

#include <tuple>

#include "arclight/core/log.hpp"
#include "arclight/store/record_codec.hpp"
#include "arclight/store/span_record.hpp"

namespace arclight::comm::wire {
using namespace arclight::store;

namespace {

template <class T, class PutValue>
void put_optional(ByteWriter& w, const std::optional<T>& v, PutValue put_value) {
  w.boolean(v.has_value());
  if (v) put_value(*v);
}
template <class T, class GetValue>
void get_optional(ByteReader& r, std::optional<T>& v, GetValue get_value) {
  if (r.boolean())
    v = get_value();
  else
    v.reset();
}

}  // namespace

Header decode_header(std::string_view message) {
  if (message.size() < header_size)
    throw DecodeError(log::concat("message of ", message.size(), " bytes is shorter than a header"));
  ByteReader r(message);
  if (r.u16() != magic) throw DecodeError("bad magic: not an arclight message");
  std::uint8_t v = r.u8();
  if (v != version) throw DecodeError(log::concat("wire version ", int(v), ", this binary speaks ", int(version)));
  std::uint8_t type = r.u8();
  Header h;
  h.reply = (type & 0x80) != 0;
  type &= 0x7F;
  if (type >= static_cast<std::uint8_t>(Type::end_)) throw DecodeError(log::concat("unknown message type ", int(type)));
  h.type = static_cast<Type>(type);
  h.request_id = r.u32();
  h.body_length = r.u32();
  if (h.body_length != message.size() - header_size)
    throw DecodeError(
        log::concat("length field says ", h.body_length, " body bytes, message has ", message.size() - header_size));
  return h;
}

std::string_view body_of(std::string_view message) { return message.substr(header_size); }

std::string encode_error(std::uint32_t request_id, std::uint8_t code, std::string_view message) {
  std::string text(message.substr(0, 4096));
  std::uint32_t code32 = code;
  return encode(Type::error, true, request_id, code32, text);
}

// ---- values ----------------------------------------------------------------------------

void put(ByteWriter& w, std::uint64_t v) { w.u64(v); }
void put(ByteWriter& w, std::uint32_t v) { w.u32(v); }
void put(ByteWriter& w, double v) { w.f64(v); }
void put(ByteWriter& w, const std::string& v) { w.bytes(v); }
void get(ByteReader& r, std::uint64_t& v) { v = r.u64(); }
void get(ByteReader& r, std::uint32_t& v) { v = r.u32(); }
void get(ByteReader& r, double& v) { v = r.f64(); }
void get(ByteReader& r, std::string& v) { v = r.bytes(); }

// The store's own records: one codec (record_codec.hpp) serves the wire and the checkpoint's snapshot.
void put(ByteWriter& w, const RolloutConfig& v) { encode_rollout_config(w, v); }
void get(ByteReader& r, RolloutConfig& v) { v = decode_rollout_config(r); }
void put(ByteWriter& w, const Rollout& v) { encode_rollout(w, v); }
void get(ByteReader& r, Rollout& v) { v = decode_rollout(r); }
void put(ByteWriter& w, const Attempt& v) { encode_attempt(w, v); }
void get(ByteReader& r, Attempt& v) { v = decode_attempt(r); }
void put(ByteWriter& w, const ResourcesVersion& v) { encode_resources(w, v); }
void get(ByteReader& r, ResourcesVersion& v) { v = decode_resources(r); }

void put(ByteWriter& w, const NewRollout& v) {
  w.bytes(v.input);
  encode_enum(w, v.mode);
  w.u64(v.resources_id);
  put_optional(w, v.config, [&](const RolloutConfig& c) { encode_rollout_config(w, c); });
  w.bytes(v.metadata);
}
void get(ByteReader& r, NewRollout& v) {
  v.input = r.bytes();
  v.mode = decode_mode(r);
  v.resources_id = r.u64();
  get_optional(r, v.config, [&] { return decode_rollout_config(r); });
  v.metadata = r.bytes();
}

void put(ByteWriter& w, const AttemptedRollout& v) {
  put(w, v.rollout);
  put(w, v.attempt);
}
void get(ByteReader& r, AttemptedRollout& v) {
  get(r, v.rollout);
  get(r, v.attempt);
}

void put(ByteWriter& w, const Span& v) {
  w.u64(v.rollout_id);
  w.u64(v.attempt_id);
  w.u64(v.sequence_id);
  encode_span_body(w, v);
}
void get(ByteReader& r, Span& v) {
  v.rollout_id = r.u64();
  v.attempt_id = r.u64();
  v.sequence_id = r.u64();
  decode_span_body(r, v);
}

void put(ByteWriter& w, const AttemptUpdate& v) {
  put_optional(w, v.status, [&](AttemptStatus s) { encode_enum(w, s); });
  put_optional(w, v.worker_id, [&](const std::string& s) { w.bytes(s); });
  put_optional(w, v.last_heartbeat_time, [&](double t) { w.f64(t); });
}
void get(ByteReader& r, AttemptUpdate& v) {
  get_optional(r, v.status, [&] { return decode_attempt_status(r); });
  get_optional(r, v.worker_id, [&] { return std::string(r.bytes()); });
  get_optional(r, v.last_heartbeat_time, [&] { return r.f64(); });
}

void put(ByteWriter& w, const AttemptReport& v) {
  w.u64(v.rollout_id);
  w.u64(v.attempt_id);
  put(w, v.update);
}
void get(ByteReader& r, AttemptReport& v) {
  v.rollout_id = r.u64();
  v.attempt_id = r.u64();
  get(r, v.update);
}

void put(ByteWriter& w, const ReportOutcome& v) {
  put_optional(w, v.attempt, [&](const Attempt& a) { encode_attempt(w, a); });
  w.bytes(v.refusal);
}
void get(ByteReader& r, ReportOutcome& v) {
  get_optional(r, v.attempt, [&] { return decode_attempt(r); });
  v.refusal = std::string(r.bytes());
}

void put(ByteWriter& w, const AttemptsEnded& v) {
  put(w, v.span_ids);
  put(w, v.outcomes);
}
void get(ByteReader& r, AttemptsEnded& v) {
  get(r, v.span_ids);
  get(r, v.outcomes);
}

void put(ByteWriter& w, const RolloutUpdate& v) {
  put_optional(w, v.status, [&](RolloutStatus s) { encode_enum(w, s); });
  put_optional(w, v.mode, [&](Mode m) { encode_enum(w, m); });
  put_optional(w, v.resources_id, [&](ResourcesId id) { w.u64(id); });
  put_optional(w, v.config, [&](const RolloutConfig& c) { encode_rollout_config(w, c); });
  put_optional(w, v.metadata, [&](const std::string& s) { w.bytes(s); });
}
void get(ByteReader& r, RolloutUpdate& v) {
  get_optional(r, v.status, [&] { return decode_rollout_status(r); });
  get_optional(r, v.mode, [&] { return decode_mode(r); });
  get_optional(r, v.resources_id, [&] { return r.u64(); });
  get_optional(r, v.config, [&] { return decode_rollout_config(r); });
  get_optional(r, v.metadata, [&] { return std::string(r.bytes()); });
}

void put(ByteWriter& w, const RolloutFilter& v) {
  w.u8(v.statuses);
  put(w, v.ids);
  put_optional(w, v.mode, [&](Mode m) { encode_enum(w, m); });
}
void get(ByteReader& r, RolloutFilter& v) {
  v.statuses = r.u8();
  get(r, v.ids);
  get_optional(r, v.mode, [&] { return decode_mode(r); });
}

void put(ByteWriter& w, const SpanFilter& v) {
  w.u64(v.rollout_id);
  w.u64(v.attempt_id);
  w.bytes(v.name);
  w.u64(v.after_sequence_id);
}
void get(ByteReader& r, SpanFilter& v) {
  v.rollout_id = r.u64();
  v.attempt_id = r.u64();
  v.name = r.bytes();
  v.after_sequence_id = r.u64();
}

void put(ByteWriter& w, const AttemptFilter& v) {
  w.u64(v.rollout_id);
  w.u8(v.statuses);
  w.bytes(v.worker_id);
}
void get(ByteReader& r, AttemptFilter& v) {
  v.rollout_id = r.u64();
  v.statuses = r.u8();
  v.worker_id = r.bytes();
}

void put(ByteWriter& w, const Paging& v) {
  w.u64(v.offset);
  w.u64(v.limit);
}
void get(ByteReader& r, Paging& v) {
  v.offset = r.u64();
  v.limit = r.u64();
}

// A worker as the checkpoint keeps it, then what it works on now, and when it last dequeued, became busy and idle.
void put(ByteWriter& w, const Worker& v) {
  encode_worker_liveness(w, v);
  w.u64(v.current_rollout);
  w.u64(v.current_attempt);
  w.f64(v.last_dequeue_time);
  w.f64(v.last_busy_time);
  w.f64(v.last_idle_time);
}
void get(ByteReader& r, Worker& v) {
  v = decode_worker_liveness(r);
  v.current_rollout = r.u64();
  v.current_attempt = r.u64();
  v.last_dequeue_time = r.f64();
  v.last_busy_time = r.f64();
  v.last_idle_time = r.f64();
}

void put(ByteWriter& w, const Statistics& v) {
  for (std::uint64_t n : v.rollouts) w.u64(n);
  for (std::uint64_t n : v.attempts) w.u64(n);
  w.u64(v.spans);
  w.u64(v.span_bytes);
  w.u64(v.workers);
  w.u64(v.resources);
  w.u64(v.queue_length);
}
void get(ByteReader& r, Statistics& v) {
  for (std::uint64_t& n : v.rollouts) n = r.u64();
  for (std::uint64_t& n : v.attempts) n = r.u64();
  v.spans = r.u64();
  v.span_bytes = r.u64();
  v.workers = r.u64();
  v.resources = r.u64();
  v.queue_length = r.u64();
}

// ---- serving ----------------------------------------------------------------------------

namespace {

template <class T>
T read(ByteReader& r) {
  T v{};
  get(r, v);
  return v;
}

// The smallest encoded span: three ids, four empty strings, status, two times, no attributes.
constexpr std::size_t min_span_bytes = 3 * 8 + 4 * 4 + 1 + 2 * 8 + 4;

// A span as the wire carries it, its body checked but not copied.
SpanRecordView read_span_record(ByteReader& in) {
  SpanRecordView v;
  v.rollout_id = in.u64();
  v.attempt_id = in.u64();
  v.sequence_id = in.u64();
  v.body = take_span_body(in);
  return v;
}

// A request's spans, as the wire carries them (their bodies checked, not copied).
std::vector<SpanRecordView> read_span_records(ByteReader& in) {
  std::vector<SpanRecordView> spans(in.count(min_span_bytes));
  for (SpanRecordView& span : spans) span = read_span_record(in);
  return spans;
}

// Reads a request's arguments and checks that its body ends there, then calls the store:
// a bad request changes nothing. (A braced list reads the arguments in order.)
template <class... Args, class Call>
auto with_args(ByteReader& in, Call call) {
  std::tuple<Args...> args{read<Args>(in)...};
  in.expect_end();
  return std::apply(call, std::move(args));
}

using Id = std::uint64_t;

std::string serve(MemoryStore& s, const Header& h, ByteReader& in) {
  auto reply = [&](const auto&... values) { return encode(h.type, true, h.request_id, values...); };
  switch (h.type) {
    case Type::enqueue:
      return reply(
          with_args<std::vector<NewRollout>>(in, [&](auto rollouts) { return s.enqueue(std::move(rollouts)); }));
    case Type::dequeue:
      return reply(
          with_args<std::string, std::uint32_t>(in, [&](auto worker, auto n) { return s.dequeue(worker, n); }));
    case Type::start_rollout:
      return reply(with_args<NewRollout, std::string>(
          in, [&](auto rollout, auto worker) { return s.start_rollout(std::move(rollout), worker); }));
    case Type::start_attempt:
      return reply(with_args<Id, std::string>(in, [&](auto id, auto worker) { return s.start_attempt(id, worker); }));
    case Type::add_spans: {
      const std::vector<SpanRecordView> spans = read_span_records(in);
      in.expect_end();
      return reply(s.add_span_records(spans));
    }
    case Type::end_attempts: {  // the whole request read before the store changes
      const std::vector<SpanRecordView> spans = read_span_records(in);
      return reply(with_args<std::vector<AttemptReport>>(in, [&](auto ends) {
        AttemptsEnded out;
        out.span_ids = s.add_span_records(spans);
        out.outcomes = s.update_attempts(ends);
        return out;
      }));
    }
    case Type::add_span: {
      SpanRecordView span = read_span_record(in);
      in.expect_end();
      return reply(s.add_span_record(span));
    }
    case Type::update_attempt:
      return reply(with_args<Id, Id, AttemptUpdate>(
          in, [&](auto rollout, auto attempt, auto update) { return s.update_attempt(rollout, attempt, update); }));
    case Type::update_attempts:
      return reply(with_args<std::vector<AttemptReport>>(in, [&](auto reports) { return s.update_attempts(reports); }));
    case Type::update_rollout:
      return reply(
          with_args<Id, RolloutUpdate>(in, [&](auto id, auto update) { return s.update_rollout(id, update); }));
    case Type::query_rollouts:
      return reply(with_args<RolloutFilter, Paging>(in, [&](auto f, auto p) { return s.query_rollouts(f, p); }));
    case Type::query_attempts:
      return reply(with_args<AttemptFilter, Paging>(in, [&](auto f, auto p) { return s.query_attempts(f, p); }));
    case Type::get_latest_attempt: return reply(with_args<Id>(in, [&](auto id) { return s.get_latest_attempt(id); }));
    case Type::query_spans:
      return reply(with_args<SpanFilter, Paging>(in, [&](auto f, auto p) { return s.query_spans(f, p); }));
    case Type::add_resources:
      return reply(with_args<std::string, std::string>(
          in, [&](auto name, auto content) { return s.add_resources(name, std::move(content)); }));
    case Type::update_resources:
      return reply(with_args<std::string, std::string>(
          in, [&](auto name, auto content) { return s.update_resources(name, std::move(content)); }));
    case Type::get_resources: return reply(with_args<Id>(in, [&](auto id) { return s.get_resources(id); }));
    case Type::get_latest_resources:
      return reply(with_args<std::string>(in, [&](auto name) { return s.get_latest_resources(name); }));
    case Type::get_many_resources:
      return reply(with_args<std::vector<Id>>(in, [&](auto ids) { return s.get_resources(ids); }));
    case Type::list_resources: return reply(with_args<>(in, [&] { return s.list_resources(); }));
    case Type::wait_for_rollouts:
      // The timeout is read and dropped: a server that waits parks the request instead.
      return reply(
          with_args<std::vector<Id>, double>(in, [&](auto ids, double) { return s.wait_for_rollouts(ids, 0.0); }));
    case Type::next_sequence_id: return reply(with_args<Id>(in, [&](auto id) { return s.next_sequence_id(id); }));
    case Type::heartbeat: return reply(with_args<std::string>(in, [&](auto worker) { return s.heartbeat(worker); }));
    case Type::query_workers: return reply(with_args<>(in, [&] { return s.query_workers(); }));
    case Type::statistics: return reply(with_args<>(in, [&] { return s.statistics(); }));
    case Type::error:
    case Type::reset:
    case Type::bye:
    case Type::pending:
    case Type::end_: break;
  }
  throw DecodeError(log::concat("message type ", int(h.type), " is not a request this store serves"));
}

}  // namespace

std::optional<std::string> handle_request(MemoryStore& store, std::string_view request) {
  std::uint32_t request_id = 0;
  try {
    Header h = decode_header(request);
    request_id = h.request_id;
    if (h.reply) throw DecodeError("a reply sent as a request");
    if (h.type == Type::bye) return std::nullopt;
    ByteReader in(body_of(request));
    return serve(store, h, in);
  } catch (const StoreError& e) {
    return encode_error(request_id, e.code(), e.what());
  } catch (const DecodeError& e) {
    return encode_error(request_id, malformed, std::string("malformed request: ") + e.what());
  } catch (const std::exception& e) {
    return encode_error(request_id, internal, std::string("internal error: ") + e.what());
  }
}

}  // namespace arclight::comm::wire
