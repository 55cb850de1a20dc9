#include "arclight/model/policy.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "arclight/core/crc32c.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/hf_model.hpp"
#include "decoder.hpp"
#include "sampling.hpp"

namespace arclight::model {
namespace {

torch::ScalarType scalar_type_of(ComputeType type) {
  switch (type) {
    case ComputeType::bfloat16: return torch::kBFloat16;
    case ComputeType::float16: return torch::kHalf;
    case ComputeType::float32: break;
  }
  return torch::kFloat;
}

torch::ScalarType scalar_type_of(DType dtype, const std::string& tensor) {
  switch (dtype) {
    case DType::f32: return torch::kFloat;
    case DType::bf16: return torch::kBFloat16;
    case DType::f16: return torch::kHalf;
    default: throw ModelFileError(log::concat(tensor, ": dtype ", dtype_name(dtype), " is not a floating type"));
  }
}

// Every parameter from the directory's safetensors, by name, converted to float32 in place: one copy of the weights.
// Copied in slices of a few MB, each slice's pages of the mapping released once copied, so that the peak resident
// set is the parameters and one slice, not the parameters and the file. Returns, where `checksum` asks for it, a
// CRC-32C of what it read that does not depend on the decoder's order of parameters: of each tensor's name and the
// CRC-32C of its bytes in the file, in name order; else 0.
std::uint32_t load_hf_weights(Decoder& decoder, const HfWeights& weights, bool checksum) {
  std::map<std::string, std::uint32_t> tensor_crcs;
  constexpr std::int64_t slice_bytes = std::int64_t{8} << 20;
  torch::NoGradGuard no_grad;
  for (auto& item : decoder.named_parameters()) {
    if (item.key().find(".lora_") != std::string::npos) continue;  // adapters are ours, not the model's
    const TensorEntry& entry = weights.entry(item.key());
    const std::string_view bytes = weights.bytes(item.key());
    const auto type = scalar_type_of(entry.dtype, item.key());
    const auto source =
        torch::from_blob(const_cast<char*>(bytes.data()), entry.shape, torch::TensorOptions().dtype(type))
            .view(item.value().sizes())
            .view(-1);
    const auto target = item.value().view(-1);  // parameters are contiguous
    const std::int64_t element = static_cast<std::int64_t>(c10::elementSize(type));
    const std::int64_t step = std::max<std::int64_t>(1, slice_bytes / element);
    std::uint32_t crc = 0;
    for (std::int64_t begin = 0; begin < source.numel(); begin += step) {
      const std::int64_t n = std::min(step, source.numel() - begin);
      target.narrow(0, begin, n).copy_(source.narrow(0, begin, n));
      const std::string_view slice = bytes.substr(begin * element, n * element);
      if (checksum) crc = crc32c_extend(crc, slice.data(), slice.size());
      SafetensorsFile::release(slice);
    }
    if (checksum) tensor_crcs[item.key()] = crc;
  }
  return combined_crc32c(tensor_crcs);
}

}  // namespace

struct Policy::Impl {
  Impl(const ModelConfig& c, const Architecture& a)
      : config(c), decoder(std::make_shared<Decoder>(a, scalar_type_of(c.dtype), lora_of(c))) {
    decoder->recompute_layers(c.gradient_checkpointing);
    for (auto& [name, tensor] : decoder->trainable()) {
      names.push_back(name);
      trainable.push_back(tensor);
    }
  }

  // Gradients as views of one flat tensor: their buffers are stable and side by side, so the reducer all-reduces
  // them in place (autograd accumulates into them). Made when first needed: a runner never needs them.
  void attach_flat_gradients() {
    if (flat_grad.defined()) return;
    std::int64_t total = 0;
    for (auto& p : trainable) total += p.numel();
    flat_grad = torch::zeros({total}, torch::TensorOptions().device(decoder->device()));
    std::int64_t offset = 0;
    for (auto& p : trainable) {
      p.mutable_grad() = flat_grad.narrow(0, offset, p.numel()).view_as(p);
      offset += p.numel();
    }
  }

