#pragma once
// A Hugging Face model directory, described and checked before any weight is used: config.json read into HfConfig
// (Llama, Qwen2, Qwen3, Mistral and Gemma 1, 2 and 3 decoders, with transformers' defaults for absent keys), the
// tensors that config implies, by transformers' names and shapes, and the safetensors weights (one file, or shards
// listed by model.safetensors.index.json) checked against them. No LibTorch and no MPI here: the decoder wraps the
// bytes.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arclight/model/safetensors.hpp"

namespace arclight::model {

// The decoder architectures read, as config.json's "architectures"[0] spells them.
inline constexpr std::string_view supported_architectures[] = {
    "LlamaForCausalLM", "Qwen2ForCausalLM",  "Qwen3ForCausalLM",  "MistralForCausalLM",
    "GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"};

// config.json's fields, named as transformers names them. Every one is set: a key config.json leaves out takes the
// default of the architecture's config class in transformers (hf_model.cpp lists them and where they come from).
struct HfConfig {
  std::string architecture;  // one of supported_architectures
  // Gemma3ForConditionalGeneration (Gemma 3 4B-27B): the text model of a model that also sees images, read from
  // text_config (the end tokens and dtype beside it); its weights under the causal LM's names (HfWeights), the vision
  // tower's left unread
  bool text_of_multimodal = false;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;  // divides num_attention_heads
  int head_dim = 0;             // hidden_size / num_attention_heads unless config.json gives it (Qwen3 always does)
  double rms_norm_eps = 0;
  double rope_theta = 0;
  bool tie_word_embeddings = false;  // lm_head is embed_tokens
  bool attention_bias = false;       // q_proj, k_proj and v_proj have a bias: Qwen2 always, Llama/Qwen3 by config
  bool o_proj_bias = false;          // o_proj has one too: Llama's and Qwen3's "attention_bias"
  bool qk_norm = false;              // RMSNorm on each head's q and k before RoPE: Qwen3, Gemma 3
  // Gemma: each RMSNorm weight stored as its offset from 1 (the norm scales by 1 + w, in float32), the embeddings
  // scaled by sqrt(hidden_size)
  bool gemma_norms = false;
  bool sandwich_norms = false;  // Gemma 2 and 3: norms after attention and after the MLP besides those before them
  std::string hidden_activation = "silu";       // the gated MLP's: silu, or gelu_pytorch_tanh (Gemma)
  std::optional<double> query_pre_attn_scalar;  // Gemma 2 and 3: scores scaled by its -1/2 power, not head_dim's
  struct RopeScaling {  // Llama 3.1's frequency scaling, linear (frequencies / factor), or YaRN (Qwen's long context)
    std::string type;   // "llama3", "linear" or "yarn"
    double factor = 0, low_freq_factor = 0, high_freq_factor = 0;
    int original_max_position_embeddings = 0;
    // YaRN: the rotations over the original context that bound the dimensions blended between kept and interpolated
    // frequencies (rounded outwards to whole dimensions unless truncate is false), and the scale of cos and sin
    double beta_fast = 32, beta_slow = 1, attention_factor = 1;
    bool truncate = true;
  };
  std::optional<RopeScaling> rope_scaling;  // none: plain RoPE
  std::optional<int> sliding_window;  // Mistral's window, Qwen's when use_sliding_window, Gemma 2's and 3's; none: full
  std::vector<bool>
      sliding_layers;  // Gemma 2's and 3's layer_types: the layers the window applies to; empty: every layer
  std::optional<double> local_rope_theta;  // Gemma 3's rope_local_base_freq: the sliding layers' RoPE, unscaled
  int max_position_embeddings = 0;
  std::vector<int> eos_token_ids;  // "eos_token_id", an int or a list; empty when null
  std::optional<int> bos_token_id;
  std::string torch_dtype;  // "torch_dtype" (or transformers 5's "dtype"); empty when absent
  // Gemma 2 (and Gemma 3 where set): attention scores (before the mask) and the final logits soft-capped,
  // cap * tanh(x / cap); none: not
  std::optional<double> attn_logit_softcapping = std::nullopt, final_logit_softcapping = std::nullopt;
};

// Parses and checks config.json's text; `name_for_errors` (the file) starts every error's message. Throws
// ModelFileError naming the key: not JSON, an unsupported architecture, a value of the wrong JSON type, a size not
// positive, heads that do not divide, a rope_scaling of another kind.
HfConfig parse_hf_config(std::string_view json_text, const std::string& name_for_errors);
// `model_dir`/config.json, read and parsed.
HfConfig read_hf_config(const std::string& model_dir);

// The files beside the weights that make a model directory the model it is: its config, and what reads and renders
// its text. A run goes on from another directory (a node-local copy of the model) only where these are alike.
inline constexpr std::string_view definition_files[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                                        "chat_template.jinja"};
// One line per definition file the directory holds: its name, a space and the CRC-32C of its bytes (8 hex digits).
// Throws ModelFileError for one that is there and does not read.
std::string definition_digest(const std::string& model_dir);
// How two digests differ, one phrase per file ("config.json differs", "tokenizer.json was not there", "... is not
// there now"), `saved` the older; empty when they are alike. Throws ModelFileError for a line that does not parse.
std::vector<std::string> definition_differences(const std::string& saved, const std::string& now);

struct ExpectedTensor {
  std::string name;  // transformers' state-dict name, e.g. "model.layers.0.self_attn.k_proj.weight"
  std::vector<std::int64_t> shape;
};
// Every tensor a checkpoint of this config holds, in transformers' names and shapes (Linear weights [out, in]):
// the embedding, each layer's norms, projections (and biases, q/k norms where the config has them), the final norm,
// and lm_head unless the embeddings are tied.
std::vector<ExpectedTensor> expected_tensors(const HfConfig& config);

// A model directory's weights: model.safetensors, or, without it, the shards that model.safetensors.index.json's
// "weight_map" names (each a plain file name in the directory, each opened once, each tensor in the shard the map
// names). Every file is mapped and its header checked when opened.
// Tensors are named as the causal LM names them: a multimodal Gemma 3's text model's "language_model.model.*" (Google's
// files) or "model.language_model.*" (transformers 4.52 on) read as "model.*", its "language_model.lm_head.*" as
// "lm_head.*".
class HfWeights {
 public:
  static HfWeights open(const std::string& model_dir);
  HfWeights(HfWeights&&) noexcept;
  HfWeights& operator=(HfWeights&&) noexcept;
  ~HfWeights();

