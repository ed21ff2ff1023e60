#include "engine/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"

namespace argen::model {

absl::Status CheckTemperature(double t) {
  if (std::isfinite(t) && t >= 0 && t <= kMaxTemperature) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("must be in [0, ", kMaxTemperature, "] (0: greedy), got ", t));
}

absl::Status CheckCfgWeight(double w) {
  if (std::isfinite(w) && w >= 0 && w <= kMaxCfgWeight) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("must be in [0, ", kMaxCfgWeight, "], got ", w));
}

absl::Status CheckTopK(int64_t k, int64_t vocab) {
  if (k >= 0 && (vocab <= 0 || k <= vocab)) return absl::OkStatus();
  if (vocab <= 0) return absl::InvalidArgumentError(absl::StrCat("must be >= 0, got ", k));
  return absl::InvalidArgumentError(absl::StrCat("must be in [0, ", vocab, "], got ", k));
}

absl::Status CheckTopP(double p) {
  if (p > 0 && p <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("must be in (0, 1], got ", p));
}

HostSampler::HostSampler(int32_t vocab) : vocab_(vocab), logits_(vocab), probs_(vocab), sorted_(vocab) {}

int32_t HostSampler::Sample(const float* cond, const float* uncond, const SamplingSpec& spec, float u) {
  const int32_t n = vocab_;
  if (spec.temperature == 0.0f) {
    // Greedy: the first index of the largest guided logit.
    int32_t best = 0;
    float best_logit = -std::numeric_limits<float>::infinity();
    for (int32_t v = 0; v < n; ++v) {
      const float l = uncond[v] + spec.cfg_weight * (cond[v] - uncond[v]);
      if (l > best_logit) {
        best_logit = l;
        best = v;
      }
    }
    std::fill(probs_.begin(), probs_.end(), 0.0f);
    probs_[best] = 1.0f;
    return best;
  }
  const float inv_t = 1.0f / spec.temperature;
  for (int32_t v = 0; v < n; ++v) {
    logits_[v] = (uncond[v] + spec.cfg_weight * (cond[v] - uncond[v])) * inv_t;
  }

  // Top-k as a threshold on the logits: ties with the k-th largest are kept.
  float logit_floor = -std::numeric_limits<float>::infinity();
  if (spec.top_k > 0 && spec.top_k < n) {
    std::copy(logits_.begin(), logits_.end(), sorted_.begin());
    std::nth_element(sorted_.begin(), sorted_.begin() + (spec.top_k - 1), sorted_.end(), std::greater<float>());
    logit_floor = sorted_[spec.top_k - 1];
  }

  float max_logit = -std::numeric_limits<float>::infinity();
  for (int32_t v = 0; v < n; ++v) {
    if (logits_[v] >= logit_floor) max_logit = std::max(max_logit, logits_[v]);
  }
  double total = 0.0;
  for (int32_t v = 0; v < n; ++v) {
    const float p = logits_[v] >= logit_floor ? std::exp(logits_[v] - max_logit) : 0.0f;
    probs_[v] = p;
    total += p;
  }
  const float inv_total = static_cast<float>(1.0 / total);
  for (int32_t v = 0; v < n; ++v) probs_[v] *= inv_total;

  // Top-p as a threshold on the probabilities: the smallest p* whose
  // descending prefix reaches top_p; ties with p* are kept.
  if (spec.top_p < 1.0f) {
    std::copy(probs_.begin(), probs_.end(), sorted_.begin());
    std::sort(sorted_.begin(), sorted_.end(), std::greater<float>());
    double cumulative = 0.0;
    float prob_floor = sorted_[0];
    for (int32_t i = 0; i < n && sorted_[i] > 0.0f; ++i) {
      cumulative += sorted_[i];
      prob_floor = sorted_[i];
      if (cumulative >= spec.top_p) break;
    }
    double kept = 0.0;
    for (int32_t v = 0; v < n; ++v) {
      if (probs_[v] < prob_floor) probs_[v] = 0.0f;
      kept += probs_[v];
    }
    const float inv_kept = static_cast<float>(1.0 / kept);
    for (int32_t v = 0; v < n; ++v) probs_[v] *= inv_kept;
  }

  // Inverse CDF in vocabulary order.
  double mass = 0.0;
  for (int32_t v = 0; v < n; ++v) mass += probs_[v];
  const double target = static_cast<double>(u) * mass;
  double cumulative = 0.0;
  int32_t last_kept = 0;
  for (int32_t v = 0; v < n; ++v) {
    if (probs_[v] <= 0.0f) continue;
    cumulative += probs_[v];
    last_kept = v;
    if (cumulative > target) return v;
  }
  return last_kept;
}

}  // namespace argen::model