  ModelConfig config;
  std::shared_ptr<Decoder> decoder;
  // What trains, syncs and checkpoints: every parameter, or only the LoRA adapters.
  std::vector<std::string> names;
  std::vector<torch::Tensor> trainable;
  torch::Tensor flat_grad;
  at::Generator generator = at::detail::createCPUGenerator(1);
  std::optional<std::uint32_t> base_crc32c;
};

Policy::Policy(const ModelConfig& config, int vocab_size, std::uint64_t seed) {
  // The same seed gives the same initial weights on every rank. A generator of its own, not LibTorch's global one:
  // a colocated rank builds its trainer's and its runner's policies at once, in two threads, and with the global
  // one the draws of both interleaved: its trainer's weights differed from the other trainers' for the whole run.
  at::Generator initial = at::detail::createCPUGenerator(seed);
  const CheckedModel model = check_model(config, vocab_size);
  impl_ = std::make_unique<Impl>(config, model.architecture);
  if (model.weights) {
    const bool lora = config.lora_rank > 0;
    const std::uint32_t crc = load_hf_weights(*impl_->decoder, *model.weights, lora);
    if (lora) impl_->base_crc32c = crc;
    impl_->decoder->initialize_adapters(initial);
  } else {
    impl_->decoder->initialize(initial);
  }
  seed_sampling(seed);
}

Policy::~Policy() = default;
Policy::Policy(Policy&&) noexcept = default;
Policy& Policy::operator=(Policy&&) noexcept = default;

const ModelConfig& Policy::config() const { return impl_->config; }
const Architecture& Policy::architecture() const { return impl_->decoder->architecture(); }
int Policy::vocab_size() const { return impl_->decoder->architecture().vocab_size; }
std::optional<std::uint32_t> Policy::base_crc32c() const { return impl_->base_crc32c; }

std::size_t Policy::parameter_count() const {
  std::size_t n = 0;
  for (const auto& p : impl_->trainable) n += static_cast<std::size_t>(p.numel());
  return n;
}

std::vector<std::pair<std::string, FloatBuffer>> Policy::merge_adapters(MergeRounding* rounding) {
  impl_->decoder->merge_adapters(rounding);
  std::vector<std::pair<std::string, FloatBuffer>> out;
  for (auto& [name, tensor] : impl_->decoder->weights()) {
    if (tensor.scalar_type() != torch::kFloat || !tensor.is_contiguous() || !tensor.device().is_cpu())
      throw Error("merge_adapters: " + name + " is not a contiguous float32 tensor on the host");
    out.emplace_back(name, FloatBuffer{tensor.data_ptr<float>(), static_cast<std::size_t>(tensor.numel()), -1});
  }
  return out;
}

void Policy::place_on(int device) {
  if (device >= 0 && !torch::cuda::is_available())
    throw Error(log::concat("the policy cannot move to GPU ", device, ": this LibTorch has no CUDA or sees no GPU"));
  const torch::Device target = device < 0 ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA, device);
  if (impl_->flat_grad.defined()) throw Error("place_on: the policy must move before its first training step");
  impl_->decoder->move_to(target);
  impl_->trainable.clear();
  for (auto& [name, tensor] : impl_->decoder->trainable()) impl_->trainable.push_back(tensor);
}

int Policy::device() const {
  const torch::Device d = impl_->decoder->device();
  return d.is_cuda() ? d.index() : -1;
}

void Policy::seed_sampling(std::uint64_t seed) { impl_->generator = at::detail::createCPUGenerator(seed); }

Decoder& Policy::decoder() { return *impl_->decoder; }
at::Generator& Policy::sampling_generator() { return impl_->generator; }

