#include "arclight/algo/advantages.hpp"

#include <cmath>
#include <map>

namespace arclight::algo {

std::vector<double> returns_to_go(const std::vector<double>& rewards, double gamma) {
  std::vector<double> out(rewards.size());
  double running = 0;
  for (std::size_t i = rewards.size(); i-- > 0;) out[i] = running = rewards[i] + gamma * running;
  return out;
}

std::vector<double> normalize_within(const std::vector<double>& values, const std::vector<std::int64_t>& keys,
                                     double eps) {
  // Two passes (the mean, then the spread about it): E[x^2] - mean^2 loses the spread of large rewards. A value that
  // is not finite counts for nothing and gets 0, so that one bad reward does not take its group's signal with it.
  struct Moments {
    double sum = 0, squares = 0;
    int n = 0;
  };
  std::map<std::int64_t, Moments> groups;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    Moments& m = groups[keys[i]];
    m.sum += values[i];
    ++m.n;
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    Moments& m = groups[keys[i]];
    const double d = values[i] - m.sum / m.n;
    m.squares += d * d;
  }
  std::vector<double> out(values.size(), 0.0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    const Moments& m = groups[keys[i]];
    const double mean = m.sum / m.n;
    const double std = std::sqrt(m.squares / m.n);
    out[i] = std < 1e-12 * std::max(1.0, std::abs(mean)) ? 0.0 : (values[i] - mean) / (std + eps);
  }
  return out;
}

std::vector<std::vector<double>> group_advantages(const std::vector<std::vector<double>>& rewards, bool per_step,
                                                  double gamma) {
  std::vector<double> values;
  std::vector<std::int64_t> keys;
  for (std::size_t g = 0; g < rewards.size(); ++g) {
    if (per_step) {
      std::vector<double> g_t = returns_to_go(rewards[g], gamma);
      for (std::size_t t = 0; t < g_t.size(); ++t) {
        values.push_back(g_t[t]);
        keys.push_back(static_cast<std::int64_t>(t));
      }
    } else {
      double total = 0;
      for (double r : rewards[g]) total += r;
      values.push_back(total);
      keys.push_back(0);
    }
  }
  std::vector<double> normalized = normalize_within(values, keys);
  std::vector<std::vector<double>> out(rewards.size());
  std::size_t i = 0;
  for (std::size_t g = 0; g < rewards.size(); ++g) {
    if (per_step) {
      for (std::size_t t = 0; t < rewards[g].size(); ++t) out[g].push_back(normalized[i++]);
    } else {
      out[g].assign(std::max<std::size_t>(1, rewards[g].size()), normalized[i++]);
    }
  }
  return out;
}

}  // namespace arclight::algo
