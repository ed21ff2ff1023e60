#include "engine/models/lumina/lumina_family.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/models/lumina/lumina_spec.h"
#include "engine/models/lumina/lumina_vq16.h"
#include "engine/tokenizer/lumina_prompt.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_decoder.h"
#include "engine/vqgan/vqgan_weights.h"
#if defined(ARGEN_WITH_CUDA)
#include "engine/vq_cuda/cuda_vq_decoder.h"
#endif

namespace argen::lumina {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<int32_t> VocabId(const LuminaConfig& config, const std::string& name) {
  for (const auto& [n, id] : config.vocabulary_map) {
    if (n == name) return id;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("config.json: vocabulary_map has no token '", name, "' (the Lumina-mGPT generation loop needs it)"));
}

absl::Status RequireFile(const fs::path& path, const char* what) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(what, " ", path.string(),
                                          " is missing (Meta's Chameleon image tokenizer; set vqgan_dir to the "
                                          "directory holding vqgan.yaml and vqgan.ckpt)"));
}

// Recorded tokens -> code grids (row breaks dropped, ids mapped), for either decoder.
absl::StatusOr<std::vector<std::vector<int32_t>>> CodeGrids(const std::vector<std::vector<int32_t>>& tokens,
                                                            const LuminaSchedule& schedule,
                                                            const tokenizer::ImageTokenRange& range,
                                                            int32_t new_line_id) {
  std::vector<std::vector<int32_t>> grids(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    absl::StatusOr<std::vector<int32_t>> codes = TokensToCodes(tokens[i], schedule, range, new_line_id, i);
    if (!codes.ok()) return codes.status();
    grids[i] = *std::move(codes);
  }
  return grids;
}

absl::StatusOr<model::ImageDecoder> MakeDecoder(const std::string& vqgan_dir, const vqgan::VqganConfig& config,
                                                const LuminaSchedule& schedule,
                                                std::shared_ptr<const tokenizer::ImageTokenRange> range,
                                                int32_t new_line_id, const models::DecoderOptions& options) {
  const fs::path ckpt_path = fs::path(vqgan_dir) / "vqgan.ckpt";
  if (absl::Status s = RequireFile(ckpt_path, "VQGAN weights"); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::OpenCheckpointFile(ckpt_path.string());
  if (!ckpt.ok()) return ckpt.status();
  absl::StatusOr<vqgan::VqganDecoderWeights> weights =
      vqgan::LoadVqganDecoderWeights(vqgan::CheckpointTensorSource(**ckpt), config);
  if (!weights.ok()) return weights.status();
  if (options.gpu) {
#if defined(ARGEN_WITH_CUDA)
    if (schedule.grid_w != schedule.grid_h) {
      return absl::FailedPreconditionError(absl::StrCat("the GPU VQGAN decoder takes square grids, this model serves ",
                                                        schedule.width, "x", schedule.height, "; use vq_backend cpu"));
    }
    absl::StatusOr<std::pair<vq::VqDecoderWeights, vq::Vq16Config>> vq16 = AsVq16(*weights, config, schedule.grid_w);
    if (!vq16.ok()) return vq16.status();
    vq::CudaVqOptions vq_options;
    vq_options.precision = options.precision == "fp32"   ? vq::VqPrecision::kFp32
                           : options.precision == "tf32" ? vq::VqPrecision::kTf32
                                                         : vq::VqPrecision::kBf16;
    vq_options.fallback_to_fp32 = options.precision == "auto";
    absl::StatusOr<std::unique_ptr<vq::CudaVqDecoder>> gpu =
        vq::CudaVqDecoder::Create(std::move(vq16->first), vq16->second, vq_options);
    if (!gpu.ok()) return gpu.status();
    std::shared_ptr<vq::CudaVqDecoder> decoder(std::move(*gpu));
    return model::ImageDecoder([decoder, schedule, range, new_line_id](const std::vector<std::vector<int32_t>>& tokens)
                                   -> absl::StatusOr<std::vector<engine::RgbImage>> {
      absl::StatusOr<std::vector<std::vector<int32_t>>> grids = CodeGrids(tokens, schedule, *range, new_line_id);
      if (!grids.ok()) return grids.status();
      return decoder->Decode(*grids);
    });
#else
    return absl::UnimplementedError("this build has no CUDA VQ decoder");
#endif
  }
  const vqgan::DecodeLimits limits{schedule.grid_h * schedule.grid_w, std::max(schedule.grid_h, schedule.grid_w)};
  absl::StatusOr<std::unique_ptr<vqgan::VqganDecoder>> decoder =
      vqgan::VqganDecoder::Create(*std::move(weights), config, limits);
  if (!decoder.ok()) return decoder.status();
  std::shared_ptr<vqgan::VqganDecoder> shared(std::move(*decoder));
  return model::ImageDecoder(
      [shared, schedule, range,
       new_line_id](const std::vector<std::vector<int32_t>>& tokens) -> absl::StatusOr<std::vector<engine::RgbImage>> {
        absl::StatusOr<std::vector<std::vector<int32_t>>> codes = CodeGrids(tokens, schedule, *range, new_line_id);
        if (!codes.ok()) return codes.status();
        std::vector<vqgan::CodeGrid> grids(codes->size());
        for (size_t i = 0; i < codes->size(); ++i)
          grids[i] = {schedule.grid_h, schedule.grid_w, std::move((*codes)[i])};
        return shared->Decode(grids);
      });
}

}  // namespace

