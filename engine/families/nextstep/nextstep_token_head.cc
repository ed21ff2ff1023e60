#include "engine/families/nextstep/nextstep_token_head.h"

#include "absl/strings/str_cat.h"
#include "engine/families/nextstep/nextstep_spec.h"

namespace argen::nextstep {

absl::StatusOr<std::shared_ptr<const NextStepTokenHead>> NextStepTokenHead::Load(
    const checkpoint::Checkpoint& checkpoint, const NextStepConfig& config, const FlowSampling& sampling) {
  const FlowHeadDims dims{config.token_dim(), config.hidden_size, config.fm_head_dim, config.fm_head_layers};
  absl::StatusOr<std::unique_ptr<FlowHead>> head =
      FlowHead::Load([&checkpoint](const std::string& name,
                                   const std::vector<int64_t>& shape) { return checkpoint.LoadF32(name, shape); },
                     kFlowHeadPrefix, dims);
  if (!head.ok()) return head.status();
  return std::shared_ptr<const NextStepTokenHead>(new NextStepTokenHead(*std::move(head), sampling));
}

absl::Status NextStepTokenHead::Draw(std::span<const float> cond, std::span<const float> uncond,
                                     std::span<const model::SamplingSpec> sampling,
                                     std::span<const int32_t> token_index, std::span<float> out) const {
  const size_t n = sampling.size(), C = condition_width(), D = token_dim();
  if (token_index.size() != n || cond.size() != n * C || uncond.size() != n * C || out.size() != n * D) {
    return absl::InvalidArgumentError(absl::StrCat("NextStep token head: ", n, " output points with ", cond.size(),
                                                   " / ", uncond.size(), " condition floats, ", token_index.size(),
                                                   " token indices and room for ", out.size(), " token floats"));
  }
  // One point at a time: each pair has its own guidance weight and noise key.
  for (size_t i = 0; i < n; ++i) {
    FlowSampling s = sampling_;
    s.cfg = sampling[i].cfg_weight;
    const NoiseFn noise = KeyedNoise(sampling[i].seed, {static_cast<uint32_t>(sampling[i].image_index)},
                                     static_cast<uint32_t>(token_index[i]), static_cast<int32_t>(D));
    if (absl::Status st = head_->Sample(cond.data() + i * C, uncond.data() + i * C, 1, s, noise, out.data() + i * D);
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace argen::nextstep
