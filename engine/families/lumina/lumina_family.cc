#include "engine/families/lumina/lumina_family.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/families/lumina/lumina_prompt.h"
#include "engine/families/lumina/lumina_spec.h"
#include "engine/families/lumina/lumina_vq16.h"
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

// One recorded sequence's code grid (row breaks dropped, ids mapped), its
// size told by its length and where its first row ends.
struct CodeGridOfSize {
  int32_t grid_w = 0, grid_h = 0;
  std::vector<int32_t> codes;
};

// The decoder's view of the model: its sizes, the ids of its image tokens
// and of the new line.
struct TokenCodes {
  std::vector<std::pair<int32_t, int32_t>> sizes;
  std::shared_ptr<const ImageTokenRange> range;
  int32_t new_line_id = 0;
};

absl::StatusOr<std::vector<CodeGridOfSize>> CodeGrids(const std::vector<std::vector<int32_t>>& tokens,
                                                      const TokenCodes& model) {
  std::vector<CodeGridOfSize> grids(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    absl::StatusOr<LuminaSchedule> schedule = ScheduleOfTokens(tokens[i], model.sizes, model.new_line_id, i);
    if (!schedule.ok()) return schedule.status();
    absl::StatusOr<std::vector<int32_t>> codes =
        TokensToCodes(tokens[i], *schedule, *model.range, model.new_line_id, i);
    if (!codes.ok()) return codes.status();
    grids[i] = {schedule->grid_w, schedule->grid_h, *std::move(codes)};
  }
  return grids;
}

