#include "engine/families/janus/janus_family.h"

#include <memory>

#include "engine/families/janus/janus_config.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/vq/vq_decoder.h"
#if defined(ARGEN_WITH_CUDA)
#include "engine/vq_cuda/cuda_vq_decoder.h"
#endif

namespace argen::janus {
namespace {

// gen_vision_model.* decodes the codes the engine recorded (gen_embed rows:
// no id mapping, none forced).
absl::StatusOr<model::ImageDecoder> MakeDecoder(const checkpoint::Checkpoint& ckpt, const vq::Vq16Config& config,
                                                const families::DecoderOptions& options) {
  if (options.gpu) {
#if defined(ARGEN_WITH_CUDA)
    vq::CudaVqOptions vq_options;
    vq_options.precision = options.precision == vq::DecoderPrecision::kFp32   ? vq::VqPrecision::kFp32
                           : options.precision == vq::DecoderPrecision::kTf32 ? vq::VqPrecision::kTf32
                                                                              : vq::VqPrecision::kBf16;
    vq_options.fallback_to_fp32 = options.precision == vq::DecoderPrecision::kAuto;
    absl::StatusOr<std::unique_ptr<vq::CudaVqDecoder>> vq = vq::CudaVqDecoder::Create(ckpt, config, vq_options);
    if (!vq.ok()) return vq.status();
    std::shared_ptr<vq::CudaVqDecoder> decoder(std::move(*vq));
    return model::ImageDecoder(
        [decoder](const std::vector<std::vector<int32_t>>& grids) { return decoder->Decode(grids); });
#else
    return absl::UnimplementedError("this build has no CUDA VQ decoder");
#endif
  }
  absl::StatusOr<std::unique_ptr<vq::VqDecoder>> vq = vq::VqDecoder::Create(ckpt, config);
  if (!vq.ok()) return vq.status();
  std::shared_ptr<vq::VqDecoder> decoder(std::move(*vq));
  return model::ImageDecoder(
      [decoder](const std::vector<std::vector<int32_t>>& grids) { return decoder->Decode(grids); });
}

}  // namespace

absl::StatusOr<families::FamilyModel> LoadJanus(const std::string& model_dir) {
  absl::StatusOr<JanusConfig> config = LoadJanusConfig(model_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<model::ModelSpec> spec = JanusSpec(*config);
  if (!spec.ok()) return spec.status();
  families::FamilyModel m;
  m.family = "janus";
  m.spec = *std::move(spec);
  m.image_size = config->gen_vision.image_size;
  m.token_grid = config->gen_vision.token_grid();
  m.image_tokens = config->gen_vision.image_tokens();
  m.grid = sparse::GridGeometry{m.token_grid, 0, m.image_tokens};  // a square grid without row breaks
  // N_r: the window measured best on the shipped Janus-layout model, 64 keys = 2 2/3 rows of its
  // 24-wide grid (docs/quality.md "N_r study"), in rows of this grid.
  m.grid.default_n_recent = sparse::RecentRowsWindow(m.grid, 8, 3);
  // Its one size (a request for another is refused, listing it).
  m.image_layouts = {
      engine::ImageLayout{m.image_size, m.image_size, m.token_grid, m.token_grid, m.image_tokens, m.grid}};
  m.max_position_embeddings = config->language.max_position_embeddings;
  m.default_sampling = engine::SamplingParams{};  // Janus-Pro's generation script: cfg 5, temperature 1
  m.make_prompt = [model_dir, system_prompt = config->system_prompt] {
    return TokenizerPromptEncoder(model_dir, system_prompt);
  };
  const vq::Vq16Config vq = config->gen_vision;
  m.make_decoder = [vq](const checkpoint::Checkpoint& ckpt, const families::DecoderOptions& options) {
    return MakeDecoder(ckpt, vq, options);
  };
  return m;
}

families::Family JanusFamily() {
  families::Family f;
  f.name = "janus";
  f.matches = "model_type multi_modality";
  f.recognises = [](const families::ConfigIdentity& id) { return id.model_type == "multi_modality"; };
  f.load = [name = f.name](const std::string& model_dir,
                           const families::FamilyOptions& options) -> absl::StatusOr<families::FamilyModel> {
    if (absl::Status s = families::CheckFamilyOptions(name, options, {}); !s.ok()) return s;  // Janus takes none
    return LoadJanus(model_dir);
  };
  return f;
}

}  // namespace argen::janus
