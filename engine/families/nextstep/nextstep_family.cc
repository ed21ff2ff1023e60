#include "engine/families/nextstep/nextstep_family.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/families/nextstep/nextstep_prompt.h"
#include "engine/families/nextstep/nextstep_spec.h"
#include "engine/families/nextstep/nextstep_token_head.h"
#include "engine/families/nextstep/nextstep_vae.h"
#include "engine/token_vectors.h"

namespace argen::nextstep {
namespace {

// The VAE decoder over the engine's recorded tokens (token_dim words a token,
// engine/token_vectors.h) of one grid_h x grid_w image each. On the CPU only:
// there is no GPU VAE decoder yet.
absl::StatusOr<model::ImageDecoder> MakeDecoder(const std::string& vae_dir, const NextStepVaeConfig& vae,
                                                const NextStepConfig& config, const families::DecoderOptions& options) {
  if (options.gpu) {
    return absl::UnimplementedError("NextStep-1's VAE decoder runs on the CPU only (vq_backend \"cpu\")");
  }
  const int32_t grid = config.latent_size;
  absl::StatusOr<std::unique_ptr<NextStepVaeDecoder>> made =
      NextStepVaeDecoder::Create(vae_dir, vae, config.latent_patch_size, grid);
  if (!made.ok()) return made.status();
  std::shared_ptr<NextStepVaeDecoder> decoder = *std::move(made);  // Decode serialises its calls
  const size_t words = static_cast<size_t>(grid) * grid * decoder->token_dim();
  return model::ImageDecoder(
      [decoder, grid,
       words](const std::vector<std::vector<int32_t>>& token_grids) -> absl::StatusOr<std::vector<engine::RgbImage>> {
        std::vector<TokenGrid> grids;
        grids.reserve(token_grids.size());
        for (size_t i = 0; i < token_grids.size(); ++i) {
          if (token_grids[i].size() != words) {
            return absl::InvalidArgumentError(absl::StrCat("token grid ", i, ": ", token_grids[i].size(),
                                                           " words, a NextStep-1 image is ", words, " (", grid, " x ",
                                                           grid, " tokens of ", decoder->token_dim(), " floats)"));
          }
          grids.push_back(TokenGrid{grid, grid, engine::TokenVectorFloats(token_grids[i])});
        }
        return decoder->Decode(grids);
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