absl::StatusOr<model::ImageDecoder> MakeDecoder(const std::string& vqgan_dir, const vqgan::VqganConfig& config,
                                                const TokenCodes& model, std::pair<int32_t, int32_t> default_size,
                                                const families::DecoderOptions& options) {
  const fs::path ckpt_path = fs::path(vqgan_dir) / "vqgan.ckpt";
  if (absl::Status s = RequireFile(ckpt_path, "VQGAN weights"); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::OpenCheckpointFile(ckpt_path.string());
  if (!ckpt.ok()) return ckpt.status();
  absl::StatusOr<vqgan::VqganDecoderWeights> weights =
      vqgan::LoadVqganDecoderWeights(vqgan::CheckpointTensorSource(**ckpt), config);
  if (!weights.ok()) return weights.status();
  // The CPU decoder plans its scratch for the largest grid of any size.
  vqgan::DecodeLimits limits{1, 1};
  for (const auto& [w, h] : model.sizes) {
    const int32_t gw = w / kPixelsPerCode, gh = h / kPixelsPerCode;
    limits.max_cells = std::max(limits.max_cells, gw * gh);
    limits.max_side = std::max({limits.max_side, gw, gh});
  }
  if (options.gpu) {
#if defined(ARGEN_WITH_CUDA)
    // engine/vq_cuda decodes square grids of one side: the default size's
    // when square, else the first square size. The other sizes decode on
    // the CPU VQGAN (the same network, fp32).
    std::pair<int32_t, int32_t> gpu_size = default_size;
    if (gpu_size.first != gpu_size.second) {
      for (const auto& s : model.sizes) {
        if (s.first == s.second) {
          gpu_size = s;
          break;
        }
      }
    }
    if (gpu_size.first != gpu_size.second) {
      return absl::FailedPreconditionError(absl::StrCat("the GPU VQGAN decoder takes square grids, this model serves ",
                                                        SizeListText(model.sizes), "; use vq_backend cpu"));
    }
    const int32_t gpu_side = gpu_size.first / kPixelsPerCode;
    absl::StatusOr<std::pair<vq::VqDecoderWeights, vq::Vq16Config>> vq16 = AsVq16(*weights, config, gpu_side);
    if (!vq16.ok()) return vq16.status();
    vq::CudaVqOptions vq_options;
    vq_options.precision = options.precision == vq::DecoderPrecision::kFp32   ? vq::VqPrecision::kFp32
                           : options.precision == vq::DecoderPrecision::kTf32 ? vq::VqPrecision::kTf32
                                                                              : vq::VqPrecision::kBf16;
    vq_options.fallback_to_fp32 = options.precision == vq::DecoderPrecision::kAuto;
    absl::StatusOr<std::unique_ptr<vq::CudaVqDecoder>> gpu =
        vq::CudaVqDecoder::Create(std::move(vq16->first), vq16->second, vq_options);
    if (!gpu.ok()) return gpu.status();
    std::shared_ptr<vq::CudaVqDecoder> decoder(std::move(*gpu));
    std::shared_ptr<vqgan::VqganDecoder> cpu;
    if (model.sizes.size() > 1) {
      absl::StatusOr<std::unique_ptr<vqgan::VqganDecoder>> made =
          vqgan::VqganDecoder::Create(*std::move(weights), config, limits);
      if (!made.ok()) return made.status();
      cpu = std::move(*made);
      std::cerr << "argen: the GPU VQGAN decoder decodes " << gpu_size.first << "x" << gpu_size.second
                << "; the model's other " << model.sizes.size() - 1 << " sizes decode on the CPU VQGAN\n";
    }
    return model::ImageDecoder(
        [decoder, cpu, gpu_side,
         model](const std::vector<std::vector<int32_t>>& tokens) -> absl::StatusOr<std::vector<engine::RgbImage>> {
          absl::StatusOr<std::vector<CodeGridOfSize>> grids = CodeGrids(tokens, model);
          if (!grids.ok()) return grids.status();
          // Grouped by decoder, each group in one call, the images back in order.
          std::vector<std::vector<int32_t>> on_gpu;
          std::vector<vqgan::CodeGrid> on_cpu;
          std::vector<bool> is_gpu(grids->size());
          for (size_t i = 0; i < grids->size(); ++i) {
            CodeGridOfSize& g = (*grids)[i];
            is_gpu[i] = g.grid_w == gpu_side && g.grid_h == gpu_side;
            if (is_gpu[i]) {
              on_gpu.push_back(std::move(g.codes));
            } else {
              on_cpu.push_back({g.grid_h, g.grid_w, std::move(g.codes)});
            }
          }
          std::vector<engine::RgbImage> gpu_images, cpu_images;
          if (!on_gpu.empty()) {
            absl::StatusOr<std::vector<engine::RgbImage>> d = decoder->Decode(on_gpu);
            if (!d.ok()) return d.status();
            gpu_images = *std::move(d);
          }
          if (!on_cpu.empty()) {
            if (cpu == nullptr) return absl::InternalError("VQGAN decode: no CPU decoder for a non-GPU size");
            absl::StatusOr<std::vector<engine::RgbImage>> d = cpu->Decode(on_cpu);
            if (!d.ok()) return d.status();
            cpu_images = *std::move(d);
          }
          std::vector<engine::RgbImage> out(grids->size());
          size_t next_gpu = 0, next_cpu = 0;
          for (size_t i = 0; i < out.size(); ++i) {
            out[i] = is_gpu[i] ? std::move(gpu_images[next_gpu++]) : std::move(cpu_images[next_cpu++]);
          }
          return out;
        });
#else
    (void)default_size;
    return absl::UnimplementedError("this build has no CUDA VQ decoder");
#endif
  }
  absl::StatusOr<std::unique_ptr<vqgan::VqganDecoder>> decoder =
      vqgan::VqganDecoder::Create(*std::move(weights), config, limits);
  if (!decoder.ok()) return decoder.status();
  std::shared_ptr<vqgan::VqganDecoder> shared(std::move(*decoder));
  return model::ImageDecoder(
      [shared,
       model](const std::vector<std::vector<int32_t>>& tokens) -> absl::StatusOr<std::vector<engine::RgbImage>> {
        absl::StatusOr<std::vector<CodeGridOfSize>> codes = CodeGrids(tokens, model);
        if (!codes.ok()) return codes.status();
        std::vector<vqgan::CodeGrid> grids(codes->size());
        for (size_t i = 0; i < codes->size(); ++i) {
          CodeGridOfSize& g = (*codes)[i];
          grids[i] = {g.grid_h, g.grid_w, std::move(g.codes)};
        }
        return shared->Decode(grids);
      });
}

engine::ImageLayout LayoutOf(const LuminaSchedule& s) {
  engine::ImageLayout l;
  l.width = s.width;
  l.height = s.height;
  l.grid_w = s.grid_w;
  l.grid_h = s.grid_h;
  l.image_tokens = s.l_dec;
  l.grid = s.grid;
  return l;
}

}  // namespace

absl::StatusOr<LuminaOptions> ParseLuminaOptions(const families::FamilyOptions& options) {
  if (absl::Status s = families::CheckFamilyOptions("lumina", options, {kVqganDirOption}); !s.ok()) return s;
  LuminaOptions parsed;
  if (auto it = options.find(kVqganDirOption); it != options.end()) parsed.vqgan_dir = it->second;
  return parsed;
}

