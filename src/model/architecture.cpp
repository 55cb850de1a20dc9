#include "arclight/model/architecture.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "arclight/core/log.hpp"

namespace arclight::model {

Architecture scratch_architecture(const ModelConfig& c, int vocab_size) {
  if (c.d_model % c.n_heads != 0 || (c.d_model / c.n_heads) % 2 != 0)
    throw UsageError(log::concat("model.d_model = ", c.d_model, " must split into model.n_heads = ", c.n_heads,
                                 " heads of an even size"));
  Architecture a;
  a.name = "scratch";
  a.vocab_size = vocab_size;
  a.hidden_size = c.d_model;
  a.intermediate_size = c.d_ff;
  a.num_layers = c.n_layers;
  a.num_heads = a.num_kv_heads = c.n_heads;
  a.head_dim = c.d_model / c.n_heads;
  a.max_seq = c.max_seq;
  a.norm = NormKind::layer_norm;
  a.norm_eps = 1e-5;  // torch.nn.LayerNorm's default
  a.mlp = MlpKind::gelu;
  a.mlp_bias = a.qkv_bias = a.o_bias = a.lm_head_bias = true;
  a.learned_positions = c.positions == Positions::learned;
  return a;
}

Architecture hf_architecture(const HfConfig& c, int max_seq) {
  Architecture a;
  a.name = c.architecture;
  a.vocab_size = c.vocab_size;
  a.hidden_size = c.hidden_size;
  a.intermediate_size = c.intermediate_size;
  a.num_layers = c.num_hidden_layers;
  a.num_heads = c.num_attention_heads;
  a.num_kv_heads = c.num_key_value_heads;
  a.head_dim = c.head_dim;
  a.max_seq = max_seq;
  a.norm = c.gemma_norms ? NormKind::rms_norm_offset : NormKind::rms_norm;
  a.norm_eps = c.rms_norm_eps;
  a.mlp = c.hidden_activation == "gelu_pytorch_tanh" ? MlpKind::gated_gelu_tanh : MlpKind::gated_silu;
  a.rope_theta = c.rope_theta;
  a.rope_scaling = c.rope_scaling;
  a.qkv_bias = c.attention_bias;
  a.o_bias = c.o_proj_bias;
  a.qk_norm = c.qk_norm;
  a.tied_embeddings = c.tie_word_embeddings;
  a.sliding_window = c.sliding_window;
  a.sliding_layers = c.sliding_layers;
  a.local_rope_theta = c.local_rope_theta;
  a.sandwich_norms = c.sandwich_norms;
  a.scaled_embeddings = c.gemma_norms;
  if (c.query_pre_attn_scalar) a.attention_scale = std::pow(*c.query_pre_attn_scalar, -0.5);
  a.attention_softcap = c.attn_logit_softcapping;
  a.logit_softcap = c.final_logit_softcapping;
  return a;
}

Architecture architecture_of(const ModelConfig& config, int agent_vocab) {
  return check_model(config, agent_vocab).architecture;
}

CheckedModel check_model(const ModelConfig& config, int agent_vocab) {
  if (config.source == ModelSource::scratch) {
    // Said, not ignored: a Qwen configuration without source = "hf" trained a tiny random model instead.
    if (!config.path.empty() || !config.chat_template.empty())
      throw UsageError(std::string("model.") + (config.path.empty() ? "chat_template" : "path") +
                       " is for a Hugging Face model, but model.source = \"scratch\" (the default) initialises one "
                       "here: set model.source = \"hf\"");
    return {scratch_architecture(config, agent_vocab), std::nullopt};
  }
  if (config.path.empty()) throw UsageError("model.source = \"hf\" needs model.path, the model directory");
  const HfConfig hf = read_hf_config(config.path);
  HfWeights weights = HfWeights::open(config.path);
  weights.check_against(hf);
  if (agent_vocab > hf.vocab_size)
    throw UsageError(log::concat("the agent's vocabulary of ", agent_vocab, " tokens exceeds the model's (",
                                 hf.vocab_size, " in ", config.path, "/config.json)"));
  // Gemma's activations pass 65,504, float16's largest, in other implementations too: NaN hidden states of Gemma 1 in
  // google/gemma_pytorch#10, NaN logits of Gemma 2 and 3 in transformers#36822
  if (hf.gemma_norms && config.dtype == ComputeType::float16)
    throw UsageError(hf.architecture +
                     " overflows float16 (its activations pass 65,504, in transformers too): use "
                     "model.dtype = \"bfloat16\" or \"float32\"");
  if (config.max_seq > hf.max_position_embeddings)
    throw UsageError(log::concat("model.max_seq = ", config.max_seq, " exceeds the model's max_position_embeddings (",
                                 hf.max_position_embeddings, ")"));
  return {hf_architecture(hf, config.max_seq), std::move(weights)};
}

std::size_t parameter_count(const Architecture& a) {
  const std::size_t h = a.hidden_size, f = a.intermediate_size, d = a.head_dim;
  const std::size_t q = a.num_heads * d, kv = a.num_kv_heads * d, norm = a.norm == NormKind::layer_norm ? 2 * h : h;
  const bool gated = a.mlp != MlpKind::gelu;
  std::size_t layer = h * (q + 2 * kv) + q * h + (a.sandwich_norms ? 4 : 2) * norm;
  layer += (gated ? 3 : 2) * h * f + (a.mlp_bias ? (gated ? 2 : 1) * f + h : 0);
  layer += (a.qkv_bias ? q + 2 * kv : 0) + (a.o_bias ? h : 0) + (a.qk_norm ? 2 * d : 0);
  std::size_t total = a.num_layers * layer + a.vocab_size * h + norm;
  if (a.learned_positions) total += static_cast<std::size_t>(a.max_seq) * h;
  if (!a.tied_embeddings) total += a.vocab_size * h + (a.lm_head_bias ? a.vocab_size : 0);
  return total;
}

std::string describe(const Architecture& a) {
  std::string extras;
  const auto add = [&extras](bool on, const char* what) {
    if (on) extras += std::string(", ") + what;
  };
  add(a.num_kv_heads != a.num_heads, "grouped-query attention");
  add(a.qkv_bias, "q/k/v biases");
  add(a.qk_norm, "q/k norms");
  if (a.rope_scaling) extras += ", " + a.rope_scaling->type + " RoPE scaling";
  add(a.sandwich_norms, "norms before and after attention and MLP");
  add(a.scaled_embeddings, "embeddings scaled by sqrt(hidden)");
  add(a.mlp == MlpKind::gated_gelu_tanh, "GeGLU (tanh)");
  if (a.attention_scale) extras += log::concat(", attention scale ", *a.attention_scale);
  if (a.attention_softcap) extras += log::concat(", scores soft-capped at ", *a.attention_softcap);
  if (a.logit_softcap) extras += log::concat(", logits soft-capped at ", *a.logit_softcap);
  add(a.tied_embeddings, "tied embeddings");
  add(a.learned_positions, "learned positions");
  if (a.sliding_window && a.sliding_layers.empty()) extras += log::concat(", sliding window ", *a.sliding_window);
  if (const auto sliding = std::count(a.sliding_layers.begin(), a.sliding_layers.end(), true);
      a.sliding_window && sliding)
    extras += log::concat(", sliding window ", *a.sliding_window, " on ", sliding, " layers");
  if (a.local_rope_theta) extras += log::concat(", their RoPE base ", *a.local_rope_theta);
  return log::concat(a.name, ": ", a.num_layers, " layers, hidden ", a.hidden_size, ", ", a.num_heads, " heads (",
                     a.num_kv_heads, " key/value) of ", a.head_dim, ", MLP ", a.intermediate_size, ", vocabulary ",
                     a.vocab_size, ", ", parameter_count(a), " parameters", extras);
}

LoraSpec lora_of(const ModelConfig& config) {
  if (config.lora_rank <= 0) return {};
  if (config.source != ModelSource::hf)
    throw UsageError("model.lora_rank needs a pretrained model to adapt (model.source = \"hf\")");
  if (config.lora_targets.empty()) throw UsageError("model.lora_targets is empty: no projection would train");
  for (const std::string& t : config.lora_targets)
    if (t != "q" && t != "k" && t != "v" && t != "o" && t != "gate" && t != "up" && t != "down")
      throw UsageError("model.lora_targets: \"" + t + "\" is none of q, k, v, o, gate, up, down");
  for (auto t = config.lora_targets.begin(); t != config.lora_targets.end(); ++t)
    if (std::find(config.lora_targets.begin(), t, *t) != t)
      throw UsageError("model.lora_targets: \"" + *t + "\" is named twice");
  return {config.lora_rank, config.lora_alpha, config.lora_targets};
}

std::optional<int> layer_of(const std::string& parameter_name) {
  const std::string prefix = "model.layers.";
  if (parameter_name.rfind(prefix, 0) != 0) return std::nullopt;
  const std::size_t end = parameter_name.find('.', prefix.size());
  return std::stoi(parameter_name.substr(prefix.size(), end - prefix.size()));
}

}  // namespace arclight::model
