#include "engine/families/emu3/emu3_shapes.h"

#include "engine/families/emu3/emu3_spec.h"

namespace argen::emu3 {

absl::StatusOr<PublishedEmu3> PublishedEmu3Gen(int32_t width, int32_t height, int32_t image_area) {
  PublishedEmu3 p;
  Emu3Config& c = p.config;
  c.layout = Emu3Layout::kBaai;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 1e6;
  c.vocab_size = 184622;
  c.max_position_embeddings = 9216;
  c.image_area = image_area;
  absl::StatusOr<model::ModelSpec> spec =
      Emu3Spec(c, Emu3TensorNames{"model.", "lm_head.weight", ""}, kPublishedFirstVisualId, kPublishedCodes);
  if (!spec.ok()) return spec.status();
  p.spec = *std::move(spec);
  const auto [w, h] = width == 0 && height == 0 ? Emu3DefaultSize(c.image_area, 8) : std::pair{width, height};
  absl::StatusOr<Emu3Schedule> s =
      MakeEmu3Schedule(Emu3Sizes(c.image_area, 8), w, h, 8, kPublishedRowEndId, Emu3SizeRule(c.image_area, 8));
  if (!s.ok()) return s.status();
  p.schedule = *std::move(s);
  return p;
}

}  // namespace argen::emu3