std::string VqganDir(const std::string& model_dir, const LuminaOptions& options) {
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
                                                   const ImageTokenRange& range, int32_t new_line_id, size_t image) {
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

absl::StatusOr<LuminaSchedule> ScheduleOfTokens(const std::vector<int32_t>& tokens,
                                                const std::vector<std::pair<int32_t, int32_t>>& sizes,
                                                int32_t new_line_id, size_t image) {
  const int32_t length = static_cast<int32_t>(tokens.size());
  // The first new line closes row 0 (sampled tokens are image codes, never the new line).
  const auto first_break = std::find(tokens.begin(), tokens.end(), new_line_id);
  const int32_t row = static_cast<int32_t>(first_break - tokens.begin());
  std::vector<std::pair<int32_t, int32_t>> same_length;
  for (const auto& [w, h] : sizes) {
    const int32_t gw = w / kPixelsPerCode, gh = h / kPixelsPerCode;
    if (gh * (gw + 1) - 1 != length) continue;
    same_length.emplace_back(w, h);
    if (gw == row) return MakeSchedule(sizes, w, h, new_line_id);
  }
  // One size of this length: its schedule, so TokensToCodes names the position that is wrong.
  if (same_length.size() == 1) {
    return MakeSchedule(sizes, same_length[0].first, same_length[0].second, new_line_id);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "token_grids[", image, "]: ", length, " tokens with a first row of ", row,
      " codes are no supported size's decode sequence (h rows of w codes with a new line between rows); sizes ",
      sizes.size() <= 20 ? SizeListText(sizes)
                         : absl::StrCat(SizeListText({sizes.begin(), sizes.begin() + 20}), ", ...")));
}

absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> LoadLuminaTokenizer(const std::string& model_dir,
                                                                                const LuminaConfig& config) {
  absl::StatusOr<tokenizer::Tokenizer> tok =
      tokenizer::Tokenizer::LoadFromFile((fs::path(model_dir) / "tokenizer.json").string());
  if (!tok.ok()) return tok.status();
  auto shared = std::make_shared<const tokenizer::Tokenizer>(*std::move(tok));
  // The tokenizer and config.json must agree on the ids the loop uses.
  absl::StatusOr<LuminaTokenIds> ids = FindLuminaTokens(*shared);
  if (!ids.ok()) return ids.status();
  for (auto [name, id] : {std::pair{kChameleonBosToken, ids->bos},
                          {kLuminaEndOfTurnToken, ids->end_of_turn},
                          {kChameleonBeginImageToken, ids->begin_image},
                          {kChameleonEndImageToken, ids->end_image},
                          {kLuminaNewLineToken, ids->new_line}}) {
    absl::StatusOr<int32_t> vid = VocabId(config, name);
    if (!vid.ok()) return vid.status();
    if (*vid != id) {
      return absl::FailedPreconditionError(
          absl::StrCat("tokenizer.json gives '", name, "' id ", id, ", config.json's vocabulary_map ", *vid));
    }
  }
  return std::shared_ptr<const tokenizer::Tokenizer>(std::move(shared));
}

absl::StatusOr<model::PromptEncoder> LuminaPromptEncoder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                                                         int32_t width, int32_t height) {
  // Fail at load, not per request, when the resolution tokens are missing.
  absl::StatusOr<LuminaPromptIds> probe = BuildLuminaPrompt(*tokenizer, "x", width, height, 0);
  if (!probe.ok()) return probe.status();
  return model::PromptEncoder(
      [tokenizer, width,
       height](const model::PromptText& text) -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
        absl::StatusOr<LuminaPromptIds> p = BuildLuminaPrompt(*tokenizer, text.caption, width, height, 0);
        if (!p.ok()) return p.status();
        std::vector<int32_t> cond = std::move(p->cond);
        cond.insert(cond.end(), p->header.begin(), p->header.end());
        if (text.negative_prompt.empty()) return std::make_pair(std::move(cond), std::move(p->header));
        // A negative prompt: the unconditional context the official CFG
        // processor takes (its "negative" logits) is the negative prompt's own
        // conversation and image header, built as the caption's is.
        absl::StatusOr<LuminaPromptIds> n = BuildLuminaPrompt(*tokenizer, text.negative_prompt, width, height, 0);
        if (!n.ok()) {
          if (n.status().code() != absl::StatusCode::kInvalidArgument) return n.status();
          absl::string_view message = n.status().message();
          if (absl::StartsWith(message, "prompt: ")) message.remove_prefix(8);
          return absl::InvalidArgumentError(absl::StrCat("negative_prompt: ", message));
        }
        std::vector<int32_t> uncond = std::move(n->cond);
        uncond.insert(uncond.end(), n->header.begin(), n->header.end());
        return std::make_pair(std::move(cond), std::move(uncond));
      });
}

absl::StatusOr<model::PromptEncoder> LuminaPromptEncoder(const std::string& model_dir, const LuminaConfig& config,
                                                         int32_t width, int32_t height) {
  absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> tok = LoadLuminaTokenizer(model_dir, config);
  if (!tok.ok()) return tok.status();
  return LuminaPromptEncoder(*std::move(tok), width, height);
}

