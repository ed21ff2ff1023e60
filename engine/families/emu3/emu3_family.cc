#include "engine/families/emu3/emu3_family.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/emu3vq/emu3vq_decoder.h"
#include "engine/emu3vq/emu3vq_weights.h"
#include "engine/families/emu3/emu3_spec.h"
#include "engine/families/emu3/emu3_tokenizer.h"
#if defined(ARGEN_WITH_CUDA)
#include "engine/vq_cuda/cuda_emu3vq_decoder.h"
#endif

namespace argen::emu3 {
namespace {

namespace fs = std::filesystem;

struct Emu3Options {
  std::string vision_tokenizer_dir;  // empty: the default
};

absl::StatusOr<Emu3Options> ParseEmu3Options(const families::FamilyOptions& options) {
  if (absl::Status s = families::CheckFamilyOptions("emu3", options, {kVisionTokenizerDirOption}); !s.ok()) return s;
  Emu3Options parsed;
  if (auto it = options.find(kVisionTokenizerDirOption); it != options.end()) parsed.vision_tokenizer_dir = it->second;
  return parsed;
}

std::string VisionDir(const std::string& model_dir, const Emu3Options& options) {
  if (options.vision_tokenizer_dir.empty()) return (fs::path(model_dir) / kDefaultVisionTokenizerDir).string();
  const fs::path p(options.vision_tokenizer_dir);
  return (p.is_absolute() ? p : fs::path(model_dir) / p).string();
}

// config.json's ids, where it states them, must be the tokenizer's.
absl::Status CheckConfigIds(const Emu3Config& c, const Emu3TokenIds& ids, const std::string& model_dir) {
  for (auto [field, stated, found] :
       {std::tuple{"bos_token_id", c.bos_token_id, ids.bos}, std::tuple{"eos_token_id", c.eos_token_id, ids.eos},
        std::tuple{"pad_token_id", c.pad_token_id, ids.pad}, std::tuple{"img_token_id", c.img_token_id, ids.image},
        std::tuple{"boi_token_id", c.boi_token_id, ids.begin_image},
        std::tuple{"eoi_token_id", c.eoi_token_id, ids.end_image},
        std::tuple{"eol_token_id", c.eol_token_id, ids.row_end},
        std::tuple{"eof_token_id", c.eof_token_id, ids.end_of_frame}}) {
    if (stated >= 0 && stated != found) {
      return absl::FailedPreconditionError(
          absl::StrCat(model_dir, "/config.json: ", field, " ", stated, " is not the tokenizer's id ", found));
    }
  }
  return absl::OkStatus();
}

engine::ImageLayout LayoutOf(const Emu3Schedule& s) {
  engine::ImageLayout l;
  l.width = s.width;
  l.height = s.height;
  l.grid_w = s.grid_w;
  l.grid_h = s.grid_h;
  l.image_tokens = s.l_dec;
  l.grid = s.grid;
  return l;
}

// What the image decoder needs of the model.
struct DecodeModel {
  std::vector<std::pair<int32_t, int32_t>> sizes;
  std::pair<int32_t, int32_t> served{0, 0};  // the default (width, height)
  int32_t pixels_per_code = 8;
  Emu3TokenIds ids;
  int32_t codebook_size = 0;
};

absl::StatusOr<model::ImageDecoder> MakeDecoder(const checkpoint::Checkpoint& lm_checkpoint, const Emu3Config& config,
                                                const emu3vq::Emu3VqConfig& vq, const std::string& vision_dir,
                                                const std::string& vq_prefix, const DecodeModel& model,
                                                const families::DecoderOptions& options) {
#if !defined(ARGEN_WITH_CUDA)
  if (options.gpu) {
    return absl::UnimplementedError("this build has no GPU vision decoder for Emu3 (no CUDA); set vq_backend cpu");
  }
#endif
  absl::StatusOr<emu3vq::Emu3VqWeights> weights;
  if (config.layout == Emu3Layout::kBaai) {
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(vision_dir);
    if (!ckpt.ok()) return ckpt.status();
    weights = emu3vq::LoadEmu3VqWeights(emu3vq::CheckpointTensorSource(**ckpt), vq, emu3vq::Emu3VqNaming::kBaai, "");
  } else {
    weights = emu3vq::LoadEmu3VqWeights(emu3vq::CheckpointTensorSource(lm_checkpoint), vq,
                                        emu3vq::Emu3VqNaming::kTransformers, vq_prefix);
  }
  if (!weights.ok()) return weights.status();
  int32_t max_cells = 1;
  for (const auto& [w, h] : model.sizes) {
    max_cells = std::max(max_cells, (w / model.pixels_per_code) * (h / model.pixels_per_code));
  }
  // Token sequences -> code grids, then the CPU or GPU decoder.
  auto to_grids =
      [model](const std::vector<std::vector<int32_t>>& tokens) -> absl::StatusOr<std::vector<emu3vq::CodeGrid>> {
    std::vector<emu3vq::CodeGrid> grids(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      absl::StatusOr<Emu3CodeGrid> g =
          TokensToCodes(tokens[i], model.sizes, model.pixels_per_code, model.ids, model.codebook_size, i);
      if (!g.ok()) return g.status();
      grids[i] = {g->grid_h, g->grid_w, std::move(g->codes)};
    }
    return grids;
  };
#if defined(ARGEN_WITH_CUDA)
  if (options.gpu) {
    // As the VQ-16 families: auto is bf16 with an fp32 fallback (logged), bf16 is bf16 or an error.
    vq::CudaEmu3VqOptions gpu_options;
    gpu_options.precision = options.precision == vq::DecoderPrecision::kFp32   ? vq::VqPrecision::kFp32
                            : options.precision == vq::DecoderPrecision::kTf32 ? vq::VqPrecision::kTf32
                                                                               : vq::VqPrecision::kBf16;
    gpu_options.fallback_to_fp32 = options.precision == vq::DecoderPrecision::kAuto;
    // cuDNN's plans for the default size now rather than in the first request's decode (others on first use).
    const auto [served_w, served_h] = model.served;
    if (served_w > 0 && served_h > 0 &&
        (served_w / model.pixels_per_code) * (served_h / model.pixels_per_code) <= max_cells) {
      gpu_options.plan_grids.emplace_back(served_h / model.pixels_per_code, served_w / model.pixels_per_code);
    }
    absl::StatusOr<std::unique_ptr<vq::CudaEmu3VqDecoder>> gpu =
        vq::CudaEmu3VqDecoder::Create(*weights, vq, max_cells, gpu_options);
    if (!gpu.ok()) return gpu.status();
    std::cerr << "argen: Emu3 vision decoder on the GPU: " << (*gpu)->description() << "\n";
    std::shared_ptr<vq::CudaEmu3VqDecoder> shared(std::move(*gpu));
    return model::ImageDecoder(
        [shared,
         to_grids](const std::vector<std::vector<int32_t>>& tokens) -> absl::StatusOr<std::vector<engine::RgbImage>> {
          absl::StatusOr<std::vector<emu3vq::CodeGrid>> grids = to_grids(tokens);
          if (!grids.ok()) return grids.status();
          return shared->Decode(*grids);
        });
  }
#endif
  absl::StatusOr<std::unique_ptr<emu3vq::Emu3VqDecoder>> decoder =
      emu3vq::Emu3VqDecoder::Create(*std::move(weights), vq, max_cells);
  if (!decoder.ok()) return decoder.status();
  std::shared_ptr<emu3vq::Emu3VqDecoder> shared(std::move(*decoder));
  return model::ImageDecoder(
      [shared,
       to_grids](const std::vector<std::vector<int32_t>>& tokens) -> absl::StatusOr<std::vector<engine::RgbImage>> {
        absl::StatusOr<std::vector<emu3vq::CodeGrid>> grids = to_grids(tokens);
        if (!grids.ok()) return grids.status();
        return shared->Decode(*grids);
      });
}

}  // namespace

absl::StatusOr<Emu3CodeGrid> TokensToCodes(const std::vector<int32_t>& tokens,
                                           const std::vector<std::pair<int32_t, int32_t>>& sizes, int32_t f,
                                           const Emu3TokenIds& ids, int32_t codebook_size, size_t image) {
  const int32_t length = static_cast<int32_t>(tokens.size());
  // The first row end closes row 0 (sampled tokens are visual, never the row end).
  const int32_t first_row = static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), ids.row_end) - tokens.begin());
  int32_t gw = 0, gh = 0, same_length = 0;
  for (const auto& [w, h] : sizes) {
    const int32_t cw = w / f, ch = h / f;
    if (ch * (cw + 1) - 1 != length) continue;
    ++same_length;
    if (cw == first_row || gw == 0) {
      gw = cw;
      gh = ch;
    }
    if (cw == first_row) break;
  }
  if (same_length == 0 || (same_length > 1 && gw != first_row)) {
    return absl::InvalidArgumentError(absl::StrCat("token_grids[", image, "]: ", length, " tokens with a first row of ",
                                                   first_row,
                                                   " codes are no supported size's decode sequence (h rows of w "
                                                   "codes with a row end between rows)"));
  }
  Emu3CodeGrid g;
  g.grid_w = gw;
  g.grid_h = gh;
  g.codes.reserve(static_cast<size_t>(gw) * gh);
  for (int32_t t = 0; t < length; ++t) {
    const int32_t id = tokens[t];
    if (t % (gw + 1) == gw) {
      if (id != ids.row_end) {
        return absl::InvalidArgumentError(
            absl::StrCat("token_grids[", image, "][", t, "]: id ", id, " where the row end ", ids.row_end, " belongs"));
      }
      continue;
    }
    const int32_t code = id - ids.first_visual;
    if (code < 0 || code >= codebook_size) {
      return absl::InvalidArgumentError(absl::StrCat("token_grids[", image, "][", t, "]: id ", id,
                                                     " is not a visual token [", ids.first_visual, ", ",
                                                     ids.first_visual + codebook_size, ")"));
    }
    g.codes.push_back(code);
  }
  return g;
}

