#include "arclight/comm/work_protocol.hpp"

#include <charconv>

namespace arclight::comm::work {
namespace {

struct RequestWriter {
  ByteWriter& w;
  void operator()(const Train& r) {
    w.f64(r.total_tokens);
    w.raw(r.samples.data(), r.samples.size());  // the rest of the message
  }
  void operator()(const Stop&) {}
  void operator()(const Save& r) { w.i64(r.step); }
  void operator()(const Restore& r) { w.bytes(r.path); }
  void operator()(const Begin&) {}
};

constexpr Kind kind_of(const Request& request) {
  constexpr Kind kinds[] = {Kind::train, Kind::stop, Kind::save, Kind::restore, Kind::begin};
  return kinds[request.index()];
}

// Reads an unsigned decimal number at the front of `text` and moves past it.
template <class Number>
Number take_number(std::string_view& text, const char* what) {
  Number n{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (error != std::errc() || end == text.data())
    throw DecodeError(std::string("bad ") + what + " in \"" + std::string(text) + "\"");
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return n;
}

void take_literal(std::string_view& text, std::string_view literal) {
  if (text.substr(0, literal.size()) != literal)
    throw DecodeError("expected \"" + std::string(literal) + "\" at \"" + std::string(text) + "\"");
  text.remove_prefix(literal.size());
}

void expect_end(std::string_view text) {
  if (!text.empty()) throw DecodeError("trailing text \"" + std::string(text) + "\"");
}

// Parses a resource text; an error names the text whole.
template <class Parse>
auto parse_text(const char* what, std::string_view text, Parse parse) {
  try {
    return parse(text);
  } catch (const DecodeError& e) {
    throw DecodeError(std::string(what) + " \"" + std::string(text) + "\": " + e.what());
  }
}

}  // namespace

std::string encode(const Request& request) {
  std::string out;
  ByteWriter w(out);
  w.u32(static_cast<std::uint32_t>(kind_of(request)));
  std::visit(RequestWriter{w}, request);
  return out;
}

Request decode_request(std::string_view bytes) {
  ByteReader in(bytes);
  const std::uint32_t kind = in.u32();
  Request request;
  switch (static_cast<Kind>(kind)) {
    case Kind::train: {
      Train t;
      t.total_tokens = in.f64();
      t.samples = std::string(in.raw(in.remaining()));
      request = std::move(t);
      break;
    }
    case Kind::stop: request = Stop{}; break;
    case Kind::save: request = Save{in.i64()}; break;
    case Kind::restore: request = Restore{std::string(in.bytes())}; break;
    case Kind::begin: request = Begin{}; break;
    default: throw DecodeError("work request of unknown kind " + std::to_string(kind));
  }
  in.expect_end();
  return request;
}

std::string encode(const Restored& r) {
  std::string out;
  ByteWriter w(out);
  w.u8(static_cast<std::uint8_t>(r.outcome));
  w.bytes(r.why);
  w.u64(r.bytes_read);
  w.f64(r.read_seconds);
  w.f64(r.broadcast_seconds);
  w.f64(r.seconds);
  return out;
}

Restored decode_restored(std::string_view bytes) {
  ByteReader in(bytes);
  Restored r;
  const std::uint8_t outcome = in.u8();
  if (outcome > static_cast<std::uint8_t>(Restored::Outcome::unfit))
    throw DecodeError("restore answer of unknown outcome " + std::to_string(outcome));
  r.outcome = static_cast<Restored::Outcome>(outcome);
  r.why = std::string(in.bytes());
  r.bytes_read = in.u64();
  r.read_seconds = in.f64();
  r.broadcast_seconds = in.f64();
  r.seconds = in.f64();
  in.expect_end();
  return r;
}

std::string encode(const TrainerFigures& f) {
  std::string out;
  ByteWriter w(out);
  for (double v : {f.loss, f.policy_loss, f.kl, f.entropy, f.clip_fraction, f.clip_fraction_lower, f.grad_norm,
                   f.action_tokens, f.train_seconds, f.sync_seconds})
    w.f64(v);
  return out;
}

TrainerFigures decode_figures(std::string_view bytes) {
  if (bytes.size() != trainer_figures_bytes)
    throw DecodeError("trainer figures of " + std::to_string(bytes.size()) + " bytes, not " +
                      std::to_string(trainer_figures_bytes));
  ByteReader in(bytes);
  TrainerFigures f;
  for (double* v : {&f.loss, &f.policy_loss, &f.kl, &f.entropy, &f.clip_fraction, &f.clip_fraction_lower, &f.grad_norm,
                    &f.action_tokens, &f.train_seconds, &f.sync_seconds})
    *v = in.f64();
  return f;
}

std::string encode(const PolicyResource& policy) {
  return "version=" + std::to_string(policy.version) + " checksum=" + std::to_string(policy.checksum);
}

PolicyResource decode_policy_resource(std::string_view text) {
  return parse_text("policy resource", text, [](std::string_view rest) {
    PolicyResource policy;
    take_literal(rest, "version=");
    policy.version = take_number<std::uint64_t>(rest, "version");
    take_literal(rest, " checksum=");
    policy.checksum = take_number<std::uint32_t>(rest, "checksum");
    expect_end(rest);
    return policy;
  });
}

std::string encode(const LedgerEntry& entry) {
  std::string text = "step=" + std::to_string(entry.step) + " rollouts=";
  for (std::size_t i = 0; i < entry.rollouts.size(); ++i) text += (i ? "," : "") + std::to_string(entry.rollouts[i]);
  return text;
}

LedgerEntry decode_ledger_entry(std::string_view text) {
  return parse_text("ledger entry", text, [](std::string_view rest) {
    LedgerEntry entry;
    take_literal(rest, "step=");
    entry.step = take_number<std::int64_t>(rest, "step");
    take_literal(rest, " rollouts=");
    while (!rest.empty()) {
      if (!entry.rollouts.empty()) take_literal(rest, ",");
      entry.rollouts.push_back(take_number<std::uint64_t>(rest, "rollout id"));
    }
    return entry;
  });
}

}  // namespace arclight::comm::work
