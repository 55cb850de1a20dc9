#include "arclight/model/hf_model.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "arclight/core/log.hpp"
#include "hf_files.hpp"

namespace arclight::model {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

using namespace hf_files;

// transformers' defaults for a key config.json leaves out, per architecture, from the config classes
// (src/transformers/models/<model>/configuration_<model>.py; transformers 4.5x __init__ arguments, unchanged in the
// 5.x dataclass fields except rope_theta, which moved into rope_parameters with the same 10000 default):
//   LlamaConfig:   vocab 32000, hidden 4096, intermediate 11008, layers 32, heads 32, kv heads None -> heads,
//                  head_dim None -> hidden / heads, max positions 2048, rms eps 1e-6, rope_theta 10000,
//                  attention_bias False (q, k, v and o), bos 1, eos 2, tie False.
//   Qwen2Config:   vocab 151936, hidden 4096, intermediate 22016, layers 32, heads 32, kv heads 32 (not heads!),
//                  head_dim hidden / heads (the modeling's getattr), max positions 32768, rms eps 1e-6,
//                  rope_theta 10000, use_sliding_window False, sliding_window 4096, bos/eos None, tie False;
//                  q, k, v always with a bias, o without (modeling_qwen2.py).
//   Qwen3Config:   as Qwen2 but head_dim 128, attention_bias False (q, k, v and o), q_norm/k_norm per head.
//   MistralConfig: vocab 32000, hidden 4096, intermediate 14336, layers 32, heads 32, kv heads 8,
//                  head_dim None -> hidden / heads, max positions 4096 * 32, rms eps 1e-6, rope_theta 10000,
//                  sliding_window 4096, bos 1, eos 2, tie False; no bias anywhere.
//   Gemma3TextConfig: vocab 262208, hidden 2304, intermediate 9216, layers 26, heads 8, kv heads 4, head_dim 256,
//                  hidden_activation gelu_pytorch_tanh, max positions 131072, rms eps 1e-6, bos 2, eos 1, tie True,
//                  rope_theta 1e6, rope_local_base_freq 1e4, attention_bias False (q, k, v and o),
//                  query_pre_attn_scalar 256, sliding_window 4096, layer_types None -> every sliding_window_pattern-th
//                  (6) layer full, the others sliding; q/k norms; soft caps None.
//   Gemma2Config:  vocab 256000, hidden 2304, intermediate 9216, layers 26, heads 8, kv heads 4, head_dim 256,
//                  hidden_activation gelu_pytorch_tanh, max positions 8192, rms eps 1e-6, bos 2, eos 1, tie True,
//                  rope_theta 1e4, attention_bias False (q, k, v and o), query_pre_attn_scalar 256, sliding_window
//                  4096, layer_types None -> every other layer sliding from the first, final_logit_softcapping 30,
//                  attn_logit_softcapping 50; no q/k norms.
//   GemmaConfig:   vocab 256000, hidden 3072, intermediate 24576, layers 28, heads 16, kv heads 16, head_dim 256,
//                  hidden_act gelu_pytorch_tanh (before 4.48: hidden_activation, below), max positions 8192, rms eps
//                  1e-6, bos 2, eos 1, tie True, rope_theta 1e4, attention_bias False (q, k, v and o); no window, no
//                  caps, no q/k norms, no norms after attention and the MLP; scores scaled by head_dim^-1/2.
struct Defaults {
  std::string_view architecture;
  int vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads;
  int num_key_value_heads;  // 0: num_attention_heads
  int head_dim;             // 0: hidden_size / num_attention_heads
  int max_position_embeddings;
  std::optional<int> bos, eos;
  bool tie_word_embeddings;
  double rope_theta;
};
constexpr Defaults llama{"LlamaForCausalLM", 32000, 4096, 11008, 32, 32, 0, 0, 2048, 1, 2, false, 1e4};
constexpr Defaults qwen2{"Qwen2ForCausalLM", 151936,       4096,  22016, 32, 32, 32, 0, 32768,
                         std::nullopt,       std::nullopt, false, 1e4};
constexpr Defaults qwen3{"Qwen3ForCausalLM", 151936,       4096,  22016, 32, 32, 32, 128, 32768,
                         std::nullopt,       std::nullopt, false, 1e4};
constexpr Defaults mistral{"MistralForCausalLM", 32000, 4096, 14336, 32, 32, 8, 0, 4096 * 32, 1, 2, false, 1e4};
constexpr Defaults gemma3{"Gemma3ForCausalLM", 262208, 2304, 9216, 26, 8, 4, 256, 131072, 2, 1, true, 1e6};
constexpr Defaults gemma2{"Gemma2ForCausalLM", 256000, 2304, 9216, 26, 8, 4, 256, 8192, 2, 1, true, 1e4};
constexpr Defaults gemma1{"GemmaForCausalLM", 256000, 3072, 24576, 28, 16, 16, 256, 8192, 2, 1, true, 1e4};
constexpr double default_rms_norm_eps = 1e-6;
constexpr double gemma3_local_rope_theta = 1e4, gemma_query_pre_attn_scalar = 256;
constexpr int gemma3_sliding_window_pattern = 6, gemma2_sliding_window_pattern = 2;
constexpr double gemma2_attn_logit_softcapping = 50, gemma2_final_logit_softcapping = 30;
constexpr std::string_view gemma3_multimodal = "Gemma3ForConditionalGeneration";
constexpr int default_sliding_window = 4096;
constexpr int default_max_window_layers = 28;  // Qwen2Config's and Qwen3Config's

std::string supported_list() {
  std::string out;
  for (std::string_view a : supported_architectures) out += (out.empty() ? "" : ", ") + std::string(a);
  return out;
}

// config.json's keys, read with their JSON types checked; every error names the file and the key.
class ConfigReader {
 public:
  ConfigReader(const json& object, const std::string& file, std::string prefix = "")
      : object_(object), file_(file), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    throw ModelFileError(log::concat(file_, ": key \"", prefix_, key, "\": ", what));
  }
  // The value, or nullptr when the key is absent or null (transformers' None: the default applies).
  const json* find(std::string_view key) const {
    const auto it = object_.find(std::string(key));
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(std::string_view key) const { return object_.contains(std::string(key)); }

  int as_int(std::string_view key, const json& v) const {
    if (!v.is_number_integer()) fail(key, log::concat("expected an integer, found ", v.type_name(), " ", excerpt(v)));
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<int>::max())
                               : v.get<std::int64_t>() < std::numeric_limits<int>::min() ||
                                     v.get<std::int64_t>() > std::numeric_limits<int>::max())
      fail(key, log::concat("integer ", excerpt(v), " out of range"));
    return static_cast<int>(v.get<std::int64_t>());
  }
  std::optional<int> optional_int(std::string_view key) const {
    const json* v = find(key);
    return v ? std::optional<int>(as_int(key, *v)) : std::nullopt;
  }
  int positive(std::string_view key, int fallback) const {
    const int value = optional_int(key).value_or(fallback);
    if (value <= 0) fail(key, log::concat("must be positive, is ", value));
    return value;
  }
  int required_positive(std::string_view key) const {
    if (!find(key)) fail(key, "missing");
    return positive(key, 0);
  }
  double number(std::string_view key, double fallback, bool positive_only = true) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) fail(key, log::concat("expected a number, found ", v->type_name(), " ", excerpt(*v)));
    const double value = v->get<double>();
    if (!std::isfinite(value)) fail(key, log::concat("must be finite, is ", excerpt(*v)));
    if (positive_only && !(value > 0)) fail(key, log::concat("must be positive, is ", excerpt(*v)));
    return value;
  }
  double required_number(std::string_view key) const {
    if (!find(key)) fail(key, "missing");
    return number(key, 0);
  }
  bool boolean(std::string_view key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(key, log::concat("expected true or false, found ", v->type_name(), " ", excerpt(*v)));
    return v->get<bool>();
  }
  std::optional<std::string> string(std::string_view key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(key, log::concat("expected a string, found ", v->type_name(), " ", excerpt(*v)));
    return v->get<std::string>();
  }

 private:
  const json& object_;
  const std::string& file_;
  std::string prefix_;
};

