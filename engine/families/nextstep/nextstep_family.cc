#include "engine/families/nextstep/nextstep_family.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/families/nextstep/nextstep_prompt.h"
#include "engine/families/nextstep/nextstep_spec.h"
#include "engine/families/nextstep/nextstep_token_head.h"
#include "engine/families/nextstep/nextstep_vae.h"
#include "engine/token_vectors.h"
#if defined(ARGEN_WITH_CUDA)
#include "engine/vq_cuda/cuda_vae_decoder.h"
#endif

namespace argen::nextstep {
namespace {

// The engine's recorded tokens (token_dim words a token, engine/token_vectors.h)
// of one grid x grid image each, as token grids.
absl::StatusOr<std::vector<TokenGrid>> TokenGrids(const std::vector<std::vector<int32_t>>& token_grids, int32_t grid,
                                                  int32_t token_dim) {
  const size_t words = static_cast<size_t>(grid) * grid * token_dim;
  std::vector<TokenGrid> grids;
  grids.reserve(token_grids.size());
  for (size_t i = 0; i < token_grids.size(); ++i) {
    if (token_grids[i].size() != words) {
      return absl::InvalidArgumentError(absl::StrCat("token grid ", i, ": ", token_grids[i].size(),
                                                     " words, a NextStep-1 image is ", words, " (", grid, " x ", grid,
                                                     " tokens of ", token_dim, " floats)"));
    }
    grids.push_back(TokenGrid{grid, grid, engine::TokenVectorFloats(token_grids[i])});
  }
  return grids;
}

// The VAE decoder on the GPU (engine/vq_cuda/cuda_vae_decoder.h): fp32 by
// default (vq_precision auto or fp32), TF32 GEMMs with tf32; no bf16 path.
// The latents are built and the pixels converted on the host, as on the CPU.
absl::StatusOr<model::ImageDecoder> MakeGpuDecoder(const std::string& vae_dir, const NextStepVaeConfig& vae,
                                                   const NextStepConfig& config,
                                                   const families::DecoderOptions& options) {
#if defined(ARGEN_WITH_CUDA)
  if (options.precision == vq::DecoderPrecision::kBf16) {
    return absl::UnimplementedError(
        "NextStep-1's GPU VAE decoder runs fp32 or tf32 (no bf16 path); set vq_precision auto, fp32 or tf32");
  }
  absl::StatusOr<vqgan::VqganDecoderWeights> weights = LoadNextStepVaeWeights(vae_dir, vae);
  if (!weights.ok()) return weights.status();
  const int32_t grid = config.latent_size, patch = config.latent_patch_size, side = grid * patch;
  vq::CudaVaeOptions gpu_options;
  gpu_options.tf32 = options.precision == vq::DecoderPrecision::kTf32;
  absl::StatusOr<std::unique_ptr<vq::CudaVaeDecoder>> made =
      vq::CudaVaeDecoder::Create(*weights, FluxDecoderConfig(vae), vqgan::DecodeLimits{side * side, side}, gpu_options);
  if (!made.ok()) return made.status();
  std::shared_ptr<vq::CudaVaeDecoder> decoder = *std::move(made);  // calls serialise
  const int32_t token_dim = vae.z_channels * patch * patch, pixels = patch * vae.downsample();
  return model::ImageDecoder(
      [decoder, vae, grid, patch, token_dim,
       pixels](const std::vector<std::vector<int32_t>>& token_grids) -> absl::StatusOr<std::vector<engine::RgbImage>> {
        absl::StatusOr<std::vector<TokenGrid>> grids = TokenGrids(token_grids, grid, token_dim);
        if (!grids.ok()) return grids.status();
        std::vector<vqgan::LatentGrid> latents;
        latents.reserve(grids->size());
        for (size_t i = 0; i < grids->size(); ++i) {
          absl::StatusOr<vqgan::LatentGrid> latent = NextStepLatent((*grids)[i], i, vae, patch);
          if (!latent.ok()) return latent.status();
          latents.push_back(*std::move(latent));
        }
        std::vector<std::vector<float>> chw;
        if (absl::Status s = decoder->DecodeToFloat(latents, &chw); !s.ok()) return s;
        std::vector<engine::RgbImage> images;
        images.reserve(chw.size());
        for (size_t i = 0; i < chw.size(); ++i) {
          images.push_back(
              NextStepPixelsToRgb(chw[i].data(), (*grids)[i].grid_h * pixels, (*grids)[i].grid_w * pixels));
        }
        return images;
      });
#else
  (void)vae_dir, (void)vae, (void)config, (void)options;
  return absl::UnimplementedError("this build has no GPU VAE decoder for NextStep-1 (no CUDA); set vq_backend cpu");
#endif
}

// The VAE decoder over the engine's recorded tokens, on the CPU (the
// reference) or the GPU.
absl::StatusOr<model::ImageDecoder> MakeDecoder(const std::string& vae_dir, const NextStepVaeConfig& vae,
                                                const NextStepConfig& config, const families::DecoderOptions& options) {
  if (options.gpu) return MakeGpuDecoder(vae_dir, vae, config, options);
  const int32_t grid = config.latent_size;
  absl::StatusOr<std::unique_ptr<NextStepVaeDecoder>> made =
      NextStepVaeDecoder::Create(vae_dir, vae, config.latent_patch_size, grid);
  if (!made.ok()) return made.status();
  std::shared_ptr<NextStepVaeDecoder> decoder = *std::move(made);  // Decode serialises its calls
  return model::ImageDecoder(
      [decoder,
       grid](const std::vector<std::vector<int32_t>>& token_grids) -> absl::StatusOr<std::vector<engine::RgbImage>> {
        absl::StatusOr<std::vector<TokenGrid>> grids = TokenGrids(token_grids, grid, decoder->token_dim());
        if (!grids.ok()) return grids.status();
        return decoder->Decode(*grids);
      });
}

absl::StatusOr<families::FamilyModel> LoadNextStep(const std::string& model_dir,
                                                   const families::FamilyOptions& options) {
  if (absl::Status s = families::CheckFamilyOptions("nextstep", options, {}); !s.ok()) return s;
  absl::StatusOr<NextStepConfig> config = LoadNextStepConfig(model_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> tok = LoadNextStepTokenizer(model_dir);
  if (!tok.ok()) return tok.status();
  absl::StatusOr<NextStepTokenIds> ids = FindNextStepTokens(**tok, *config);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<model::ModelSpec> spec = NextStepSpec(*config);
  if (!spec.ok()) return spec.status();
  const std::string vae_dir = NextStepVaeDir(model_dir, *config);
  absl::StatusOr<NextStepVaeConfig> vae = LoadNextStepVaeConfig(vae_dir);
  if (!vae.ok()) return vae.status();

  families::FamilyModel m;
  m.family = "nextstep";
  m.spec = *std::move(spec);
  // One size: config.json's latent_size tokens a side (the prompt's "{h}*{w}").
  const int32_t grid = config->latent_size;
  m.token_grid = grid;
  m.image_tokens = grid * grid;
  m.image_size = grid * config->latent_patch_size * vae->downsample();
  m.grid = sparse::GridGeometry{grid, 0, m.image_tokens};  // square, raster order, no row breaks
  // N_r: Janus-Pro's measured best window in rows (2 2/3; docs/policies.md "Per-family N_r").
  m.grid.default_n_recent = sparse::RecentRowsWindow(m.grid, 8, 3);
  m.image_layouts = {engine::ImageLayout{m.image_size, m.image_size, grid, grid, m.image_tokens, m.grid}};
  m.max_position_embeddings = config->max_position_embeddings;
  // example.py: cfg 7.5 on the velocity; the code-sampling knobs stay off
  // (engine::ValidateRequest refuses them for a continuous-token model).
  m.default_sampling = engine::SamplingParams{};
  m.default_sampling.cfg_weight = 7.5f;
  m.make_prompt = [tok = *tok, ids = *ids, grid]() -> absl::StatusOr<model::PromptEncoder> {
    return model::PromptEncoder(
        [tok, ids,
         grid](const model::PromptText& text) -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
          absl::StatusOr<NextStepPromptIds> p =
              BuildNextStepPrompt(*tok, ids, text.caption, text.negative_prompt, grid, grid);
          if (!p.ok()) return p.status();
          return std::make_pair(std::move(p->cond), std::move(p->uncond));
        });
  };
  // example.py's sampler: 50 steps, timesteps_shift 1, use_norm (FlowSampling's
  // defaults); each pair's cfg_weight replaces the cfg.
  const NextStepConfig c = *config;
  m.make_token_head =
      [c](const checkpoint::Checkpoint& checkpoint) -> absl::StatusOr<std::shared_ptr<const model::TokenHead>> {
    absl::StatusOr<std::shared_ptr<const NextStepTokenHead>> head =
        NextStepTokenHead::Load(checkpoint, c, FlowSampling{});
    if (!head.ok()) return head.status();
    return std::shared_ptr<const model::TokenHead>(*std::move(head));
  };
  m.make_decoder = [vae_dir, v = *vae, c](const checkpoint::Checkpoint&, const families::DecoderOptions& options) {
    return MakeDecoder(vae_dir, v, c, options);
  };
  return m;
}

}  // namespace

families::Family NextStepFamily() {
  families::Family f;
  f.name = "nextstep";
  f.matches = "model_type nextstep";
  f.recognises = [](const families::ConfigIdentity& id) { return id.model_type == "nextstep"; };
  f.load = LoadNextStep;
  return f;
}

}  // namespace argen::nextstep
