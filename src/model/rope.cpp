#include "rope.hpp"

#include <algorithm>
#include <cmath>

namespace arclight::model {

namespace {
// YaRN (transformers' _compute_yarn_parameters): the dimensions that turn fewer than beta_slow times over the original
// context are interpolated (frequency / factor), those that turn more than beta_fast times kept, the ones between
// blended along a ramp.
torch::Tensor yarn_inverse_frequencies(const Architecture& a, const torch::Tensor& position_frequencies) {
  const HfConfig::RopeScaling& s = *a.rope_scaling;
  const double dim = double(a.head_dim);
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(s.original_max_position_embeddings / (rotations * 2 * M_PI)) / (2 * std::log(a.rope_theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // no division by zero
  const auto ramp = ((torch::arange(a.head_dim / 2, torch::kFloat) - low) / (high - low)).clamp(0, 1);
  const auto kept_share = 1 - ramp;
  const auto kept = 1.0 / position_frequencies, interpolated = 1.0 / (s.factor * position_frequencies);
  return interpolated * (1 - kept_share) + kept * kept_share;
}
}  // namespace

torch::Tensor rope_inverse_frequencies(const Architecture& a) {
  const auto exponents = torch::arange(0, a.head_dim, 2, torch::kLong).to(torch::kFloat) / a.head_dim;
  const auto position_frequencies = torch::pow(a.rope_theta, exponents);
  auto inv_freq = 1.0 / position_frequencies;
  if (!a.rope_scaling) return inv_freq;
  if (a.rope_scaling->type == "linear") return inv_freq / a.rope_scaling->factor;
  if (a.rope_scaling->type == "yarn") return yarn_inverse_frequencies(a, position_frequencies);
  // Llama 3.1: long wavelengths slowed by `factor`, short ones kept, the band between blended smoothly.
  const HfConfig::RopeScaling& s = *a.rope_scaling;
  const double old_context = s.original_max_position_embeddings;
  const double low_freq_wavelen = old_context / s.low_freq_factor, high_freq_wavelen = old_context / s.high_freq_factor;
  const auto wavelen = 2 * M_PI / inv_freq;
  auto scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const auto smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  const auto medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return torch::where(medium, smoothed, scaled);
}

std::pair<torch::Tensor, torch::Tensor> rope_tables(const Architecture& a) {
  const auto angles = torch::outer(torch::arange(a.max_seq, torch::kFloat), rope_inverse_frequencies(a));
  auto cos = angles.cos(), sin = angles.sin();
  if (a.rope_scaling && a.rope_scaling->attention_factor != 1) {  // YaRN's: q and k scaled, the scores by its square
    cos *= a.rope_scaling->attention_factor;
    sin *= a.rope_scaling->attention_factor;
  }
  return {cos, sin};
}

}  // namespace arclight::model
