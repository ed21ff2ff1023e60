#include "engine/families/lumina/lumina_shapes.h"

#include "absl/strings/str_cat.h"
#include "engine/families/lumina/lumina_spec.h"

namespace argen::lumina {

absl::StatusOr<PublishedLumina> PublishedLumina7B(int32_t target) {
  if (target != 512 && target != 768 && target != 1024) {
    return absl::InvalidArgumentError(absl::StrCat("Lumina-mGPT-7B target: expected 512, 768 or 1024, got ", target));
  }
  PublishedLumina p;
  LuminaConfig& c = p.config;
  c.hidden_size = 4096;
  c.intermediate_size = 11008;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 32;
  c.head_dim = 128;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.vocab_size = 65536;
  c.max_position_embeddings = target == 1024 ? 8192 : 4096;
  c.model_parallel_size = 1;
  absl::StatusOr<model::ModelSpec> spec =
      LuminaSpec(c, kPublishedFirstImageId, kPublishedImageTokens, QkNormRows{1, 1});  // Lumina's [1, 128] layout
  if (!spec.ok()) return spec.status();
  p.spec = *std::move(spec);
  absl::StatusOr<LuminaSchedule> s = MakeSchedule(CropSizeList(target), target, target, kPublishedNewLineId);
  if (!s.ok()) return s.status();
  p.schedule = *std::move(s);
  return p;
}

}  // namespace argen::lumina
