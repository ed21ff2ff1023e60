#include "engine/families/anole/anole_shapes.h"

#include "engine/families/anole/anole_family.h"
#include "engine/families/anole/meta_params.h"
#include "engine/families/lumina/lumina_shapes.h"
#include "engine/families/lumina/lumina_spec.h"

namespace argen::anole {
namespace {

// Anole-7b-v0.1's models/7b/params.json, the fields argen reads (GAIR-NLP/anole's
// bin_to_pth.py: 32 heads, dim 4096, qk_norm; the rest as Chameleon-7B's: 11008 =
// 256 * ceil(int(8 * 4096 / 3) / 256)).
constexpr char kParams[] = R"({"model_parallel_size": 1, "model": {"dim": 4096, "n_layers": 32, "n_heads": 32,
  "n_kv_heads": null, "vocab_size": 65536, "multiple_of": 256, "ffn_dim_multiplier": 1.0, "norm_eps": 1e-05,
  "rope_theta": 10000.0, "qk_normalization": true, "swin_norm": false}})";

}  // namespace

absl::StatusOr<PublishedAnole> PublishedAnole7B() {
  PublishedAnole p;
  absl::StatusOr<lumina::LuminaConfig> config = ParseMetaParams(kParams, "Anole-7b params.json");
  if (!config.ok()) return config.status();
  p.config = *std::move(config);
  // Chameleon's image codes are the same ids in Lumina-mGPT's vocabulary (it fine-tunes Chameleon).
  absl::StatusOr<model::ModelSpec> spec = lumina::LuminaSpec(p.config, lumina::kPublishedFirstImageId,
                                                             lumina::kPublishedImageTokens, lumina::QkNormRows{1, 1});
  if (!spec.ok()) return spec.status();
  p.spec = *std::move(spec);
  p.grid = AnoleGrid();
  return p;
}

}  // namespace argen::anole