std::string VqganDir(const std::string& model_dir, const models::LoadOptions& options) {
  if (options.vqgan_dir.empty()) return (fs::path(model_dir) / kDefaultVqganDir).string();
  const fs::path p(options.vqgan_dir);
  return (p.is_absolute() ? p : fs::path(model_dir) / p).string();
}

absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> SupportedSizes(const LuminaConfig& config,
                                                                        const std::string& model_dir) {
  if (!config.image_sizes.empty()) return config.image_sizes;
  std::string name = fs::path(model_dir).lexically_normal().filename().string();
  if (name.empty()) name = fs::path(model_dir).lexically_normal().parent_path().filename().string();
  for (int32_t target : {512, 768, 1024}) {
    const std::string suffix = absl::StrCat("-", target);
    if (name.find(suffix) != std::string::npos) return CropSizeList(target);
  }
  return absl::FailedPreconditionError(
      absl::StrCat("model_dir '", model_dir,
                   "': cannot tell the checkpoint's target resolution: name the directory as Alpha-VLLM does "
                   "(Lumina-mGPT-7B-512, -768, -1024) or add argen_image_sizes [[W, H], ...] to config.json"));
}

absl::StatusOr<std::vector<int32_t>> TokensToCodes(const std::vector<int32_t>& tokens, const LuminaSchedule& schedule,
                                                   const tokenizer::ImageTokenRange& range, int32_t new_line_id,
                                                   size_t image) {
  if (static_cast<int32_t>(tokens.size()) != schedule.l_dec) {
    return absl::InvalidArgumentError(absl::StrCat("token_grids[", image, "]: ", tokens.size(), " tokens, expected ",
                                                   schedule.l_dec, " (", schedule.grid_h, " rows of ", schedule.grid_w,
                                                   " codes with a new line between rows)"));
  }
  std::vector<int32_t> codes;
  codes.reserve(static_cast<size_t>(schedule.grid_h) * schedule.grid_w);
  for (int32_t t = 0; t < schedule.l_dec; ++t) {
    const int32_t id = tokens[t];
    if (schedule.IsRowBreak(t)) {
      if (id != new_line_id) {
        return absl::InvalidArgumentError(absl::StrCat("token_grids[", image, "][", t, "]: id ", id,
                                                       " where the row's new line ", new_line_id, " belongs"));
      }
      continue;
    }
    const int32_t offset = id - range.first_id;
    if (offset < 0 || offset >= range.count) {
      return absl::InvalidArgumentError(absl::StrCat("token_grids[", image, "][", t, "]: id ", id,
                                                     " is not an image token [", range.first_id, ", ",
                                                     range.first_id + range.count, ")"));
    }
    codes.push_back(range.code_of_offset[offset]);
  }
  return codes;
}

absl::StatusOr<model::PromptEncoder> LuminaPromptEncoder(const std::string& model_dir, const LuminaConfig& config,
                                                         int32_t width, int32_t height) {
  absl::StatusOr<tokenizer::Tokenizer> tok =
      tokenizer::Tokenizer::LoadFromFile((fs::path(model_dir) / "tokenizer.json").string());
  if (!tok.ok()) return tok.status();
  auto shared = std::make_shared<const tokenizer::Tokenizer>(*std::move(tok));
  // The tokenizer and config.json must agree on the ids the loop uses.
  absl::StatusOr<tokenizer::LuminaTokenIds> ids = tokenizer::FindLuminaTokens(*shared);
  if (!ids.ok()) return ids.status();
  for (auto [name, id] : {std::pair{tokenizer::kChameleonBosToken, ids->bos},
                          {tokenizer::kLuminaEndOfTurnToken, ids->end_of_turn},
                          {tokenizer::kChameleonBeginImageToken, ids->begin_image},
                          {tokenizer::kChameleonEndImageToken, ids->end_image},
                          {tokenizer::kLuminaNewLineToken, ids->new_line}}) {
    absl::StatusOr<int32_t> vid = VocabId(config, name);
    if (!vid.ok()) return vid.status();
    if (*vid != id) {
      return absl::FailedPreconditionError(
          absl::StrCat("tokenizer.json gives '", name, "' id ", id, ", config.json's vocabulary_map ", *vid));
    }
  }
  // Fail at load, not per request, when the resolution tokens are missing.
  absl::StatusOr<tokenizer::LuminaPromptIds> probe = tokenizer::BuildLuminaPrompt(*shared, "x", width, height, 0);
  if (!probe.ok()) return probe.status();
  return model::PromptEncoder(
      [shared, width,
       height](const std::string& caption) -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
        absl::StatusOr<tokenizer::LuminaPromptIds> p = tokenizer::BuildLuminaPrompt(*shared, caption, width, height, 0);
        if (!p.ok()) return p.status();
        std::vector<int32_t> cond = std::move(p->cond);
        cond.insert(cond.end(), p->header.begin(), p->header.end());
        return std::make_pair(std::move(cond), std::move(p->header));
      });
}