  bool has(std::string_view name) const;
  const TensorEntry& entry(std::string_view name) const;  // throws ModelFileError for a name not there
  std::string_view bytes(std::string_view name) const;    // in the mapping, valid while this object lives
  std::vector<std::string> names() const;                 // sorted
  std::size_t file_count() const;

  // Every expected tensor there, with its shape and a floating dtype (F32, F16, BF16), and nothing else but what
  // transformers itself ignores when loading (rotary_emb.inv_freq buffers; lm_head.weight of a tied model, which
  // transformers overwrites with the embedding when it ties them) and, for the text model of a multimodal one, the
  // vision tower's and projector's tensors. Throws one ModelFileError listing the problems,
  // each naming its tensor (the first ten, then how many more).
  void check_against(const HfConfig& config) const;

 private:
  HfWeights();
  struct State;
  std::unique_ptr<State> state_;
};

// A CRC-32C of a model's weights as a LoRA run records its frozen base (Policy::base_crc32c): of each tensor's name and
// the CRC-32C of its bytes, in name order. `tensor_crcs` maps names to those CRCs.
std::uint32_t combined_crc32c(const std::map<std::string, std::uint32_t>& tensor_crcs);
// The same of `weights`, over the tensors `config` implies, read once (each slice's pages let go of as read), without
// building the model: what an export of a LoRA run's adapters checks its base against.
std::uint32_t base_weights_crc32c(const HfWeights& weights, const HfConfig& config);

}  // namespace arclight::model
