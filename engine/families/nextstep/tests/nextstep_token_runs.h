// Test support for NextStep-1's continuous-token feedback on any backend
// (tiny checkpoint tests/goldens/tiny/tiny-nextstep): a backend's step by
// hand for a few images, token t fed to the step that draws token t + 1
// either as the pair's kept vector (kMadeVector), as the run's own draws
// given back by the host, or as given vectors (teacher forcing: every backend
// sees the same history, so a token's error is that step's alone); and a
// token head wrapper that records the conditions it is handed and can
// perturb them or its tokens (how an error grows through the feedback).
// Used by nextstep_feedback_test (CPU) and cuda_nextstep_test (device).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/families/nextstep/nextstep_prompt.h"
#include "engine/families/nextstep/nextstep_spec.h"
#include "engine/families/nextstep/nextstep_token_head.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend.h"
#include "engine/model/step_plan.h"
#include "engine/model/token_head.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"

namespace argen::nextstep::token_runs {

// Per image, its tokens [image_tokens x token_dim].
using ImageTokens = std::vector<std::vector<float>>;

// ||got - want|| / ||want|| (infinite when got holds a NaN or Inf).
inline double RelativeRowError(const float* got, const float* want, int32_t n) {
  double num = 0, den = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    den += double{want[i]} * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Per image and token: the relative error of token t of `got` against `want`.
inline std::vector<std::vector<double>> TokenErrors(const ImageTokens& got, const ImageTokens& want, int32_t dim) {
  std::vector<std::vector<double>> e(want.size());
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    for (size_t t = 0; (t + 1) * dim <= want[i].size() && (t + 1) * dim <= got[i].size(); ++t) {
      e[i].push_back(RelativeRowError(got[i].data() + t * dim, want[i].data() + t * dim, dim));
    }
  }
  return e;
}

// The tiny checkpoint's pieces for a caption (the family's default negative prompt).
struct TinyNextStep {
  NextStepConfig config;
  model::ModelSpec spec;
  std::shared_ptr<const checkpoint::Checkpoint> checkpoint;
  std::shared_ptr<const NextStepTokenHead> head;  // the family's sampler settings (FlowSampling{})
  NextStepPromptIds prompt;
  int32_t image_tokens() const { return config.latent_size * config.latent_size; }
  int32_t token_dim() const { return spec.output.token_dim; }

  static absl::StatusOr<TinyNextStep> Load(const std::string& dir, const std::string& caption) {
    TinyNextStep m;
    absl::StatusOr<NextStepConfig> config = LoadNextStepConfig(dir);
    if (!config.ok()) return config.status();
    m.config = *config;
    absl::StatusOr<model::ModelSpec> spec = NextStepSpec(m.config);
    if (!spec.ok()) return spec.status();
    m.spec = *spec;
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> opened = checkpoint::Checkpoint::Open(dir);
    if (!opened.ok()) return opened.status();
    m.checkpoint = *std::move(opened);
    absl::StatusOr<std::shared_ptr<const NextStepTokenHead>> head =
        NextStepTokenHead::Load(*m.checkpoint, m.config, FlowSampling{});
    if (!head.ok()) return head.status();
    m.head = *head;
    absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> tok = LoadNextStepTokenizer(dir);
    if (!tok.ok()) return tok.status();
    absl::StatusOr<NextStepTokenIds> ids = FindNextStepTokens(**tok, m.config);
    if (!ids.ok()) return ids.status();
    absl::StatusOr<NextStepPromptIds> prompt =
        BuildNextStepPrompt(**tok, *ids, caption, "", m.config.latent_size, m.config.latent_size);
    if (!prompt.ok()) return prompt.status();
    m.prompt = *prompt;
    return m;
  }
};

// Deterministic direction e (uniform in [-1, 1) per element) hashed from
// (salt, image, token); x += rel * ||x|| * e / ||e||: a relative error of
// exactly `rel` whose direction does not depend on x.
inline void Perturb(float* x, int32_t n, double rel, uint32_t salt, int32_t image, int32_t token) {
  if (rel == 0) return;
  std::vector<double> e(n);
  uint32_t s = salt * 2654435761u ^ (static_cast<uint32_t>(image) * 40503u + static_cast<uint32_t>(token) * 977u + 1u);
  double en = 0, xn = 0;
  for (int32_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    e[i] = static_cast<double>(s >> 8) / 8388608.0 - 1.0;
    en += e[i] * e[i];
    xn += double{x[i]} * x[i];
  }
  const double k = rel * std::sqrt(xn) / std::sqrt(std::max(en, 1e-30));
  for (int32_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] + k * e[i]);
}

