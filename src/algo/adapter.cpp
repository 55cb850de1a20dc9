#include "arclight/algo/adapter.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "arclight/core/bytes.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/policy.hpp"

namespace arclight::algo {
namespace {

// A sampled token's log-prob: at most 0 (a rounding's worth above it), and above what a token drawn at any chance
// has (a top-p cut is recorded as -9999, which no drawn token has).
constexpr float max_logprob = 1e-3f, min_logprob = -1000.0f;

template <class T>
const T& attribute(const store::Span& span, const char* key) {
  const store::AttributeValue* v = span.find(key);
  if (!v || !std::holds_alternative<T>(*v))
    throw DecodeError(log::concat("span '", span.name, "' (", span.sequence_id, ") lacks attribute '", key, "'"));
  return std::get<T>(*v);
}

// A count a client wrote as a JSON number: a whole number in 0 .. limit (casting a NaN, a negative or a huge double
// is undefined behaviour: -1 became a version from the far future, never stale).
std::uint64_t whole_number(const store::Span& span, const char* key, double limit) {
  const double v = attribute<double>(span, key);
  if (!(v >= 0 && v <= limit) || v != std::floor(v))
    throw DecodeError(log::concat("span '", span.name, "' (", span.sequence_id, "): ", key, " ", v,
                                  " is not a whole number in 0 .. ", limit));
  return static_cast<std::uint64_t>(v);
}

std::optional<double> number(const store::Span& span, const char* key) {
  const store::AttributeValue* v = span.find(key);
  if (v && std::holds_alternative<double>(*v)) return std::get<double>(*v);
  return std::nullopt;
}

// The AgentOps form: a JSON object {"type": "reward", "value": x} (a map attribute arrives as its JSON text too).
// Whether it is one, and its value (none for a null value).
std::pair<bool, std::optional<double>> agentops_reward(const store::AttributeValue* output) {
  if (!output || !std::holds_alternative<std::string>(*output)) return {false, std::nullopt};
  const nlohmann::json payload = nlohmann::json::parse(std::get<std::string>(*output), nullptr, false);
  // Compared in place: a copy (value()) of a deeply nested "type" would recurse once per level.
  const auto type = payload.find("type");  // end() for anything but an object
  if (type == payload.end() || *type != "reward") return {false, std::nullopt};
  const auto value = payload.find("value");
  if (value == payload.end() || !value->is_number()) return {true, std::nullopt};
  return {true, value->get<double>()};
}

// An Agent Lightning reward, read as its get_reward_value reads one, on a span of any name: dimension 0 of
// agentlightning.reward.N.{name,value} (v0.3: emit_reward puts the primary dimension first, whatever its name; the
// other dimensions are not trained on); else agentops.task.output or agentops.entity.output holding
// {"type": "reward", "value": x} (older agents); else the attribute `reward` on an agentlightning.reward span (v0.2's
// explicit reward span, still read by v0.3's LlmProxyTraceToTriplet) or an agentlightning.annotation span.
// None for a span that carries no reward (a tag, a link, an LLM call).
std::optional<double> agl_reward(const store::Span& span) {
  if (const auto primary = number(span, "agentlightning.reward.0.value")) return primary;
  for (const char* key : {"agentops.task.output", "agentops.entity.output"}) {
    const auto [is_reward, value] = agentops_reward(span.find(key));
    if (is_reward) return value;
  }
  if (span.name == span_names::agl_reward || span.name == span_names::agl_annotation) return number(span, "reward");
  return std::nullopt;
}

// The temperature an llm span's log-probs were taken at: the loss divides logits by it.
float call_temperature(const store::Span& span, double unrecorded) {
  if (!span.find("temperature")) return static_cast<float>(unrecorded);
  const double t = attribute<double>(span, "temperature");
  if (!(t >= model::greedy_below && t <= 1e6))
    throw DecodeError(
        log::concat("llm span (", span.sequence_id, "): temperature ", t, " outside ", model::greedy_below, " .. 1e6"));
  return static_cast<float>(t);
}

bool reported_metrics(const std::vector<store::Span>& spans) {
  return std::any_of(spans.begin(), spans.end(), [](const store::Span& s) { return s.name == span_names::result; });
}

}  // namespace

void check_fits_model(const Trajectory& t, int vocab_size, int max_seq) {
  for (std::size_t i = 0; i < t.calls.size(); ++i) {
    const Trajectory::Call& c = t.calls[i];
    if (c.prompt.size() + c.response.size() > static_cast<std::size_t>(max_seq))
      throw DecodeError(log::concat("policy call ", i, ": ", c.prompt.size() + c.response.size(),
                                    " tokens exceed model.max_seq = ", max_seq));
    for (const auto* ids : {&c.prompt, &c.response})
      for (const std::int32_t id : *ids)
        if (id < 0 || id >= vocab_size)
          throw DecodeError(
              log::concat("policy call ", i, ": token id ", id, " outside the model's vocabulary of ", vocab_size));
  }
}

std::uint64_t Trajectory::oldest_version() const {
  std::uint64_t oldest = UINT64_MAX;
  for (const Call& c : calls) oldest = std::min(oldest, c.policy_version);
  return calls.empty() ? 0 : oldest;
}

Trajectory read_trajectory(const std::vector<store::Span>& spans, double unrecorded_temperature) {
  Trajectory t;
  std::vector<std::pair<int, double>> rewards;
  std::vector<bool> rewarded;  // per call: an Agent Lightning reward went to it
  for (const store::Span& span : spans) {
    if (span.name == span_names::llm) {
      Trajectory::Call call;
      call.prompt = attribute<store::TokenIds>(span, "prompt_ids");
      call.response = attribute<store::TokenIds>(span, "response_ids");
      call.logprobs = attribute<store::Floats>(span, "logprobs");
      call.temperature = call_temperature(span, unrecorded_temperature);
      call.policy_version = whole_number(span, "policy_version", 9007199254740992.0);  // 2^53: exact in a double
      if (call.logprobs.size() != call.response.size())
        throw DecodeError("llm span: logprobs and response differ in length");
      // The loss divides by their exponentials: one NaN or absurd value (an outside client's span) made every
      // trainer's gradient non-finite, and the whole step was skipped rather than this rollout.
      for (const float logprob : call.logprobs)
        if (!std::isfinite(logprob) || logprob > max_logprob || logprob < min_logprob)
          throw DecodeError(log::concat("llm span: a log-prob of ", logprob, ", not in ", min_logprob, " .. 0"));
      t.calls.push_back(std::move(call));
      rewarded.push_back(false);
    } else if (span.name == span_names::reward) {
      rewards.emplace_back(static_cast<int>(whole_number(span, "step", INT_MAX)), attribute<double>(span, "reward"));
    } else if (span.name == span_names::result) {
      for (const store::Attribute& a : span.attributes)
        if (std::holds_alternative<double>(a.value)) t.metrics[a.key] = std::get<double>(a.value);
    } else if (const std::optional<double> value = agl_reward(span)) {
      // As Agent Lightning matches a reward ("first occurrence" by sequence): to the latest call before it that has
      // none yet; with none left, to no call.
      for (int c = static_cast<int>(t.calls.size()) - 1; c >= 0; --c) {
        if (rewarded[c]) continue;
        rewarded[c] = true;
        rewards.emplace_back(c, *value);
        break;
      }
    }
  }
  if (!reported_metrics(spans)) {  // an outside agent that reports no figures is measured by its total reward
    double total = 0;
    for (const auto& reward : rewards) total += reward.second;
    t.metrics["reward"] = total;
  }
  t.rewards.assign(t.calls.size(), 0.0);
  for (auto [step, value] : rewards) {
    if (step < 0 || step >= static_cast<int>(t.calls.size()))
      throw DecodeError(log::concat("reward for step ", step, " of an episode with ", t.calls.size(), " policy calls"));
    t.rewards[step] += value;
  }
  return t;
}

namespace {

// A call's prompt and response as a sample's tokens, none of them an action yet.
Sample sample_of(const Trajectory::Call& call, std::uint64_t policy_version) {
  Sample s;
  s.tokens = call.prompt;
  s.tokens.insert(s.tokens.end(), call.response.begin(), call.response.end());
  s.action_mask.assign(s.tokens.size(), 0);
  s.behaviour_logprobs.assign(s.tokens.size(), 0.f);
  s.temperatures.assign(s.tokens.size(), 1.f);
  s.advantages.assign(s.tokens.size(), 0.f);
  s.policy_version = policy_version;
  return s;
}

// The call's response tokens, at `start` in s, become actions with its log-probs, temperature and advantage.
void add_actions(Sample& s, std::size_t start, const Trajectory::Call& call, double advantage) {
  for (std::size_t i = 0; i < call.response.size(); ++i) {
    s.action_mask[start + i] = 1;
    s.behaviour_logprobs[start + i] = call.logprobs[i];
    s.temperatures[start + i] = call.temperature;
    s.advantages[start + i] = static_cast<float>(advantage);
  }
}

}  // namespace

Sample trajectory_sample(const Trajectory& t, const std::vector<double>& call_advantages) {
  if (t.calls.empty()) return {};
  Sample s = sample_of(t.calls.back(), t.oldest_version());
  std::size_t answered_until = 0;  // where the call before's response ends
  for (std::size_t c = 0; c < t.calls.size(); ++c) {
    const Trajectory::Call& call = t.calls[c];
    const std::size_t start = call.prompt.size();
    if (start + call.response.size() > s.tokens.size() ||
        !std::equal(call.prompt.begin(), call.prompt.end(), s.tokens.begin()) ||
        !std::equal(call.response.begin(), call.response.end(), s.tokens.begin() + start))
      throw DecodeError(log::concat("policy call ", c, " is not a prefix of the episode's last prompt"));
    // The same prompt asked again (n > 1, a retry) with the same answer: one sequence would train those tokens once,
    // with the later call's log-probs and advantage.
    if (start < answered_until)
      throw DecodeError(log::concat("policy call ", c, " answers over the response of the call before it"));
    add_actions(s, start, call, call_advantages.at(c));
    answered_until = start + call.response.size();
  }
  return s;
}

std::vector<Sample> transition_samples(const Trajectory& t, const std::vector<double>& call_advantages) {
  std::vector<Sample> out;
  for (std::size_t c = 0; c < t.calls.size(); ++c) {
    const Trajectory::Call& call = t.calls[c];
    Sample s = sample_of(call, call.policy_version);
    add_actions(s, call.prompt.size(), call, call_advantages.at(c));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sample> episode_samples(const Trajectory& t, const std::vector<double>& call_advantages, bool one_sequence,
                                    std::string* not_one_sequence) {
  std::vector<Sample> samples;
  if (one_sequence) {
    try {
      samples.push_back(trajectory_sample(t, call_advantages));
    } catch (const DecodeError& e) {
      if (not_one_sequence) *not_one_sequence = e.what();
    }
  }
  if (samples.empty()) samples = transition_samples(t, call_advantages);
  // An action token is predicted by the one before it: position 0 never is.
  const auto nothing_to_train = [](const Sample& s) {
    return s.action_mask.size() < 2 || std::count(s.action_mask.begin() + 1, s.action_mask.end(), 1) == 0;
  };
  samples.erase(std::remove_if(samples.begin(), samples.end(), nothing_to_train), samples.end());
  return samples;
}

double action_tokens(const std::vector<Sample>& samples) {
  double n = 0;
  for (const Sample& s : samples)
    for (std::size_t i = 1; i < s.action_mask.size(); ++i) n += s.action_mask[i];
  return n;
}

std::vector<std::vector<std::size_t>> token_balanced_shards(const std::vector<Sample>& samples, std::size_t trainers) {
  if (trainers == 0) throw std::invalid_argument("token_balanced_shards: no trainers");
  std::vector<std::size_t> longest_first(samples.size());
  std::iota(longest_first.begin(), longest_first.end(), std::size_t{0});
  std::stable_sort(longest_first.begin(), longest_first.end(),
                   [&](std::size_t a, std::size_t b) { return samples[a].tokens.size() > samples[b].tokens.size(); });
  std::vector<std::vector<std::size_t>> shards(trainers);
  std::vector<std::size_t> tokens(trainers, 0);
  for (std::size_t i : longest_first) {
    const auto k = static_cast<std::size_t>(std::min_element(tokens.begin(), tokens.end()) - tokens.begin());
    shards[k].push_back(i);
    tokens[k] += samples[i].tokens.size();
  }
  for (auto& shard : shards) std::sort(shard.begin(), shard.end());
  return shards;
}

std::string encode_samples(const std::vector<Sample>& samples) {
  std::string out;
  ByteWriter w(out);
  w.u32(static_cast<std::uint32_t>(samples.size()));
  for (const Sample& s : samples) {
    if (!s.sizes_agree()) throw Error("encode_samples: a sample's per-token vectors differ in length");
    w.u64(s.policy_version);
    w.u32(static_cast<std::uint32_t>(s.tokens.size()));
    w.raw(s.tokens.data(), s.tokens.size() * sizeof(std::int32_t));
    w.raw(s.action_mask.data(), s.action_mask.size());
    w.raw(s.behaviour_logprobs.data(), s.behaviour_logprobs.size() * sizeof(float));
    w.raw(s.temperatures.data(), s.temperatures.size() * sizeof(float));
    w.raw(s.advantages.data(), s.advantages.size() * sizeof(float));
  }
  return out;
}

std::vector<Sample> decode_samples(std::string_view bytes) {
  ByteReader r(bytes);
  std::vector<Sample> out(r.count(12));
  for (Sample& s : out) {
    s.policy_version = r.u64();
    const std::uint32_t n = r.count(17);  // bytes per token
    auto copy = [&](auto& vec) {
      using T = typename std::decay_t<decltype(vec)>::value_type;
      vec.resize(n);
      std::string_view raw = r.raw(n * sizeof(T));
      if (n) std::memcpy(vec.data(), raw.data(), raw.size());
    };
    copy(s.tokens);
    copy(s.action_mask);
    copy(s.behaviour_logprobs);
    copy(s.temperatures);
    copy(s.advantages);
  }
  r.expect_end();
  return out;
}

}  // namespace arclight::algo