namespace {

// The prompts as int64 [B, T]; all of one length.
torch::Tensor prompt_tensor(const std::vector<std::vector<std::int32_t>>& prompts) {
  const std::int64_t b = static_cast<std::int64_t>(prompts.size());
  const std::int64_t length = static_cast<std::int64_t>(prompts[0].size());
  if (length == 0) throw Error("generate: empty prompt");
  std::vector<std::int64_t> flat;
  flat.reserve(b * length);
  for (const auto& p : prompts) {
    if (static_cast<std::int64_t>(p.size()) != length) throw Error("generate: prompts in one batch need equal lengths");
    flat.insert(flat.end(), p.begin(), p.end());
  }
  return torch::from_blob(flat.data(), {b, length}, torch::kLong).clone();
}

// Appends one step's draw to every row still running; a row ends at its first stop token.
void append_step(std::vector<Generation>& out, const torch::Tensor& next, const torch::Tensor& logprob,
                 const std::vector<std::int32_t>& stop_tokens) {
  const auto tokens = next.to(torch::kInt).cpu().contiguous();
  const auto logprobs = logprob.cpu().contiguous();
  for (std::size_t r = 0; r < out.size(); ++r) {
    if (out[r].stopped) continue;
    const std::int32_t token = tokens.data_ptr<std::int32_t>()[r];
    out[r].tokens.push_back(token);
    out[r].logprobs.push_back(logprobs.data_ptr<float>()[r]);
    out[r].stopped = std::find(stop_tokens.begin(), stop_tokens.end(), token) != stop_tokens.end();
  }
}

}  // namespace

std::vector<Generation> Policy::generate(const std::vector<std::vector<std::int32_t>>& prompts, int max_new_tokens,
                                         const Sampling& sampling, bool use_cache,
                                         const std::vector<std::int32_t>& stop_tokens) {
  torch::NoGradGuard no_grad;
  std::vector<Generation> out(prompts.size());
  if (prompts.empty() || max_new_tokens <= 0) return out;
  auto tokens = prompt_tensor(prompts).to(impl_->decoder->device());
  const std::int64_t total = tokens.size(1) + max_new_tokens;
  if (total > architecture().max_seq)
    throw Error(log::concat("generate: ", total, " tokens exceed model.max_seq = ", architecture().max_seq));
  Decoder& decoder = *impl_->decoder;
  KvCache cache;
  if (use_cache) cache = decoder.new_cache(tokens.size(0), total);
  // Logits [B, vocab] at the last position only: a long prompt's other positions need none.
  const auto last = [](const torch::Tensor& t) { return torch::full({t.size(0)}, t.size(1) - 1, torch::kLong); };
  auto logits = decoder.forward_at(tokens, last(tokens), use_cache ? &cache : nullptr);
  for (int step = 0; step < max_new_tokens; ++step) {
    const Draw draw = draw_next(logits, sampling, impl_->generator);
    const torch::Tensor& next = draw.tokens;
    append_step(out, next, draw.chosen_untruncated(), stop_tokens);
    const bool all_stopped = std::all_of(out.begin(), out.end(), [](const Generation& g) { return g.stopped; });
    if (step + 1 == max_new_tokens || all_stopped) break;
    if (use_cache) {
      logits = decoder.forward(next, &cache).select(1, 0);
    } else {
      tokens = torch::cat({tokens, next}, 1);
      logits = decoder.forward_at(tokens, last(tokens), nullptr);
    }
  }
  return out;
}

at::Tensor Policy::logits(const at::Tensor& tokens) const {
  if (torch::GradMode::is_enabled()) impl_->attach_flat_gradients();
  return impl_->decoder->forward(tokens, nullptr);
}

at::Tensor Policy::token_logprobs(const at::Tensor& tokens, const at::Tensor& temperatures, at::Tensor* entropy) const {
  if (torch::GradMode::is_enabled()) impl_->attach_flat_gradients();
  const std::int64_t t = tokens.size(1);
  return impl_->decoder->token_logprobs(tokens, tokens.narrow(1, 1, t - 1),
                                        temperatures.narrow(1, 1, t - 1).unsqueeze(-1), entropy);
}

std::vector<at::Tensor> Policy::parameters() const { return impl_->trainable; }

std::vector<std::string> Policy::parameter_names() const { return impl_->names; }

