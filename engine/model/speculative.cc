#include "engine/model/speculative.h"

#include <algorithm>

#include "kernels/sampling_rng.h"

namespace argen::model {

float SpeculativeUniform(const SamplingSpec& spec, int32_t token, SpeculativeDraw draw, int32_t pass) {
  // The sequential draws use counter words 2 and 3 = 0; these never do (draw >= 1).
  const kernels::Philox4x32 out =
      kernels::Philox4x32_10(kernels::Philox4x32{{static_cast<uint32_t>(token), static_cast<uint32_t>(spec.image_index),
                                                  static_cast<uint32_t>(draw), static_cast<uint32_t>(pass)}},
                             static_cast<uint32_t>(spec.seed), static_cast<uint32_t>(spec.seed >> 32));
  return static_cast<float>(out.v[0] >> 8) * (1.0f / 16777216.0f);
}

SpeculativeImage::SpeculativeImage(int32_t l_dec, int32_t window, int32_t vocab, int32_t sampled_offset,
                                   std::span<const int32_t> forced, const SamplingSpec& spec)
    : l_dec_(l_dec),
      window_(std::max(window, 1)),
      vocab_(vocab),
      offset_(sampled_offset),
      forced_(forced.begin(), forced.end()),
      spec_(spec),
      tokens_(l_dec, -1),
      residual_(vocab) {}

void SpeculativeImage::Start(int32_t token0) {
  tokens_[0] = token0;
  made_ = 1;
  FillDrafts();
}

int32_t SpeculativeImage::queries() const { return std::min(window_, l_dec_ - made_); }

int32_t SpeculativeImage::Draw(const float* probs, float u) const {
  double mass = 0;
  int32_t last = -1;
  for (int32_t v = 0; v < vocab_; ++v) {
    mass += probs[v];
    if (probs[v] > 0) last = v;
  }
  const double target = u * mass;
  double sum = 0;
  for (int32_t v = 0; v < vocab_; ++v) {
    if (probs[v] <= 0) continue;
    sum += probs[v];
    if (sum > target) return v;
  }
  return std::max(last, 0);  // rounding left none
}

void SpeculativeImage::FillDrafts() {
  const int32_t want = std::max(queries() - 1, 0);
  if (static_cast<int32_t>(drafts_.size()) > want) {  // near the end: fewer queries than predictions
    drafts_.resize(want);
    q_.resize(want);
  }
  while (static_cast<int32_t>(drafts_.size()) < want) {
    const int32_t k = made_ + static_cast<int32_t>(drafts_.size());
    const int32_t forced = Forced(k);
    const float u = SpeculativeUniform(spec_, k, SpeculativeDraw::kRandomDraft, pass_);
    const int32_t v = std::min(static_cast<int32_t>(u * static_cast<float>(vocab_)), vocab_ - 1);
    drafts_.push_back(forced >= 0 ? forced : offset_ + v);
    q_.emplace_back();  // one-hot on the draft
  }
}

void SpeculativeImage::Verify(const float* logits, HostSampler& sampler) {
  ++pass_;
  const int32_t n = queries();
  const int64_t row = vocab_;
  std::vector<int32_t> next_drafts;
  std::vector<std::vector<float>> next_q;
  int32_t rejected = -1;  // output index of the first rejected draft
  for (int32_t j = 0; j < n; ++j) {
    const int32_t k = made_ + j;  // the token output j predicts
    const int32_t forced = Forced(k);
    // p, and the sequential draw of token k from it.
    const int32_t sampled = sampler.Sample(logits + 2 * j * row, logits + (2 * j + 1) * row, spec_,
                                           kernels::SampleUniform(spec_.seed, spec_.image_index, k));
    const std::vector<float>& p = sampler.last_probs();
    if (rejected >= 0) {
      // After the rejection: this prediction drafts token k for the next pass.
      if (forced >= 0) {
        next_drafts.push_back(forced);
        next_q.emplace_back();
      } else {
        next_drafts.push_back(offset_ +
                              Draw(p.data(), SpeculativeUniform(spec_, k, SpeculativeDraw::kPredictedDraft, pass_)));
        next_q.push_back(p);
      }
      continue;
    }
    if (forced >= 0) {
      tokens_[k] = forced;
      continue;
    }
    if (j == n - 1) {  // every draft taken: token k from p directly
      tokens_[k] = offset_ + sampled;
      continue;
    }
    const int32_t draft = drafts_[j];
    const int32_t v = draft - offset_;
    const float q = q_[j].empty() ? 1.0f : q_[j][v];
    ++drafts_proposed_;
    if (SpeculativeUniform(spec_, k, SpeculativeDraw::kAccept, pass_) * q < p[v]) {  // P = min(1, p / q)
      tokens_[k] = draft;
      ++drafts_accepted_;
      continue;
    }
    // Rejected: token k from norm(max(0, p - q)); it is > 0 somewhere, as p(v) < q(v).
    for (int32_t y = 0; y < vocab_; ++y) {
      const float qy = q_[j].empty() ? (y == v ? 1.0f : 0.0f) : q_[j][y];
      residual_[y] = std::max(0.0f, p[y] - qy);
    }
    const bool any = std::any_of(residual_.begin(), residual_.end(), [](float r) { return r > 0; });
    const float u = SpeculativeUniform(spec_, k, SpeculativeDraw::kResidual, pass_);
    tokens_[k] = offset_ + Draw(any ? residual_.data() : p.data(), u);
    rejected = j;
  }
  // Drafts fed after a rejection were never judged; they are proposed all the same (fed, not taken).
  if (rejected >= 0) {
    for (int32_t j = rejected + 1; j < n - 1; ++j) {
      if (Forced(made_ + j) < 0) ++drafts_proposed_;
    }
  }
  made_ += rejected >= 0 ? rejected + 1 : n;
  drafts_ = std::move(next_drafts);
  q_ = std::move(next_q);
  FillDrafts();
}

}  // namespace argen::model
