#include "engine/families/llamagen/caption_embedder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/families/llamagen/host_math.h"

namespace argen::llamagen {

absl::StatusOr<CaptionEmbedder> CaptionEmbedder::Load(const checkpoint::Checkpoint& gpt, int32_t caption_dim,
                                                      int32_t dim, int32_t slots) {
  CaptionEmbedder e;
  e.caption_dim_ = caption_dim;
  e.dim_ = dim;
  e.slots_ = slots;
  absl::StatusOr<std::vector<float>> fc1 = gpt.LoadF32("cls_embedding.cap_proj.fc1.weight", {dim, caption_dim});
  if (!fc1.ok()) return fc1.status();
  absl::StatusOr<std::vector<float>> fc2 = gpt.LoadF32("cls_embedding.cap_proj.fc2.weight", {dim, dim});
  if (!fc2.ok()) return fc2.status();
  absl::StatusOr<std::vector<float>> uncond = gpt.LoadF32("cls_embedding.uncond_embedding", {slots, caption_dim});
  if (!uncond.ok()) return uncond.status();
  e.fc1_ = *std::move(fc1);
  e.fc2_ = *std::move(fc2);
  e.uncond_.resize(static_cast<size_t>(slots) * dim);
  e.Project(uncond->data(), slots, e.uncond_.data());
  return e;
}

void CaptionEmbedder::Project(const float* x, int64_t rows, float* out) const {
  std::vector<float> hidden(static_cast<size_t>(rows) * dim_);
  HostLinear(x, rows, fc1_, caption_dim_, dim_, hidden.data());
  for (float& h : hidden) h = GeluTanh(h);
  HostLinear(hidden.data(), rows, fc2_, dim_, dim_, out);
}

absl::StatusOr<PrefixEmbeddings> CaptionEmbedder::Embed(const std::vector<float>& features) const {
  if (features.empty() || features.size() % caption_dim_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat("caption features: ", features.size(),
                                                   " values are not a positive number of rows of ", caption_dim_));
  }
  const int32_t n = static_cast<int32_t>(features.size() / caption_dim_);
  if (n > slots_) {
    return absl::InvalidArgumentError(
        absl::StrCat("caption features: ", n, " tokens, more than the ", slots_, " caption slots"));
  }
  PrefixEmbeddings p;
  p.tokens = n;
  p.cond.resize(static_cast<size_t>(n) * dim_);
  Project(features.data(), n, p.cond.data());
  // Left padding puts the caption in the last n slots; the uncond row keeps the same n.
  p.uncond.assign(uncond_.begin() + static_cast<size_t>(slots_ - n) * dim_, uncond_.end());
  return p;
}

}  // namespace argen::llamagen