absl::StatusOr<models::FamilyModel> LoadLumina(const std::string& model_dir, const models::LoadOptions& options) {
  absl::StatusOr<LuminaConfig> config = LoadLuminaConfig(model_dir);
  if (!config.ok()) return config.status();
  const std::string vq_dir = VqganDir(model_dir, options);
  const fs::path yaml_path = fs::path(vq_dir) / "vqgan.yaml";
  if (absl::Status s = RequireFile(yaml_path, "VQGAN config"); !s.ok()) return s;
  absl::StatusOr<vqgan::VqganConfig> vq = vqgan::LoadVqganYaml(yaml_path.string());
  if (!vq.ok()) return vq.status();
  absl::StatusOr<tokenizer::ImageTokenRange> range =
      tokenizer::BuildImageTokenRange(config->vocabulary_map, vq->n_embed, "config.json vocabulary_map");
  if (!range.ok()) return range.status();
  absl::StatusOr<int32_t> new_line = VocabId(*config, tokenizer::kLuminaNewLineToken);
  if (!new_line.ok()) return new_line.status();
  absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> sizes = SupportedSizes(*config, model_dir);
  if (!sizes.ok()) return sizes.status();
  std::pair<int32_t, int32_t> served = sizes->front();  // argen_image_sizes: the first
  if (config->image_sizes.empty()) {
    for (const auto& s : *sizes) {
      if (s.first == s.second) served = s;  // CropSizeList's one square: the target
    }
  }
  absl::StatusOr<LuminaSchedule> schedule = MakeSchedule(*sizes, served.first, served.second, *new_line);
  if (!schedule.ok()) return schedule.status();

  // The q/k-norm layout is read from the checkpoint (metadata only).
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(model_dir);
  if (!ckpt.ok()) return ckpt.status();
  absl::StatusOr<QkNormRows> qk = ReadQkNormRows(**ckpt, *config);
  if (!qk.ok()) return qk.status();
  absl::StatusOr<model::ModelSpec> spec = LuminaSpec(*config, range->first_id, range->count, *qk);
  if (!spec.ok()) return spec.status();

  models::FamilyModel m;
  m.family = "lumina";
  m.spec = *std::move(spec);
  m.image_size = std::max(schedule->width, schedule->height);
  m.token_grid = std::max(schedule->grid_w, schedule->grid_h);
  m.image_tokens = schedule->l_dec;
  m.grid = schedule->grid;
  m.forced_tokens = schedule->forced;
  m.max_position_embeddings = config->max_position_embeddings;
  // Lumina-mGPT's own sampling: cfg 4, top-k 2000 over the image codes (all of
  // them when the codebook is smaller).
  m.default_sampling.cfg_weight = kDefaultCfgWeight;
  m.default_sampling.top_k = std::min(kDefaultImageTopK, range->count);
  const LuminaConfig cfg = *config;
  const int32_t width = schedule->width, height = schedule->height;
  m.make_prompt = [model_dir, cfg, width, height] { return LuminaPromptEncoder(model_dir, cfg, width, height); };
  auto shared_range = std::make_shared<const tokenizer::ImageTokenRange>(*std::move(range));
  const vqgan::VqganConfig vq_config = *vq;
  const LuminaSchedule sched = *schedule;
  const int32_t nl = *new_line;
  // The VQGAN is read from its own files (the language model's checkpoint has no decoder).
  m.make_decoder = [vq_dir, vq_config, sched, shared_range, nl](const checkpoint::Checkpoint&,
                                                                const models::DecoderOptions& options) {
    return MakeDecoder(vq_dir, vq_config, sched, shared_range, nl, options);
  };
  return m;
}

models::Family LuminaFamily() {
  models::Family f;
  f.name = "lumina";
  f.matches = "model_type chameleon";
  f.recognises = [](const models::ConfigIdentity& id) { return id.model_type == "chameleon"; };
  f.load = LoadLumina;
  return f;
}

}  // namespace argen::lumina
