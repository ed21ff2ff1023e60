// Speculative Jacobi decoding (SJD: Teng et al., "Accelerating Auto-regressive
// Text-to-Image Generation with Training-free Speculative Jacobi Decoding",
// ICLR 2025; docs/serving.md) for one image: which decode queries its pair
// feeds at each step and what it makes of their outputs. Lossless: the
// tokens are distributed exactly as sequential sampling's (engine/model/
// sampler.h), whatever the drafts.
//
// A step (a "pass") with `made` tokens final feeds n = min(window, l_dec -
// made) queries at decode indices made - 1 .. made + n - 2: the last made
// token, then drafts d_k for tokens k = made .. made + n - 2. Output j (of
// query j) is token made + j's distribution p (CFG, temperature, top-k,
// top-p exactly as HostSampler draws), conditioned on the inputs before it.
// Left to right, draft d_k (drawn from its draft distribution q_k) is
// accepted with probability min(1, p(d_k) / q_k(d_k)); the first rejected
// one is resampled from norm(max(0, p - q_k)) and ends the pass's tokens; if
// every draft is accepted, the last output's token is sampled from p
// directly. Every pass thus makes 1 .. n tokens. The outputs after a
// rejection (conditioned on the rejected draft) are the next pass's drafts
// for their tokens, drawn from them (q = that p: SJD's "Jacobi states");
// the other drafts are uniform random image tokens (q one-hot on the draft,
// SJD's initialisation: acceptance p(d), residual p without d). A forced
// token (a family's fixed tokens) is its own draft and always taken. The
// next pass starts at the first token not made: the decode indices from the
// rejected draft's on are fed again (StepPlan::rewinds), overwriting K/V
// computed from drafts.
//
// Randomness is keyed like sampling (kernels/sampling_rng.h): a token
// sampled from p directly uses SampleUniform(seed, image, token), the
// sequential draw, so a window of 1 makes exactly sequential decoding's
// tokens; acceptance draws, residual draws and drafts use Philox counters of
// their own (purpose, pass), so the same (seed, window) gives the same image.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/sampler.h"

namespace argen::model {

// The keyed uniform of one speculative draw.
enum class SpeculativeDraw : uint32_t { kAccept = 1, kResidual = 2, kPredictedDraft = 3, kRandomDraft = 4 };
float SpeculativeUniform(const SamplingSpec& spec, int32_t token, SpeculativeDraw draw, int32_t pass);

class SpeculativeImage {
 public:
  // Tokens are input ids: a sampled logit v is recorded as sampled_offset +
  // v; forced[k] >= 0 (or forced empty: none) is token k's forced id.
  // `vocab` logits per output; `spec` the pair's sampling.
  SpeculativeImage(int32_t l_dec, int32_t window, int32_t vocab, int32_t sampled_offset,
                   std::span<const int32_t> forced, const SamplingSpec& spec);

  // Token 0 (from the prefill) is made; drafts the first pass's.
  void Start(int32_t token0);

  int32_t made() const { return made_; }
  bool done() const { return made_ == l_dec_; }
  // Tokens by index (input ids), the first made() final.
  const std::vector<int32_t>& tokens() const { return tokens_; }

  // The next pass's queries: n of them, at decode indices first_index() + j,
  // query j's input id input(j).
  int32_t queries() const;
  int32_t first_index() const { return made_ - 1; }
  int32_t input(int32_t j) const { return j == 0 ? tokens_[made_ - 1] : drafts_[j - 1]; }

  // The next pass ran: `logits` holds its queries() output points' rows, point j's cond row at 2j and
  // uncond row at 2j + 1 (each `vocab` floats). Makes its tokens and drafts
  // the next pass's. `sampler` is scratch of this vocabulary.
  void Verify(const float* logits, HostSampler& sampler);
  int32_t passes() const { return pass_; }  // Verify calls so far

  // Drafts fed and accepted so far (forced tokens are not drafts).
  int64_t drafts_proposed() const { return drafts_proposed_; }
  int64_t drafts_accepted() const { return drafts_accepted_; }

 private:
  int32_t Forced(int32_t k) const { return k < static_cast<int32_t>(forced_.size()) ? forced_[k] : -1; }
  // Index of a draw from `probs` with uniform u (HostSampler's walk: the
  // first index whose running sum exceeds u * mass).
  int32_t Draw(const float* probs, float u) const;
  // Drafts for tokens made_ + drafts_.size() .. up to the next pass's need: forced or uniform.
  void FillDrafts();

  int32_t l_dec_, window_, vocab_, offset_;
  std::vector<int32_t> forced_;
  SamplingSpec spec_;
  std::vector<int32_t> tokens_;  // [l_dec] input ids, -1 where not made
  int32_t made_ = 0;
  int32_t pass_ = 0;  // passes verified (the draws' key; 0: drafts made at Start)
  // drafts_[j]: the input id drafted for token made_ + j; its distribution
  // q_[j] ([vocab]), or empty where one-hot on the draft (uniform random or forced).
  std::vector<int32_t> drafts_;
  std::vector<std::vector<float>> q_;
  std::vector<float> residual_;
  int64_t drafts_proposed_ = 0, drafts_accepted_ = 0;
};

}  // namespace argen::model
