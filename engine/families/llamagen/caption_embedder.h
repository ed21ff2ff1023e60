// LlamaGen t2i's caption embedder (gpt.py CaptionEmbedder) on the host: the
// prefix embeddings of a CFG pair from the caption's T5 features.
//   cond:   cap_proj(features), cap_proj = fc2(gelu_tanh(fc1(x))), no biases
//   uncond: cap_proj(uncond_embedding), the learned [cls_token_num, caption_dim]
//           buffer that generate.py puts in place of the caption.
// sample_t2i.py left-pads the caption into the last n of the cls_token_num
// slots and masks the padded slots out of attention for both rows; the
// caption slots are position-free (cos = sin = 0), so the n real slots alone,
// and the uncond row's same n slots (uncond_embedding's last n rows), attend
// exactly as the padded sequence does.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"

namespace argen::llamagen {

struct PrefixEmbeddings {
  int32_t tokens = 0;         // n: caption tokens (with </s>)
  std::vector<float> cond;    // [n x dim]
  std::vector<float> uncond;  // [n x dim]
};

class CaptionEmbedder {
 public:
  // Reads cls_embedding.cap_proj.fc1.weight [dim, caption_dim],
  // cls_embedding.cap_proj.fc2.weight [dim, dim] and
  // cls_embedding.uncond_embedding [slots, caption_dim] from the GPT
  // checkpoint. Errors name the tensor.
  static absl::StatusOr<CaptionEmbedder> Load(const checkpoint::Checkpoint& gpt, int32_t caption_dim, int32_t dim,
                                              int32_t slots);

  int32_t slots() const { return slots_; }
  int32_t caption_dim() const { return caption_dim_; }
  int32_t dim() const { return dim_; }

  // `features`: [n x caption_dim], 1 <= n <= slots (InvalidArgument otherwise).
  absl::StatusOr<PrefixEmbeddings> Embed(const std::vector<float>& features) const;

 private:
  int32_t caption_dim_ = 0, dim_ = 0, slots_ = 0;
  std::vector<float> fc1_, fc2_;
  std::vector<float> uncond_;  // cap_proj(uncond_embedding): [slots x dim]
  void Project(const float* x, int64_t rows, float* out) const;
};

}  // namespace argen::llamagen
