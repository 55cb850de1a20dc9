#pragma once
// The shape of the one decoder that serves every policy: the sizes and switches that tell a transformer initialised
// here (model.source = "scratch": LayerNorm, GELU, biases, rotary or learned positions) from a Hugging Face Llama,
// Qwen2, Qwen3, Mistral or Gemma 1, 2 or 3 (RMSNorm, SwiGLU or GeGLU, grouped-query attention, RoPE with optional
// llama3 or linear scaling, q/k norms, sliding windows on some layers, soft caps).
// No LibTorch here: the app checks a configuration with it before any rank builds a model.
#include <optional>
#include <string>
#include <vector>

#include "arclight/core/config.hpp"
#include "arclight/model/hf_model.hpp"

namespace arclight::model {

// rms_norm_offset: Gemma's RMSNorm, which scales by 1 + weight, the product taken in float32
enum class NormKind { layer_norm, rms_norm, rms_norm_offset };
// gated_silu: down(silu(gate(x)) * up(x)), Llama's SwiGLU; gated_gelu_tanh: the same with GELU's tanh approximation
// (Gemma's gelu_pytorch_tanh)
enum class MlpKind { gelu, gated_silu, gated_gelu_tanh };

struct Architecture {
  std::string name;  // "scratch", or config.json's architecture ("Qwen3ForCausalLM", ...)
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // divides num_heads: each group of num_heads / num_kv_heads queries shares one key head
  int head_dim = 0;
  int max_seq = 0;  // the KV cache's capacity and the longest sequence a forward takes
  NormKind norm = NormKind::rms_norm;
  double norm_eps = 1e-6;
  MlpKind mlp = MlpKind::gated_silu;
  bool mlp_bias = false;
  bool learned_positions = false;  // an embedding per position instead of RoPE
  double rope_theta = 10000;
  std::optional<HfConfig::RopeScaling> rope_scaling;  // llama3, linear or yarn
  bool qkv_bias = false, o_bias = false, lm_head_bias = false;
  bool qk_norm = false;               // RMSNorm over each head's q and k before RoPE (Qwen3)
  bool tied_embeddings = false;       // lm_head is embed_tokens
  std::optional<int> sliding_window;  // a query sees itself and the window - 1 keys before it
  std::vector<bool> sliding_layers;   // with sliding_window: the layers it applies to (Gemma's); empty: every layer
  std::optional<double> local_rope_theta;  // the sliding layers' own RoPE base, unscaled (Gemma 3); none: the same
  // Gemma 2 and 3: a norm after attention and after the MLP (before the residual) besides the ones before them
  bool sandwich_norms = false;
  bool scaled_embeddings = false;         // Gemma: the embeddings times sqrt(hidden_size) in the compute type
  std::optional<double> attention_scale;  // the scores' scale; none: head_dim^-1/2
  // Gemma 2's: cap * tanh(x / cap) of the scaled scores before the mask, and of the logits, in the compute type
  std::optional<double> attention_softcap, logit_softcap;
};

// Low-rank adapters on some projections of every layer; rank 0: none.
struct LoraSpec {
  int rank = 0;
  double alpha = 16;
  std::vector<std::string> targets;  // q, k, v, o, gate, up, down
};
// model.lora_*, checked: a rank for a Hugging Face model only, known targets, gate only for gated MLPs.
LoraSpec lora_of(const ModelConfig& config);

// What a merge of the adapters into 16-bit weights keeps: of the adapted weights the merge changes in float32, how many
// round to the same bfloat16 (float16) value as before it, their update under half a step of the type: lost.
struct MergeRounding {
  std::uint64_t changed = 0, unchanged_in_bf16 = 0, unchanged_in_f16 = 0;
};

// A transformer initialised here, for an agent's vocabulary.
Architecture scratch_architecture(const ModelConfig& config, int vocab_size);
// A Hugging Face model of this config.json, run with sequences of up to max_seq tokens.
Architecture hf_architecture(const HfConfig& config, int max_seq);

// The architecture model.source names: for hf, config.json is read and the weights' headers are checked against it
// (ModelFileError naming the file, key or tensor). `agent_vocab` is the built-in agent's vocabulary, which must fit.
Architecture architecture_of(const ModelConfig& config, int agent_vocab);

// The same, keeping the weights it opened and checked (hf; none for scratch): a model is then read from them.
struct CheckedModel {
  Architecture architecture;
  std::optional<HfWeights> weights;
};
CheckedModel check_model(const ModelConfig& config, int agent_vocab);

std::size_t parameter_count(const Architecture& a);
// One line for people: what the model is, its sizes and its peculiarities ("Qwen3ForCausalLM: 28 layers, ...").
std::string describe(const Architecture& a);

// The layer a parameter belongs to ("model.layers.3.mlp.up_proj.weight" -> 3), or none (embeddings, final norm, head).
std::optional<int> layer_of(const std::string& parameter_name);

}  // namespace arclight::model