// Wraps a token head: records the conditions of every (image, token) it
// draws and can perturb, for the chosen tokens, the conditions before the
// draw and the token after it. The device's own head is its flow_matching().
class ProbeHead final : public model::TokenHead {
 public:
  struct Perturbation {
    double cond_rel = 0;      // relative error added to each cond and uncond condition
    double token_rel = 0;     // relative error added to each drawn token
    int32_t only_token = -1;  // >= 0: that token index alone; -1: every token
  };
  ProbeHead(std::shared_ptr<const model::TokenHead> inner, Perturbation p) : inner_(std::move(inner)), p_(p) {}

  int32_t condition_width() const override { return inner_->condition_width(); }
  int32_t token_dim() const override { return inner_->token_dim(); }
  const model::FlowMatchingHeadDesc* flow_matching() const override { return inner_->flow_matching(); }
  absl::Status Draw(std::span<const float> cond, std::span<const float> uncond,
                    std::span<const model::SamplingSpec> sampling, std::span<const int32_t> token_index,
                    std::span<float> out) const override {
    const int32_t W = condition_width(), D = token_dim();
    std::vector<float> c(cond.begin(), cond.end()), u(uncond.begin(), uncond.end());
    for (size_t i = 0; i < sampling.size(); ++i) {
      if (!Chosen(token_index[i])) continue;
      const int32_t image = sampling[i].image_index;
      Perturb(c.data() + i * W, W, p_.cond_rel, 1, image, token_index[i]);
      Perturb(u.data() + i * W, W, p_.cond_rel, 2, image, token_index[i]);
    }
    if (absl::Status s = inner_->Draw(c, u, sampling, token_index, out); !s.ok()) return s;
    for (size_t i = 0; i < sampling.size(); ++i) {
      const int32_t image = sampling[i].image_index, t = token_index[i];
      if (Chosen(t)) Perturb(out.data() + i * D, D, p_.token_rel, 3, image, t);
      std::vector<float>& rec = conditions_[{image, t}];
      rec.assign(c.begin() + i * W, c.begin() + (i + 1) * W);  // cond, then uncond (as handed to the head)
      rec.insert(rec.end(), u.begin() + i * W, u.begin() + (i + 1) * W);
    }
    return absl::OkStatus();
  }
  // (image index, token index) -> the cond then the uncond condition [2 x condition_width].
  const std::map<std::pair<int32_t, int32_t>, std::vector<float>>& conditions() const { return conditions_; }

 private:
  bool Chosen(int32_t t) const { return p_.only_token < 0 || p_.only_token == t; }
  std::shared_ptr<const model::TokenHead> inner_;
  Perturbation p_;
  mutable std::map<std::pair<int32_t, int32_t>, std::vector<float>> conditions_;
};