model::PromptEncoder Emu3PromptEncoder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer, Emu3TokenIds ids,
                                       int32_t grid_w, int32_t grid_h, std::string negative_prompt) {
  return model::PromptEncoder([tokenizer, ids, grid_w, grid_h, negative_prompt](const model::PromptText& text)
                                  -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
    // The request's negative prompt, else the recipe's (empty: Emu3's default).
    const std::string& negative = text.negative_prompt.empty() ? negative_prompt : text.negative_prompt;
    absl::StatusOr<Emu3PromptIds> p = BuildEmu3Prompt(*tokenizer, ids, text.caption, negative, grid_w, grid_h, 0);
    if (!p.ok()) return p.status();
    return std::make_pair(std::move(p->cond), std::move(p->uncond));
  });
}

absl::StatusOr<families::FamilyModel> LoadEmu3(const std::string& model_dir, const families::FamilyOptions& options) {
  absl::StatusOr<Emu3Options> emu3_options = ParseEmu3Options(options);
  if (!emu3_options.ok()) return emu3_options.status();
  absl::StatusOr<Emu3Config> config = LoadEmu3Config(model_dir);
  if (!config.ok()) return config.status();
  const std::string vision_dir = VisionDir(model_dir, *emu3_options);
  emu3vq::Emu3VqConfig vq = config->vq;
  if (config->layout == Emu3Layout::kBaai) {
    absl::StatusOr<emu3vq::Emu3VqConfig> read = LoadBaaiVisionConfig(vision_dir);
    if (!read.ok()) return read.status();
    vq = *read;
  } else if (!emu3_options->vision_tokenizer_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("family option '", kVisionTokenizerDirOption,
                     "': the transformers layout (Emu3-Gen-hf) holds its vision tokenizer in the checkpoint"));
  }
  absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> tok = LoadEmu3Tokenizer(model_dir, config->layout);
  if (!tok.ok()) return tok.status();
  absl::StatusOr<Emu3TokenIds> ids = FindEmu3Tokens(**tok, vq.codebook_size);
  if (!ids.ok()) return ids.status();
  if (absl::Status s = CheckConfigIds(*config, *ids, model_dir); !s.ok()) return s;

  const int32_t f = vq.spatial_factor();
  std::vector<std::pair<int32_t, int32_t>> sizes;
  for (const auto& [w, h] : Emu3Sizes(config->image_area, f)) {
    if ((h / f) * (w / f + 1) < config->max_position_embeddings) sizes.emplace_back(w, h);  // room for a prompt
  }
  const std::pair<int32_t, int32_t> served = Emu3DefaultSize(config->image_area, f);
  const std::string rule = Emu3SizeRule(config->image_area, f);
  absl::StatusOr<Emu3Schedule> schedule = MakeEmu3Schedule(sizes, served.first, served.second, f, ids->row_end, rule);
  if (!schedule.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("config.json: image_area ", config->image_area,
                     " gives no servable default size: ", schedule.status().message()));
  }

  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(model_dir);
  if (!ckpt.ok()) return ckpt.status();
  absl::StatusOr<Emu3TensorNames> names = FindEmu3TensorNames(**ckpt, config->layout);
  if (!names.ok()) return names.status();
  absl::StatusOr<model::ModelSpec> spec = Emu3Spec(*config, *names, ids->first_visual, vq.codebook_size);
  if (!spec.ok()) return spec.status();
  if (config->layout == Emu3Layout::kTransformers) {
    // The vision decoder's tensors are in this checkpoint: validated with the rest, before anything loads.
    for (auto& [name, shape] : emu3vq::Emu3VqTensorNames(vq, emu3vq::Emu3VqNaming::kTransformers, names->vq)) {
      spec->decoder_tensors.push_back(model::Tensor(name, shape));
    }
  }

  families::FamilyModel m;
  m.family = "emu3";
  m.spec = *std::move(spec);
  m.image_size = std::max(schedule->width, schedule->height);
  m.image_width = schedule->width;
  m.image_height = schedule->height;
  m.token_grid = std::max(schedule->grid_w, schedule->grid_h);
  m.image_tokens = schedule->l_dec;
  m.grid = schedule->grid;
  m.forced_tokens = schedule->forced;
  m.max_position_embeddings = config->max_position_embeddings;
  m.default_sampling.cfg_weight = kDefaultCfgWeight;
  m.default_sampling.top_k = std::min(kDefaultImageTopK, vq.codebook_size);
  m.default_sampling.temperature = 1.0f;
  m.size_rule = rule;
  for (const auto& [w, h] : sizes) {
    absl::StatusOr<Emu3Schedule> s = MakeEmu3Schedule(sizes, w, h, f, ids->row_end, rule);
    if (!s.ok()) return s.status();
    m.image_layouts.push_back(LayoutOf(*s));
  }
  std::shared_ptr<const tokenizer::Tokenizer> shared_tok = *std::move(tok);
  const Emu3TokenIds token_ids = *ids;
  const int32_t gw = schedule->grid_w, gh = schedule->grid_h;
  m.make_prompt = [shared_tok, token_ids, gw, gh]() -> absl::StatusOr<model::PromptEncoder> {
    return Emu3PromptEncoder(shared_tok, token_ids, gw, gh);
  };
  m.make_recipes = [shared_tok, token_ids, sizes, f, rule]() -> absl::StatusOr<model::ImageRecipeMaker> {
    return model::ImageRecipeMaker([shared_tok, token_ids, sizes, f,
                                    rule](const engine::ImageLayout& layout) -> absl::StatusOr<model::ImageRecipe> {
      absl::StatusOr<Emu3Schedule> s = MakeEmu3Schedule(sizes, layout.width, layout.height, f, token_ids.row_end, rule);
      if (!s.ok()) return s.status();
      return model::ImageRecipe{LayoutOf(*s), s->forced,
                                Emu3PromptEncoder(shared_tok, token_ids, s->grid_w, s->grid_h)};
    });
  };
  DecodeModel decode_model{sizes, served, f, token_ids, vq.codebook_size};
  const Emu3Config cfg = *config;
  const std::string vq_prefix = names->vq;
  m.make_decoder = [cfg, vq, vision_dir, vq_prefix, decode_model](const checkpoint::Checkpoint& checkpoint,
                                                                  const families::DecoderOptions& decoder_options) {
    return MakeDecoder(checkpoint, cfg, vq, vision_dir, vq_prefix, decode_model, decoder_options);
  };
  return m;
}

families::Family Emu3Family() {
  families::Family f;
  f.name = "emu3";
  f.matches = "model_type Emu3 (BAAI) or emu3 (transformers)";
  f.recognises = [](const families::ConfigIdentity& id) { return id.model_type == "Emu3" || id.model_type == "emu3"; };
  f.load = LoadEmu3;
  return f;
}

}  // namespace argen::emu3