absl::StatusOr<model::ImageRecipeMaker> LuminaRecipes(const std::string& model_dir, const LuminaConfig& config,
                                                      const std::vector<std::pair<int32_t, int32_t>>& sizes,
                                                      int32_t new_line_id) {
  absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> tok = LoadLuminaTokenizer(model_dir, config);
  if (!tok.ok()) return tok.status();
  // Every size's resolution tokens, checked now: a size is refused at load, never per request.
  for (const auto& [w, h] : sizes) {
    absl::StatusOr<LuminaPromptIds> probe = BuildLuminaPrompt(**tok, "x", w, h, 0);
    if (!probe.ok()) {
      return absl::Status(probe.status().code(),
                          absl::StrCat("image size ", w, "x", h, ": ", probe.status().message()));
    }
  }
  std::shared_ptr<const tokenizer::Tokenizer> shared = *std::move(tok);
  return model::ImageRecipeMaker(
      [shared, sizes, new_line_id](const engine::ImageLayout& layout) -> absl::StatusOr<model::ImageRecipe> {
        absl::StatusOr<LuminaSchedule> schedule = MakeSchedule(sizes, layout.width, layout.height, new_line_id);
        if (!schedule.ok()) return schedule.status();
        absl::StatusOr<model::PromptEncoder> encoder = LuminaPromptEncoder(shared, layout.width, layout.height);
        if (!encoder.ok()) return encoder.status();
        return model::ImageRecipe{LayoutOf(*schedule), std::move(schedule->forced), *std::move(encoder)};
      });
}

absl::StatusOr<families::FamilyModel> LoadLumina(const std::string& model_dir, const families::FamilyOptions& options) {
  absl::StatusOr<LuminaOptions> lumina_options = ParseLuminaOptions(options);
  if (!lumina_options.ok()) return lumina_options.status();
  absl::StatusOr<LuminaConfig> config = LoadLuminaConfig(model_dir);
  if (!config.ok()) return config.status();
  const std::string vq_dir = VqganDir(model_dir, *lumina_options);
  const fs::path yaml_path = fs::path(vq_dir) / "vqgan.yaml";
  if (absl::Status s = RequireFile(yaml_path, "VQGAN config"); !s.ok()) return s;
  absl::StatusOr<vqgan::VqganConfig> vq = vqgan::LoadVqganYaml(yaml_path.string());
  if (!vq.ok()) return vq.status();
  absl::StatusOr<ImageTokenRange> range =
      BuildImageTokenRange(config->vocabulary_map, vq->n_embed, "config.json vocabulary_map");
  if (!range.ok()) return range.status();
  absl::StatusOr<int32_t> new_line = VocabId(*config, kLuminaNewLineToken);
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

  families::FamilyModel m;
  m.family = "lumina";
  m.spec = *std::move(spec);
  m.image_size = std::max(schedule->width, schedule->height);
  m.image_width = schedule->width;
  m.image_height = schedule->height;
  m.token_grid = std::max(schedule->grid_w, schedule->grid_h);
  m.image_tokens = schedule->l_dec;
  m.grid = schedule->grid;
  m.forced_tokens = schedule->forced;
  m.max_position_embeddings = config->max_position_embeddings;
  // Lumina-mGPT's own sampling: cfg 4, top-k 2000 over the image codes (all of
  // them when the codebook is smaller).
  m.default_sampling.cfg_weight = kDefaultCfgWeight;
  m.default_sampling.top_k = std::min(kDefaultImageTopK, range->count);
  // Every size's layout (the recipes, with their forced tokens and prompts, are made on demand).
  for (const auto& [w, h] : *sizes) {
    absl::StatusOr<LuminaSchedule> s = MakeSchedule(*sizes, w, h, *new_line);
    if (!s.ok()) return s.status();
    m.image_layouts.push_back(LayoutOf(*s));
  }
  const LuminaConfig cfg = *config;
  const int32_t width = schedule->width, height = schedule->height;
  m.make_prompt = [model_dir, cfg, width, height] { return LuminaPromptEncoder(model_dir, cfg, width, height); };
  const std::vector<std::pair<int32_t, int32_t>> size_list = *sizes;
  const int32_t nl = *new_line;
  m.make_recipes = [model_dir, cfg, size_list, nl] { return LuminaRecipes(model_dir, cfg, size_list, nl); };
  TokenCodes codes{size_list, std::make_shared<const ImageTokenRange>(*std::move(range)), nl};
  const vqgan::VqganConfig vq_config = *vq;
  // The VQGAN is read from its own files (the language model's checkpoint has no decoder).
  m.make_decoder = [vq_dir, vq_config, codes, served](const checkpoint::Checkpoint&,
                                                      const families::DecoderOptions& options) {
    return MakeDecoder(vq_dir, vq_config, codes, served, options);
  };
  return m;
}

families::Family LuminaFamily() {
  families::Family f;
  f.name = "lumina";
  f.matches = "model_type chameleon";
  f.recognises = [](const families::ConfigIdentity& id) { return id.model_type == "chameleon"; };
  f.load = LoadLumina;
  return f;
}

}  // namespace argen::lumina
