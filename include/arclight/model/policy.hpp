#pragma once
// The policy: a decoder-only transformer (LibTorch) behind a plain C++ face.
// This header does not include LibTorch; the few translation units that pass
// tensors (model, algo) include it themselves.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arclight/core/config.hpp"
#include "arclight/core/uninit_floats.hpp"
#include "arclight/core/gradient_reducer.hpp"
#include "arclight/model/architecture.hpp"

namespace at {
class Tensor;
struct Generator;
}  // namespace at

namespace arclight::model {

class Decoder;
class DecodeBatch;

struct Sampling {
  double temperature = 1.0;  // below greedy_below: greedy (the most likely token)
  int top_k = 0;             // 0: the whole vocabulary
  double top_p = 1.0;        // the smallest set of most likely tokens whose probability reaches top_p
};

// Below this temperature sampling is greedy (vLLM's bound too): logits divided by less overflow.
inline constexpr double greedy_below = 1e-5;
// The temperature at which a sampling's log-probs are taken: its own, or the model's own (1) when greedy. Training
// compares the policy's log-probs at this temperature with those recorded.
inline double logprob_temperature(double temperature) { return temperature < greedy_below ? 1.0 : temperature; }

// One row of a generate call: the sampled tokens and their log-probs under the model's distribution at the sampling's
// temperature, before top-k and top-p (logprob_temperature; for greedy rows the model's own): what training compares
// with. A row that drew a stop token ends with it.
struct Generation {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;
  bool stopped = false;  // ended at a stop token, not at max_new_tokens
};

// The one decoder (architecture.hpp) with its weights: drawn from `seed` for model.source = "scratch" (the same seed
// gives the same weights on every rank), read from model.path for "hf" (ModelFileError naming the file or tensor).
class Policy {
 public:
  Policy(const ModelConfig& config, int vocab_size, std::uint64_t seed);
  ~Policy();
  Policy(Policy&&) noexcept;
  Policy& operator=(Policy&&) noexcept;

  // Moves the policy to CUDA device `device` (-1: the CPU, where it is built); generation, forward and backward then
  // run there, and parameter_buffers / gradient_buffers name that device. Before the first training step. Throws
  // Error where this LibTorch has no CUDA or the device is not there.
  void place_on(int device);
  int device() const;  // -1: the CPU

  const ModelConfig& config() const;
  const Architecture& architecture() const;
  int vocab_size() const;
  // A LoRA run on a Hugging Face model: a CRC-32C of the frozen model as read from model.path (of each tensor's name
  // and the CRC-32C of its bytes in the file, in name order), which the run's checkpoints keep so that a resume or an
  // export refuses a base replaced since, and the ranks compare at start-up. None otherwise.
  std::optional<std::uint32_t> base_crc32c() const;
  // "Parameters" below are what trains, syncs to the runners and goes into checkpoints: every weight of the model,
  // or, with LoRA (model.lora_rank > 0), only the adapters, the model itself frozen.
  std::size_t parameter_count() const;

  // Continues every prompt by up to max_new_tokens, all rows in one batch, a row ending early at any of
  // stop_tokens. The prompts must have equal lengths (callers group them). With use_cache, each new token costs one
  // step over a KV cache; without, each re-forwards the whole prefix.
  std::vector<Generation> generate(const std::vector<std::vector<std::int32_t>>& prompts, int max_new_tokens,
                                   const Sampling& sampling, bool use_cache = true,
                                   const std::vector<std::int32_t>& stop_tokens = {});

  // Logits [batch, length, vocab] for int64 tokens [batch, length] (a full forward, with autograd): tests and checks;
  // training reads token_logprobs.
  at::Tensor logits(const at::Tensor& tokens) const;
  // What training reads of the logits, without them: for int64 tokens [batch, length] and float32 temperatures
  // [batch, length] (token i's, at which its log-prob is taken), each token's log-prob after the first, under the
  // logits before it divided by its temperature -> [batch, length - 1] float32, and each of those positions' entropy
  // where `entropy` is given. With autograd; the head runs a block of positions at a time, so no [batch, length, vocab]
  // tensor is made or kept (src/model/head_scores.hpp).
  at::Tensor token_logprobs(const at::Tensor& tokens, const at::Tensor& temperatures,
                            at::Tensor* entropy = nullptr) const;
  std::vector<at::Tensor> parameters() const;
  // Their names, transformers' ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", ...), in the
  // same order.
  std::vector<std::string> parameter_names() const;

  // Parameters and their gradients as float buffers, in a fixed order on every rank.
  std::vector<FloatBuffer> parameter_buffers();
  std::vector<FloatBuffer> gradient_buffers();
  void zero_gradients();
  // All parameters as one flat vector, and back (weight sync, checkpoints).
  std::vector<float> flat_parameters() const;
  // Each parameter tensor's floats in host memory, in the same order: flat_parameters without the whole copy.
  void for_each_parameter(const std::function<void(const float*, std::size_t)>& take) const;
  // The parameter tensors numbered `tensors` (ascending, in parameters() order), one after another, in host memory.
  UninitFloats flat_parameters_of(const std::vector<std::size_t>& tensors) const;
  void load_flat_parameters(const float* data, std::size_t size);
  // The parameters one after another as `format` (none: float32; bf16 or fp16: rounded to nearest even) into `out`,
  // memory on CUDA device `out_device` (-1: the host) with room for parameter_count() of them; returns once they are
  // there. load_parameters is the way back. The weights' way from the trainer leader to the runners.
  void store_parameters(void* out, int out_device, Compression format) const;
  void load_parameters(const void* in, int in_device, Compression format);

  // Folds each LoRA adapter into the projection it adapts, in place (the adapter is zero then: the logits stay as they
  // were), and returns every weight of the model by transformers' name over the policy's own float32 memory (valid
  // while the policy lives): export's weights without a second copy of the model. `rounding`: what 16-bit weights keep.
  std::vector<std::pair<std::string, FloatBuffer>> merge_adapters(MergeRounding* rounding = nullptr);

  void seed_sampling(std::uint64_t seed);

 private:
  friend class DecodeBatch;             // decodes with this policy's model
  Decoder& decoder();                   // the model itself (src/model/decoder.hpp)
  at::Generator& sampling_generator();  // draws of generate, and of unseeded DecodeBatch sequences
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arclight::model
