#include "engine/families/nextstep/token_sampler.h"

#include <cblas.h>

#include <algorithm>

#include "engine/families/nextstep/nextstep_spec.h"

namespace argen::nextstep {

absl::StatusOr<std::unique_ptr<NextStepTokenSampler>> NextStepTokenSampler::Load(
    const checkpoint::Checkpoint& checkpoint, const NextStepConfig& config) {
  const model::LinearRef projector = ImageOutProjector(config);
  absl::StatusOr<std::vector<float>> weight = checkpoint.LoadF32(projector.weight.name, projector.weight.shape);
  if (!weight.ok()) return weight.status();
  absl::StatusOr<std::vector<float>> bias = checkpoint.LoadF32(projector.bias.name, projector.bias.shape);
  if (!bias.ok()) return bias.status();
  const FlowHeadDims dims{config.token_dim(), config.hidden_size, config.fm_head_dim, config.fm_head_layers};
  absl::StatusOr<std::unique_ptr<FlowHead>> head =
      FlowHead::Load([&checkpoint](const std::string& name,
                                   const std::vector<int64_t>& shape) { return checkpoint.LoadF32(name, shape); },
                     kFlowHeadPrefix, dims);
  if (!head.ok()) return head.status();
  return std::unique_ptr<NextStepTokenSampler>(
      new NextStepTokenSampler(*std::move(head), *std::move(weight), *std::move(bias), config.hidden_size));
}

void NextStepTokenSampler::Project(const float* h, int32_t n, float* out) const {
  for (int32_t r = 0; r < n; ++r) std::copy(bias_.begin(), bias_.end(), out + int64_t{r} * hidden_);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, hidden_, hidden_, 1.0f, h, hidden_, weight_.data(), hidden_,
              1.0f, out, hidden_);
}

absl::Status NextStepTokenSampler::Sample(const float* cond, const float* uncond, int32_t pairs,
                                          const FlowSampling& sampling, const NoiseFn& noise, float* tokens) const {
  if (pairs <= 0) return absl::OkStatus();
  const size_t rows = static_cast<size_t>(pairs) * hidden_;
  std::vector<float> c(rows), u(uncond != nullptr ? rows : 0);
  Project(cond, pairs, c.data());
  if (uncond != nullptr) Project(uncond, pairs, u.data());
  return head_->Sample(c.data(), uncond != nullptr ? u.data() : nullptr, pairs, sampling, noise, tokens);
}

}  // namespace argen::nextstep