// YaRN's fields as transformers 5's _compute_yarn_parameters and vLLM's YaRN rotary embedding read them: the factor
// given (some transformers 4 releases replaced it by max_position_embeddings / original_max_position_embeddings, which
// for Qwen3's documented 4x over 32,768 of 40,960 positions is 1.25), the original context (max_position_embeddings
// where absent),
// beta_fast and beta_slow (32 and 1), and cos and sin scaled by attention_factor, or else by the paper's
// 0.1 ln(factor) + 1 (DeepSeek's mscale and mscale_all_dim: the ratio of two such).
void read_yarn(const ConfigReader& rope, int max_position_embeddings, HfConfig::RopeScaling& scaling) {
  const auto mscale_of = [&](double m) { return scaling.factor <= 1 ? 1.0 : 0.1 * m * std::log(scaling.factor) + 1.0; };
  scaling.original_max_position_embeddings = rope.positive("original_max_position_embeddings", max_position_embeddings);
  scaling.beta_fast = rope.number("beta_fast", 32);
  scaling.beta_slow = rope.number("beta_slow", 1);
  // null is Python's None, which transformers' `.get("truncate", True)` returns and reads as false
  scaling.truncate = rope.has("truncate") && !rope.find("truncate") ? false : rope.boolean("truncate", true);
  const double mscale = rope.number("mscale", 0, false), mscale_all_dim = rope.number("mscale_all_dim", 0, false);
  for (const auto& [key, value] : {std::pair{"mscale", mscale}, {"mscale_all_dim", mscale_all_dim}})
    if (value < 0) rope.fail(key, log::concat("must be 0 or more, is ", value));  // a scale of cos and sin past 0
  if (rope.find("attention_factor"))
    scaling.attention_factor = rope.number("attention_factor", 1);
  else if (mscale != 0 && mscale_all_dim != 0)
    scaling.attention_factor = mscale_of(mscale) / mscale_of(mscale_all_dim);
  else
    scaling.attention_factor = mscale_of(1);
  // YaRN's are near 1; far from it, float32's cos and sin tables overflow or vanish (every q and k zero)
  if (!(scaling.attention_factor >= 1e-2 && scaling.attention_factor <= 1e2))
    rope.fail(rope.find("attention_factor") ? "attention_factor" : "mscale",
              log::concat("scales cos and sin by ", scaling.attention_factor, ", outside 0.01 to 100"));
}

