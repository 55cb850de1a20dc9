#pragma once
// The one decoder-only transformer behind every policy (LibTorch; private to the model module). Its parameters carry
// transformers' state-dict names ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", ...), so a
// Hugging Face checkpoint loads and exports by name, and a scratch model's checkpoints read the same way.
// Parameters are float32 (the master copy the optimizer steps); the forward casts them to the compute type.
#include <torch/nn/module.h>
#include <torch/types.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "arclight/model/architecture.hpp"
#include "head_scores.hpp"

namespace arclight::model {

// Keys and values of every layer for a batch: [batch, kv_heads, capacity, head_dim] each, in the compute type; a layer
// that attends through a sliding window keeps only the window's, in a ring ([batch, kv_heads, min(capacity, window),
// head_dim]: position p at slot p % window), which its queries never look past.
// length: the positions every row holds (lockstep decoding); continuous batching keeps each row's length itself.
struct KvCache {
  std::vector<torch::Tensor> keys, values;
  std::int64_t length = 0;
  std::int64_t capacity = 0;                                   // the positions a row may reach
  KvCache rows(std::int64_t first, std::int64_t count) const;  // views of those rows (writes reach this cache)
};

struct Weight : torch::nn::Module {  // one matrix, named "<module>.weight": a LoRA factor
  Weight(std::int64_t rows, std::int64_t columns);
  torch::Tensor weight;
};

// A weight [out, in] and an optional bias [out], allocated uninitialised: a loaded model is written once. With a LoRA
// adapter, the output gains lora_scale * lora_B (lora_A x): A [rank, in], B [out, rank] (PEFT's names and init).
struct Projection : torch::nn::Module {
  Projection(std::int64_t in, std::int64_t out, bool with_bias);
  void add_adapter(int rank, double alpha);
  torch::Tensor weight, bias;
  std::shared_ptr<Weight> lora_A, lora_B;
  double lora_scale = 0;
};

// LayerNorm (weight and bias) or RMSNorm (weight, or Gemma's offset from 1; computed in float32, as transformers
// does).
struct Norm : torch::nn::Module {
  Norm(std::int64_t dim, NormKind kind, double eps);
  NormKind kind;
  double eps;
  torch::Tensor weight, bias;
};

struct Table : torch::nn::Module {  // an embedding table [rows, dim]
  Table(std::int64_t rows, std::int64_t dim);
  torch::Tensor weight;
};

struct Attention : torch::nn::Module {
  explicit Attention(const Architecture& a);
  std::shared_ptr<Projection> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<Norm> q_norm, k_norm;  // Qwen3 and Gemma 3 only
};

struct Mlp : torch::nn::Module {
  explicit Mlp(const Architecture& a);
  std::shared_ptr<Projection> gate_proj, up_proj, down_proj;  // gate_proj: gated MLPs only
};

struct Layer : torch::nn::Module {
  explicit Layer(const Architecture& a);
  std::shared_ptr<Attention> self_attn;
  std::shared_ptr<Mlp> mlp;
  std::shared_ptr<Norm> input_layernorm, post_attention_layernorm;
  // Sandwich norms (Gemma 2 and 3): post_attention_layernorm then normalises attention's output, these the MLP's input
  // and output
  std::shared_ptr<Norm> pre_feedforward_layernorm, post_feedforward_layernorm;
};

struct Body : torch::nn::Module {
  explicit Body(const Architecture& a);
  std::shared_ptr<Table> embed_tokens, embed_positions;  // embed_positions: learned positions only
  std::vector<std::shared_ptr<Layer>> layers;
  std::shared_ptr<Norm> norm;
};

class LayerRecompute;

class Decoder : public torch::nn::Module {
 public:
  Decoder(const Architecture& architecture, torch::ScalarType compute_type, const LoraSpec& lora = {});