std::vector<FloatBuffer> Policy::parameter_buffers() {
  std::vector<FloatBuffer> out;
  for (auto& p : impl_->trainable) out.push_back({p.data_ptr<float>(), static_cast<std::size_t>(p.numel()), device()});
  return out;
}

void Policy::zero_gradients() {
  impl_->attach_flat_gradients();
  impl_->flat_grad.zero_();
}

std::vector<FloatBuffer> Policy::gradient_buffers() {
  impl_->attach_flat_gradients();
  std::vector<FloatBuffer> out;
  for (auto& p : impl_->trainable) {
    if (!p.grad().defined() || !p.grad().is_contiguous())
      throw Error("a gradient lost its place in the flat gradient buffer");
    out.push_back({p.grad().data_ptr<float>(), static_cast<std::size_t>(p.numel()), device()});
  }
  return out;
}

std::vector<float> Policy::flat_parameters() const {
  std::vector<float> out(parameter_count());
  store_parameters(out.data(), -1, Compression::none);
  return out;
}

void Policy::for_each_parameter(const std::function<void(const float*, std::size_t)>& take) const {
  for (const auto& p : impl_->trainable) {
    const auto c = p.detach().cpu().contiguous();  // on the CPU already: the tensor itself, no copy
    take(c.data_ptr<float>(), static_cast<std::size_t>(c.numel()));
  }
}

UninitFloats Policy::flat_parameters_of(const std::vector<std::size_t>& tensors) const {
  UninitFloats out;
  for (const std::size_t i : tensors) {
    const auto c = impl_->trainable.at(i).detach().cpu().contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

void Policy::load_flat_parameters(const float* data, std::size_t size) {
  if (size != parameter_count())
    throw Error(log::concat("weights of ", size, " floats for a model of ", parameter_count(), " parameters"));
  load_parameters(data, -1, Compression::none);
}

namespace {
torch::TensorOptions packed_options(int device, Compression format) {
  const auto type = format == Compression::bf16   ? torch::kBFloat16
                    : format == Compression::fp16 ? torch::kHalf
                                                  : torch::kFloat32;
  return torch::TensorOptions().dtype(type).device(device < 0 ? torch::Device(torch::kCPU)
                                                              : torch::Device(torch::kCUDA, device));
}
}  // namespace

void Policy::store_parameters(void* out, int out_device, Compression format) const {
  torch::NoGradGuard no_grad;
  const auto packed =
      torch::from_blob(out, {static_cast<std::int64_t>(parameter_count())}, packed_options(out_device, format));
  std::int64_t offset = 0;
  for (const auto& p : impl_->trainable) {
    const auto stored = packed.narrow(0, offset, p.numel());
    stored.copy_(p.detach().reshape(-1));  // converts; on the CPU in place of a memcpy
    offset += p.numel();
    // float16 (unscaled, unlike the gradients) ends at 65504: a weight past it would reach the runners as infinity.
    if (format != Compression::fp16 || torch::isfinite(stored).all().item<bool>()) continue;
    if (!torch::isfinite(p.detach()).all().item<bool>())
      throw Error(
          "the weights hold NaN or infinity: training diverged (lower the learning rate, or resume an "
          "earlier version)");
    throw Error(
        "comm.compression = \"fp16\": a weight is beyond float16's range (65504) and would reach the "
        "runners as infinity; use \"bf16\" (float32's range)");
  }
  if (out_device >= 0) torch::cuda::synchronize(out_device);  // a copy to the host is synchronous already
}

void Policy::load_parameters(const void* in, int in_device, Compression format) {
  torch::NoGradGuard no_grad;
  const auto packed = torch::from_blob(const_cast<void*>(in), {static_cast<std::int64_t>(parameter_count())},
                                       packed_options(in_device, format));
  std::int64_t offset = 0;
  for (auto& p : impl_->trainable) {
    p.view(-1).copy_(packed.narrow(0, offset, p.numel()));
    offset += p.numel();
  }
}

}  // namespace arclight::model