// Rounds every 2-D tensor (the matrices and tables) to bf16 as the CUDA
// backend stores them; vectors (norms, biases) stay f32.
class Bf16MatrixWeights final : public model::WeightSource {
 public:
  explicit Bf16MatrixWeights(std::shared_ptr<const model::WeightSource> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<std::vector<float>> Load(const model::TensorRef& t) const override {
    absl::StatusOr<std::vector<float>> v = inner_->Load(t);
    if (v.ok() && t.shape.size() >= 2) {
      for (float& x : *v) x = RoundToBf16(x);
    }
    return v;
  }
  absl::Status ReadRows(const model::TensorRef& t, const int32_t* ids, int64_t n, float* out) const override {
    absl::Status s = inner_->ReadRows(t, ids, n, out);
    if (s.ok()) {
      for (int64_t i = 0; i < n * t.row_elements(); ++i) out[i] = RoundToBf16(out[i]);
    }
    return s;
  }

 private:
  std::shared_ptr<const model::WeightSource> inner_;
};

// How token t reaches the step that draws token t + 1.
struct Feed {
  enum class Kind {
    kKept,    // the pair's kept vector (kMadeVector)
    kOwn,     // the run's own draw, given back by the host (kTokenVector)
    kForced,  // `forced`'s token t (kTokenVector): teacher forcing
  };
  Kind kind = Kind::kKept;
  const ImageTokens* forced = nullptr;  // kForced: per image [image_tokens x token_dim]
  bool round_to_bf16 = false;           // given vectors rounded to bf16 (what the device feeds vector_in)
  int32_t per_step = 1;                 // kForced: tokens given a step (consecutive decode queries)
  bool share_prompts = false;           // images after the first read image 0's prompt KV (the engine's layout)
};

// `images` pairs (image_index 0 .. images - 1, `sampling`'s seed and cfg)
// from the prompt rows to the last token, every pair in every step; each
// image's drawn tokens. All in one KvManager on `be`, freed after.
inline absl::StatusOr<ImageTokens> RunImages(model::Backend& be, const TinyNextStep& m, int32_t images,
                                             const model::SamplingSpec& sampling, const Feed& feed) {
  const int32_t tokens = m.image_tokens(), D = m.token_dim();
  if (feed.kind == Feed::Kind::kForced &&
      (feed.forced == nullptr || static_cast<int32_t>(feed.forced->size()) < images)) {
    return absl::InvalidArgumentError("RunImages: teacher forcing needs the forced tokens of every image");
  }
  kv::KvManager kv(be);
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, tokens);
  if (!dense.ok()) return dense.status();
  const std::vector<int32_t>* ids[2] = {&m.prompt.cond, &m.prompt.uncond};
  std::vector<model::RowId> rows;
  const auto free_rows = [&] {
    for (model::RowId r : rows) kv.FreeRow(r);
  };
  for (int32_t i = 0; i < images; ++i) {
    for (int k = 0; k < 2; ++k) {
      absl::StatusOr<model::RowId> r = feed.share_prompts && i > 0
                                           ? kv.AllocateSharingRow(rows[k], *dense)
                                           : kv.AllocateRow(static_cast<int32_t>(ids[k]->size()), *dense);
      if (!r.ok()) {
        free_rows();
        return r.status();
      }
      rows.push_back(*r);
    }
  }
  ImageTokens drawn(images, std::vector<float>(static_cast<size_t>(tokens) * D));
  std::vector<model::SamplingSpec> pair_sampling(images, sampling);
  for (int32_t i = 0; i < images; ++i) pair_sampling[i].image_index = i;
  std::vector<int32_t> sampled(static_cast<size_t>(images) * tokens);
  std::vector<float> out(static_cast<size_t>(images) * tokens * D), given(D);
  model::StepPlanBuilder builder;
  // The prompt step: token 0 of every image.
  for (int32_t i = 0; i < images; ++i) {
    for (int k = 0; k < 2; ++k) {
      builder.AddRow(rows[2 * i + k]);
      if (!(feed.share_prompts && i > 0)) builder.AddPromptQueries(*ids[k], 0, static_cast<int32_t>(ids[k]->size()));
    }
    builder.AddSampling(pair_sampling[i]);
  }
  absl::Status s = be.Forward(builder.Plan(), {{sampled.data(), static_cast<size_t>(images)}, nullptr, out.data()});
  if (!s.ok()) {
    free_rows();
    return s;
  }
  for (int32_t i = 0; i < images; ++i) std::copy_n(out.begin() + i * D, D, drawn[i].begin());
  // Token t (and the next per_step - 1 when forced) in, token t + 1 ... out.
  for (int32_t t = 0; t + 1 < tokens;) {
    const int32_t n = feed.kind == Feed::Kind::kForced ? std::min(feed.per_step, tokens - 1 - t) : 1;
    builder.Clear();
    for (int32_t i = 0; i < images; ++i) {
      for (int k = 0; k < 2; ++k) {
        builder.AddRow(rows[2 * i + k]);
        for (int32_t j = 0; j < n; ++j) {
          if (feed.kind == Feed::Kind::kKept) {
            builder.AddMadeVectorQuery(t + j);
            continue;
          }
          const std::vector<float>& from = feed.kind == Feed::Kind::kForced ? (*feed.forced)[i] : drawn[i];
          std::copy_n(from.begin() + static_cast<size_t>(t + j) * D, D, given.begin());
          if (feed.round_to_bf16) {
            for (float& x : given) x = RoundToBf16(x);
          }
          builder.AddTokenVectorQuery(given, t + j);  // copied into the plan
        }
      }
      builder.AddSampling(pair_sampling[i]);
    }
    s = be.Forward(builder.Plan(), {{sampled.data(), static_cast<size_t>(images) * n}, nullptr, out.data()});
    if (!s.ok()) {
      free_rows();
      return absl::Status(s.code(), absl::StrCat("token ", t + 1, ": ", s.message()));
    }
    // Output points in plan order: image i's n tokens, then image i + 1's.
    for (int32_t i = 0; i < images; ++i) {
      for (int32_t j = 0; j < n; ++j) {
        std::copy_n(out.begin() + (static_cast<size_t>(i) * n + j) * D, D,
                    drawn[i].begin() + static_cast<size_t>(t + 1 + j) * D);
      }
    }
    t += n;
  }
  free_rows();
  return drawn;
}

}  // namespace argen::nextstep::token_runs