  // Draws every parameter as torch.nn's layers would (uniform by fan-in, unit normal embeddings, unit norms), from
  // `generator`: a scratch model.
  void initialize(at::Generator& generator);
  // LoRA: A drawn as torch.nn.Linear's weight is, B zeros (the model starts as it was), from `generator`.
  void initialize_adapters(at::Generator& generator);
  // What trains: the LoRA factors when there are adapters (the rest is frozen), else every parameter; by name.
  std::vector<std::pair<std::string, torch::Tensor>> trainable();
  // Folds each LoRA adapter into the projection it adapts, W += scale * B A in place, and zeroes B: the forward
  // stays as it was (export, which then reads the weights where they are).
  void merge_adapters(MergeRounding* rounding = nullptr);
  // Every parameter but the LoRA factors, by name.
  std::vector<std::pair<std::string, torch::Tensor>> weights();
  // tokens [B, T] int64 -> logits [B, T, vocab] float32. With a cache, the tokens continue it and it grows by T.
  torch::Tensor forward(const torch::Tensor& tokens, KvCache* cache);
  // The same, with logits only where they are needed: row b's at its token at[b] (int64 [B], an index into this
  // call's T tokens) -> [B, vocab]. A prefill needs only its last; prompts of several lengths, right-padded, share one
  // forward this way, since a row's real tokens never see the padding after them (its keys are overwritten as the row
  // goes on).
  // With a cache, a row's tokens after its `at` are taken for padding: a sliding window's ring keeps none of their
  // keys (such a row goes on from its `at` in a per-row forward, as DecodeBatch's do, not in lockstep).
  torch::Tensor forward_at(const torch::Tensor& tokens, const torch::Tensor& at, KvCache* cache);
  // Continuous batching: row b of tokens [B, T] continues its own sequence at positions[b] (int64 [B]), whose
  // earlier keys and values are row b of the cache (cache.length is not used). `end` is max(positions) + T, which the
  // caller knows (no read from the device). Each row sees only its own keys before it.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& positions, std::int64_t end, KvCache& cache);
  // The training loss's figures without the logits: tokens [B, T + 1] int64 -> each target's log-prob under logits /
  // temperature, [B, T] float32, and each position's entropy where `entropy` is given (head_scores.hpp: targets [B, T]
  // int64 are what positions 0..T-1 predict, temperature [B, T, 1] float32). With autograd, as forward.
  torch::Tensor token_logprobs(const torch::Tensor& tokens, const torch::Tensor& targets,
                               const torch::Tensor& temperature, torch::Tensor* entropy);
  KvCache new_cache(std::int64_t batch, std::int64_t capacity) const;
  // Moves the parameters and tables to `device`; forwards then run there (tokens and positions may come from the CPU).
  void move_to(const torch::Device& device);
  torch::Device device() const { return cos_table_.device(); }

  // Training keeps each layer's input only and runs the layer again in the backward (gradient checkpointing, as
  // transformers' gradient_checkpointing_enable): a layer's activations exist one layer at a time, for one more
  // forward of the layers. Not with a cache, nor for a layer where neither its parameters nor its input take gradients.
  void recompute_layers(bool on) { recompute_layers_ = on; }

  const Architecture& architecture() const { return a_; }
  torch::ScalarType compute_type() const { return compute_; }

 private:
  // A parameter in the compute type. Where no gradient flows to it (generation, a frozen LoRA base) the cast is
  // kept until the parameter changes (its version counter: optimizer steps and weight loads bump it), so a 16-bit
  // model is not cast anew at every generated token. The price: a 16-bit copy of each weight stays beside its float32
  // master (half its size again) on every rank that generates.
  torch::Tensor cast(const torch::Tensor& parameter) const;
  torch::Tensor project(const Projection& p, const torch::Tensor& x) const;
  torch::Tensor normalize(const Norm& n, const torch::Tensor& x) const;
  struct Placement;
  Placement place(torch::Tensor positions, std::int64_t start, std::int64_t end) const;
  // Every row at positions start .. start + t - 1 (lockstep, and training's forward from 0).
  Placement place_rows_alike(std::int64_t start, std::int64_t t) const;
  // Whether the layer attends through the sliding window (the cache keeps its keys in a ring).
  bool slides(std::int64_t layer) const;
  // The rings' part of a forward with a cache: `before`, the rows' latest first position (the ring's slots that may
  // hold a key: no more than that); `last_real` [rows], each row's last position whose keys are kept, where padding
  // follows it (none: every token's).
  void place_ring(Placement& where, const KvCache& cache, std::int64_t before,
                  const torch::Tensor* last_real = nullptr) const;
  // forward and forward_at: every row at the same positions, continuing the cache when there is one.
  torch::Tensor lockstep(const torch::Tensor& tokens, KvCache* cache, const torch::Tensor* at);
  // Logits [B, T, vocab], or [B, vocab] at each row's token `at` when given.
  torch::Tensor run(const torch::Tensor& tokens, const Placement& where, KvCache* cache,
                    const torch::Tensor* at = nullptr);
  // The layers' output [B, T, hidden], before the final norm.
  torch::Tensor body(const torch::Tensor& tokens, const Placement& where, KvCache* cache);
  torch::Tensor layer(std::int64_t l, torch::Tensor x, const Placement& where, KvCache* cache);
  bool trains(std::int64_t l) const;  // whether a parameter of layer l takes gradients
  friend class LayerRecompute;        // runs `layer` again in the backward (decoder.cpp)
  Head head() const;
  torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) const;
  torch::Tensor attend(Attention& attn, const torch::Tensor& x, const Placement& where, std::int64_t layer,
                       KvCache* cache);
  torch::Tensor feed_forward(Mlp& mlp, const torch::Tensor& x) const;

  Architecture a_;
  torch::ScalarType compute_;
  LoraSpec lora_;
  std::shared_ptr<Body> model_;
  bool recompute_layers_ = false;
  std::shared_ptr<Projection> lm_head_;              // none when tied to the embedding
  torch::Tensor cos_table_, sin_table_;              // [max_seq, head_dim / 2], float32, times YaRN's attention_factor
  torch::Tensor local_cos_table_, local_sin_table_;  // the sliding layers' own (local_rope_theta), where they have one
  struct Cast {
    std::int64_t version = -1;
    const void* data = nullptr;  // the parameter's storage when cast (move_to gives it another)
    torch::Tensor tensor;
  };
  mutable std::mutex casts_mutex_;
  mutable std::unordered_map<const c10::TensorImpl*, Cast> casts_;  // by parameter
};

}  // namespace arclight::model