// YaRN's ramp, once the RoPE base is settled: a base of 1 or less, or so few rotations that the original context over
// them overflows, leaves its bounds undefined (transformers fails there on a division by zero or an overflow).
void check_yarn(const ConfigReader& config, const HfConfig& c) {
  if (!c.rope_scaling || c.rope_scaling->type != "yarn") return;
  const std::string_view key = config.find("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (!(c.rope_theta > 1)) config.fail(key, log::concat("YaRN needs a RoPE base above 1, not ", c.rope_theta));
  const HfConfig::RopeScaling& s = *c.rope_scaling;
  for (const double rotations : {s.beta_fast, s.beta_slow})
    if (!std::isfinite(std::log(s.original_max_position_embeddings / (rotations * 2 * M_PI))))
      config.fail(key, log::concat("YaRN's beta_fast ", s.beta_fast, " and beta_slow ", s.beta_slow,
                                   " leave its ramp undefined"));
}

// rope_scaling (or transformers 5's rope_parameters): none, "default", Llama 3.1's "llama3" with its four fields,
// "linear" or "yarn".
std::optional<HfConfig::RopeScaling> read_rope_scaling(const ConfigReader& config, std::string_view key,
                                                       const std::string& file, int max_position_embeddings) {
  const json* v = config.find(key);
  if (!v) return std::nullopt;
  if (!v->is_object()) config.fail(key, log::concat("expected an object or null, found ", v->type_name()));
  const ConfigReader rope(*v, file, std::string(key) + ".");
  // A legacy "type" is "rope_type" (configuration_llama.py, "BC: if there is a 'type' field"). Both, and different:
  // Llama's and Qwen's configurations take "type", Mistral's rotary code "rope_type"; refused rather than guessed.
  std::string_view type_key = "type";
  std::optional<std::string> type = rope.string("type");
  if (auto rope_type = rope.string("rope_type")) {
    if (type && *type != *rope_type)
      config.fail(key, log::concat("has \"type\" \"", *type, "\" and \"rope_type\" \"", *rope_type,
                                   "\", which transformers reads differently by architecture: make them agree"));
    type = rope_type;
    type_key = "rope_type";
  }
  if (!type) config.fail(key, "has neither \"rope_type\" nor \"type\"");
  if (*type == "default") return std::nullopt;
  if (*type != "llama3" && *type != "linear" && *type != "yarn")
    rope.fail(type_key, log::concat("RoPE scaling \"", *type,
                                    "\" is not supported (supported: \"llama3\", \"linear\", \"yarn\")"));
  HfConfig::RopeScaling scaling;
  scaling.type = *type;
  scaling.factor = rope.required_number("factor");
  if (scaling.factor < 1) rope.fail("factor", log::concat("must be at least 1, is ", scaling.factor));
  if (*type == "linear") return scaling;  // positions / factor: the frequencies divided by it
  if (*type == "yarn") {
    read_yarn(rope, max_position_embeddings, scaling);
    return scaling;
  }
  scaling.low_freq_factor = rope.required_number("low_freq_factor");
  scaling.high_freq_factor = rope.required_number("high_freq_factor");
  scaling.original_max_position_embeddings = rope.required_positive("original_max_position_embeddings");
  if (scaling.high_freq_factor <= scaling.low_freq_factor)
    rope.fail("high_freq_factor", log::concat("must exceed low_freq_factor (", scaling.low_freq_factor, "), is ",
                                              scaling.high_freq_factor));
  return scaling;
}

// The architecture (architectures[0]) and its defaults: one of the supported ones.
const Defaults& architecture_of(const ConfigReader& config) {
  const json* architectures = config.find("architectures");
  if (!architectures) config.fail("architectures", "missing (supported: " + supported_list() + ")");
  if (!architectures->is_array() || architectures->empty() || !(*architectures)[0].is_string())
    config.fail("architectures", "expected a list whose first element is a string, found " + excerpt(*architectures));
  const std::string architecture = (*architectures)[0].get<std::string>();
  if (architecture == gemma3_multimodal) return gemma3;  // its text_config is a Gemma3ForCausalLM's
  const Defaults* defaults = nullptr;
  for (const Defaults* d : {&llama, &qwen2, &qwen3, &mistral, &gemma1, &gemma2, &gemma3})
    if (d->architecture == architecture) defaults = d;
  if (!defaults)
    config.fail("architectures", log::concat("architecture \"", architecture,
                                             "\" is not supported (supported: ", supported_list(), ")"));

  return *defaults;
}

// The MLP's activation. Gemma 2's and 3's configs name it hidden_activation, the others' hidden_act. Gemma 1's key
// moved: transformers before 4.48 read hidden_activation (absent: gelu_pytorch_tanh, whatever hidden_act said), 4.48 on
// hidden_act (absent: gelu_pytorch_tanh). Google's first Gemma configs say hidden_act "gelu" and no hidden_activation:
// read as the tanh approximation Gemma was trained with, as transformers before 4.48 and vLLM read it (later
// transformers computes the exact GELU for them). Each of Gemma 1's keys that is set must name Gemma's.
void read_activation(const ConfigReader& config, const Defaults* defaults, HfConfig& c) {
  const bool gemma = defaults == &gemma1 || defaults == &gemma2 || defaults == &gemma3;
  const auto refuse = [&](const char* key, const std::string& name) {
    config.fail(key, "\"" + name + "\" is not supported (the MLP computes " +
                         (gemma ? "gelu_pytorch_tanh, as Gemma does)" : "silu, as Llama, Qwen and Mistral do)"));
  };
  if (defaults == &gemma1) {
    for (const char* key : {"hidden_activation", "hidden_act"}) {
      const std::string name = config.string(key).value_or("gelu_pytorch_tanh");
      if (name != "gelu_pytorch_tanh" && !(name == "gelu" && std::string_view(key) == "hidden_act")) refuse(key, name);
    }
    c.hidden_activation = "gelu_pytorch_tanh";
    return;
  }
  const char* key = gemma ? "hidden_activation" : "hidden_act";
  c.hidden_activation = config.string(key).value_or(gemma ? "gelu_pytorch_tanh" : "silu");
  if (c.hidden_activation != (gemma ? "gelu_pytorch_tanh" : "silu")) refuse(key, c.hidden_activation);
}

// The sizes: vocabulary, widths, layers, heads (grouped-query), head_dim, positions, norms.
void read_sizes(const ConfigReader& config, const Defaults* defaults, HfConfig& c) {
  c.vocab_size = config.positive("vocab_size", defaults->vocab_size);
  c.hidden_size = config.positive("hidden_size", defaults->hidden_size);
  c.intermediate_size = config.positive("intermediate_size", defaults->intermediate_size);
  c.num_hidden_layers = config.positive("num_hidden_layers", defaults->num_hidden_layers);
  c.num_attention_heads = config.positive("num_attention_heads", defaults->num_attention_heads);
  // Absent: the architecture's default; null: as many as attention heads (transformers' configs map None so).
  c.num_key_value_heads =
      config.positive("num_key_value_heads", defaults->num_key_value_heads && !config.has("num_key_value_heads")
                                                 ? defaults->num_key_value_heads
                                                 : c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    config.fail("num_key_value_heads", log::concat(c.num_key_value_heads, " does not divide num_attention_heads (",
                                                   c.num_attention_heads, ")"));
  const std::optional<int> head_dim = config.optional_int("head_dim");
  if (head_dim || defaults->head_dim) {
    c.head_dim = config.positive("head_dim", defaults->head_dim);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      config.fail("hidden_size", log::concat(c.hidden_size, " is not a multiple of num_attention_heads (",
                                             c.num_attention_heads, ") and head_dim is not given"));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) config.fail("head_dim", log::concat("must be even for RoPE, is ", c.head_dim));
  c.max_position_embeddings = config.positive("max_position_embeddings", defaults->max_position_embeddings);
  c.rms_norm_eps = config.number("rms_norm_eps", default_rms_norm_eps);
  c.rope_theta = config.number("rope_theta", defaults->rope_theta);
  c.tie_word_embeddings = config.boolean("tie_word_embeddings", defaults->tie_word_embeddings);
  read_activation(config, defaults, c);
}

// layer_types: for each layer, whether it attends through the sliding window; none where the config has none.
std::optional<std::vector<bool>> read_layer_types(const ConfigReader& config, int layers) {
  const char* key = "layer_types";
  const json* types = config.find(key);
  if (!types) return std::nullopt;
  if (!types->is_array() || types->size() != static_cast<std::size_t>(layers))
    config.fail(
        key, log::concat("expected a list of ", layers, " layer types (num_hidden_layers), found ", excerpt(*types)));
  std::vector<bool> sliding;
  for (std::size_t i = 0; i < types->size(); ++i) {
    const json& type = (*types)[i];
    if (type != "full_attention" && type != "sliding_attention")
      config.fail(key, log::concat("layer ", i, ": expected \"full_attention\" or \"sliding_attention\", found ",
                                   excerpt(type)));
    sliding.push_back(type == "sliding_attention");
  }
  return sliding;
}

// Whether Qwen's layers attend through the sliding window: as transformers builds layer_types when the config has
// none, the layers from max_window_layers (28 by default) on slide and the ones before attend in full. Qwen's mix of
// the two kinds (Gemma's is read) is refused: no released Qwen model has one.
bool qwen_layers_slide(const ConfigReader& config, int layers) {
  std::int64_t sliding = 0;
  const char* key = "layer_types";
  if (const auto types = read_layer_types(config, layers)) {
    sliding = std::count(types->begin(), types->end(), true);
  } else {
    key = "max_window_layers";
    const int full_layers = config.optional_int(key).value_or(default_max_window_layers);
    if (full_layers < 0) config.fail(key, log::concat("must not be negative, is ", full_layers));
    sliding = std::max(0, layers - full_layers);
  }
  if (sliding != 0 && sliding != layers)
    config.fail(key, log::concat(sliding, " of ", layers,
                                 " layers attend through the sliding window and the others in full: for Qwen, "
                                 "arclight has one window for every layer"));
  return sliding != 0;
}

// RoPE's base and scaling as Llama's, Qwen's, Mistral's and Gemma 1's and 2's configs give them: rope_scaling, or
// transformers 5's rope_parameters; every dimension turned.
void read_rope(const ConfigReader& config, const std::string& file, HfConfig& c) {
  // transformers 5 writes rope_parameters, and reads rope_scaling first unless it is absent or null
  if (config.find("rope_parameters") && !config.find("rope_scaling")) {
    c.rope_scaling = read_rope_scaling(config, "rope_parameters", file, c.max_position_embeddings);
    if (const json* p = config.find("rope_parameters"))
      c.rope_theta = ConfigReader(*p, file, "rope_parameters.").number("rope_theta", c.rope_theta);
  } else {
    c.rope_scaling = read_rope_scaling(config, "rope_scaling", file, c.max_position_embeddings);
  }
  // transformers rotates only that share of each head's dimensions (in rope_parameters since transformers 5)
  if (const double rotary = config.number("partial_rotary_factor", 1.0); rotary != 1.0)
    config.fail("partial_rotary_factor", log::concat(rotary, " is not supported (RoPE turns every dimension)"));
  if (const json* p = config.find("rope_parameters"); p && p->is_object())
    if (const double rotary = ConfigReader(*p, file, "rope_parameters.").number("partial_rotary_factor", 1.0);
        rotary != 1.0)
      config.fail("rope_parameters",
                  log::concat("partial_rotary_factor ", rotary, " is not supported (RoPE turns every dimension)"));
  // Llama 3.1's: transformers warns and loads (a context cut back to the original one is a common edit to save
  // memory); the frequencies depend on the original length alone. (YaRN's original length is often the whole one.)
  static std::atomic<bool> warned{false};  // once a process: every load of the config would say it again
  if (c.rope_scaling && c.rope_scaling->type == "llama3" &&
      c.rope_scaling->original_max_position_embeddings >= c.max_position_embeddings && !warned.exchange(true))
    log::warn(file, ": rope_scaling's original_max_position_embeddings (",
              c.rope_scaling->original_max_position_embeddings, ") is not less than max_position_embeddings (",
              c.max_position_embeddings, "), as transformers warns too");
}

// What every Gemma has: as Llama's, attention_bias on q, k, v and o; norms as offsets from 1; scaled embeddings;
// causal attention.
void read_gemma_basics(const ConfigReader& config, HfConfig& c) {
  c.attention_bias = c.o_proj_bias = config.boolean("attention_bias", false);
  c.gemma_norms = true;
  if (config.boolean("use_bidirectional_attention", false))
    config.fail("use_bidirectional_attention", "true is not supported (the decoder attends causally)");
}

// Gemma 1: Gemma's basics and one RoPE as Llama's (rope_scaling or rope_parameters); no window, no caps, a norm
// before attention and one before the MLP.
void read_gemma1_attention(const ConfigReader& config, const std::string& file, HfConfig& c) {
  read_gemma_basics(config, c);
  read_rope(config, file, c);
}

// What Gemma 2 and 3 share: Gemma's basics; norms after attention and the MLP too; the scores scaled by
// query_pre_attn_scalar; a sliding window on the layers layer_types names, else on all but every `pattern`-th
// (`pattern_key`'s value where the family reads one).
void read_gemma_attention(const ConfigReader& config, const char* pattern_key, int pattern, HfConfig& c) {
  read_gemma_basics(config, c);
  c.sandwich_norms = true;
  c.query_pre_attn_scalar = config.number("query_pre_attn_scalar", gemma_query_pre_attn_scalar);
  if (config.has("sliding_window") && !config.find("sliding_window"))  // transformers needs one for its masks
    config.fail("sliding_window", "null: Gemma's sliding layers need a window");
  c.sliding_window = config.positive("sliding_window", default_sliding_window);
  if (auto types = read_layer_types(config, c.num_hidden_layers)) {
    c.sliding_layers = std::move(*types);
    return;
  }
  if (pattern_key) pattern = config.positive(pattern_key, pattern);
  for (int i = 0; i < c.num_hidden_layers; ++i) c.sliding_layers.push_back((i + 1) % pattern != 0);
}

// A soft cap: the default where the key is absent, none where it is null, else a positive number.
std::optional<double> read_softcap(const ConfigReader& config, const char* key, std::optional<double> fallback) {
  if (!config.has(key)) return fallback;
  if (!config.find(key)) return std::nullopt;
  return config.number(key, 0);
}

// Gemma 2: Gemma's attention (the window on every other layer from the first), no q/k norms, one RoPE for every
// layer (as Llama's: rope_scaling or rope_parameters), the scores and the logits soft-capped unless a cap is null.
void read_gemma2_attention(const ConfigReader& config, const std::string& file, HfConfig& c) {
  read_gemma_attention(config, nullptr, gemma2_sliding_window_pattern, c);
  read_rope(config, file, c);
  c.attn_logit_softcapping = read_softcap(config, "attn_logit_softcapping", gemma2_attn_logit_softcapping);
  c.final_logit_softcapping = read_softcap(config, "final_logit_softcapping", gemma2_final_logit_softcapping);
}

// Gemma 3: Gemma's attention (the window on all but every sliding_window_pattern-th layer), q/k norms, the sliding
// layers' own RoPE base, unscaled; soft caps only where given (Gemma 3's are null, and transformers applies them where
// a config sets them).
void read_gemma3_attention(const ConfigReader& config, const std::string& file, HfConfig& c) {
  read_gemma_attention(config, "sliding_window_pattern", gemma3_sliding_window_pattern, c);
  c.qk_norm = true;
  c.attn_logit_softcapping = read_softcap(config, "attn_logit_softcapping", std::nullopt);
  c.final_logit_softcapping = read_softcap(config, "final_logit_softcapping", std::nullopt);
  c.local_rope_theta = config.number("rope_local_base_freq", gemma3_local_rope_theta);
  if (const double rotary = config.number("partial_rotary_factor", 1.0); rotary != 1.0)
    config.fail("partial_rotary_factor", log::concat(rotary, " is not supported (RoPE turns every dimension)"));
  const json* by_type = config.find("rope_parameters");
  if (!by_type) {
    c.rope_scaling = read_rope_scaling(config, "rope_scaling", file, c.max_position_embeddings);
    return;
  }
  // transformers 5: {"full_attention": {...}, "sliding_attention": {...}}, each with its rope_theta (a layer type left
  // out: unscaled, the theta above); transformers merges a rope_scaling beside it into full_attention's: refused.
  if (config.find("rope_scaling"))
    config.fail("rope_scaling",
                "beside rope_parameters: give the full layers' scaling in rope_parameters.full_attention");
  if (!by_type->is_object())
    config.fail("rope_parameters", "expected {\"full_attention\": {...}, \"sliding_attention\": {...}}");
  const ConfigReader parameters(*by_type, file, "rope_parameters.");
  for (const auto& [type, theta] :
       {std::pair{"full_attention", &c.rope_theta}, {"sliding_attention", &*c.local_rope_theta}}) {
    const json* p = parameters.find(type);
    if (!p) continue;
    const std::optional<HfConfig::RopeScaling> scaling =
        read_rope_scaling(parameters, type, file, c.max_position_embeddings);
    if (scaling && std::string_view(type) == "sliding_attention")
      parameters.fail(type, "RoPE scaling of the sliding layers is not supported (Gemma 3 has none)");
    if (std::string_view(type) == "full_attention") c.rope_scaling = scaling;
    const ConfigReader rope(*p, file, "rope_parameters." + std::string(type) + ".");
    *theta = rope.number("rope_theta", *theta);
    if (const double rotary = rope.number("partial_rotary_factor", 1.0); rotary != 1.0)
      rope.fail("partial_rotary_factor", log::concat(rotary, " is not supported (RoPE turns every dimension)"));
  }
}

// Biases, q/k norms, RoPE and its scaling, the sliding window.
void read_attention(const ConfigReader& config, const Defaults* defaults, const std::string& file, HfConfig& c) {
  if (defaults == &gemma3) return read_gemma3_attention(config, file, c);
  if (defaults == &gemma2) return read_gemma2_attention(config, file, c);
  if (defaults == &gemma1) return read_gemma1_attention(config, file, c);
  const bool is_qwen2 = defaults == &qwen2, is_mistral = defaults == &mistral;
  // Qwen2's q/k/v always have a bias and its o_proj never; Mistral has none; Llama and Qwen3 as attention_bias says.
  const bool attention_bias = is_qwen2 || is_mistral ? false : config.boolean("attention_bias", false);
  c.attention_bias = is_qwen2 || attention_bias;
  c.o_proj_bias = attention_bias;
  c.qk_norm = defaults == &qwen3;
  if (defaults == &llama && config.boolean("mlp_bias", false))
    config.fail("mlp_bias", "true is not supported (MLP projections with a bias)");

  read_rope(config, file, c);

  if (is_mistral) {
    // Mistral's window applies whenever set (null in v0.2 and later); Qwen's only under use_sliding_window.
    if (!config.has("sliding_window"))
      c.sliding_window = default_sliding_window;
    else if (config.find("sliding_window"))
      c.sliding_window = config.positive("sliding_window", 0);
  } else if (defaults != &llama && config.boolean("use_sliding_window", false)) {
    const std::optional<int> window =
        config.has("sliding_window") ? config.optional_int("sliding_window") : default_sliding_window;
    if (window && *window <= 0) config.fail("sliding_window", log::concat("must be positive, is ", *window));
    if (window && qwen_layers_slide(config, c.num_hidden_layers)) c.sliding_window = window;
  }
}

// The special tokens: bos and eos (one id or a list), inside the vocabulary.
void read_special_tokens(const ConfigReader& config, const Defaults* defaults, HfConfig& c) {
  if (config.has("bos_token_id"))
    c.bos_token_id = config.optional_int("bos_token_id");
  else
    c.bos_token_id = defaults->bos;
  if (!config.has("eos_token_id")) {
    if (defaults->eos) c.eos_token_ids = {*defaults->eos};
  } else if (const json* eos = config.find("eos_token_id")) {
    if (eos->is_array()) {
      for (const json& id : *eos) c.eos_token_ids.push_back(config.as_int("eos_token_id", id));
    } else {
      c.eos_token_ids = {config.as_int("eos_token_id", *eos)};
    }
  }
  for (int id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size)
      config.fail("eos_token_id", log::concat("token ", id, " outside the vocabulary [0, ", c.vocab_size, ")"));
  if (c.bos_token_id && (*c.bos_token_id < 0 || *c.bos_token_id >= c.vocab_size))
    config.fail("bos_token_id",
                log::concat("token ", *c.bos_token_id, " outside the vocabulary [0, ", c.vocab_size, ")"));
}

}  // namespace

HfConfig parse_hf_config(std::string_view json_text, const std::string& name_for_errors) {
  const std::string& file = name_for_errors;
  const json root = parse_json(json_text, file);
  if (!root.is_object()) fail_file(file, log::concat("expected a JSON object, found ", root.type_name()));
  const ConfigReader config(root, file);
  const Defaults* defaults = &architecture_of(config);
  HfConfig c;
  c.text_of_multimodal = (*config.find("architectures"))[0].get<std::string>() == gemma3_multimodal;
  c.architecture = c.text_of_multimodal ? std::string(gemma3_multimodal) : std::string(defaults->architecture);
  // A multimodal Gemma 3's text model: its sizes and attention in text_config, the end tokens and dtype beside it
  const json* text = c.text_of_multimodal ? config.find("text_config") : &root;
  if (!text || !text->is_object())
    config.fail("text_config", "expected the text model's configuration, an object, found " +
                                   (text ? excerpt(*text) : std::string("none")));
  const ConfigReader model(*text, file, c.text_of_multimodal ? "text_config." : "");
  read_sizes(model, defaults, c);
  read_attention(model, defaults, file, c);
  check_yarn(model, c);
  // The end tokens beside text_config (Google's files), else in it
  const bool tokens_beside = config.has("eos_token_id") || config.has("bos_token_id");
  read_special_tokens(!c.text_of_multimodal || tokens_beside ? config : model, defaults, c);
  // transformers 5 writes dtype, and reads it before the older torch_dtype
  for (const ConfigReader* reader : {&config, &model}) {
    const std::optional<std::string> dtype = reader->string("dtype");
    c.torch_dtype = dtype ? *dtype : reader->string("torch_dtype").value_or("");
    if (!c.torch_dtype.empty()) break;
  }
  return c;
}

HfConfig read_hf_config(const std::string& model_dir) {
  const std::string path = (fs::path(model_dir) / "config.json").string();
  return parse_hf_config(read_text(path), path);
}

std::vector<ExpectedTensor> expected_tensors(const HfConfig& c) {
  const std::int64_t v = c.vocab_size, h = c.hidden_size, i = c.intermediate_size;
  const std::int64_t q = std::int64_t{c.num_attention_heads} * c.head_dim;
  const std::int64_t kv = std::int64_t{c.num_key_value_heads} * c.head_dim;
  std::vector<ExpectedTensor> out;
  out.push_back({"model.embed_tokens.weight", {v, h}});
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "self_attn.q_proj.weight", {q, h}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    if (c.attention_bias) {
      out.push_back({p + "self_attn.q_proj.bias", {q}});
      out.push_back({p + "self_attn.k_proj.bias", {kv}});
      out.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    out.push_back({p + "self_attn.o_proj.weight", {h, q}});
    if (c.o_proj_bias) out.push_back({p + "self_attn.o_proj.bias", {h}});
    if (c.qk_norm) {
      out.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
      out.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    }
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    if (c.sandwich_norms) {
      out.push_back({p + "pre_feedforward_layernorm.weight", {h}});
      out.push_back({p + "post_feedforward_layernorm.weight", {h}});
    }
    out.push_back({p + "mlp.gate_proj.weight", {i, h}});
    out.push_back({p + "mlp.up_proj.weight", {i, h}});
    out.push_back({p + "mlp.down_proj.weight", {h, i}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {v, h}});
  return out;
}

}  // namespace arclight::model
