#include "engine/families/anole/anole_family.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/families/anole/anole_prompt.h"
#include "engine/families/anole/meta_checkpoint.h"
#include "engine/families/anole/meta_params.h"
#include "engine/families/lumina/chameleon_vocab.h"
#include "engine/families/lumina/lumina_config.h"
#include "engine/families/lumina/lumina_spec.h"
#include "engine/families/lumina/lumina_vq16.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_decoder.h"
#include "engine/vqgan/vqgan_weights.h"
#include "nlohmann/json.hpp"
#if defined(ARGEN_WITH_CUDA)
#include "engine/vq_cuda/cuda_vq_decoder.h"
#endif

namespace argen::anole {
namespace {

namespace fs = std::filesystem;
using lumina::ImageTokenRange;
using lumina::LuminaConfig;

inline constexpr char kVqganDirOption[] = "vqgan_dir";
inline constexpr int32_t kImageTokens = kGridSide * kGridSide;

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

absl::Status RequireFile(const fs::path& path, const std::string& what) {
  if (IsFile(path)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat(what, " ", path.string(), " is missing"));
}

// What differs between the two layouts; the rest of the load is shared.
struct Layout {
  bool meta = false;
  LuminaConfig config;                                 // vocabulary_map filled in both
  std::string tokenizer_file;                          // tokenizer.json or text_tokenizer.json
  std::string vqgan_dir;                               // vqgan.yaml, vqgan.ckpt
  std::string weights_file;                            // Meta: consolidated.pth
  std::vector<std::pair<std::string, int32_t>> vocab;  // name -> id, for the image tokens
};

std::string ReadText(const fs::path& path, absl::Status* status) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *status = absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
    return {};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// text_tokenizer.json's vocabulary: model.vocab, as Anole's VocabInfo reads it.
absl::StatusOr<std::vector<std::pair<std::string, int32_t>>> TokenizerVocab(const std::string& path) {
  absl::Status status;
  const std::string text = ReadText(path, &status);
  if (!status.ok()) return status;
  const nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat(path, ": ", why)); };
  if (root.is_discarded() || !root.is_object()) return bad("malformed JSON");
  auto model = root.find("model");
  if (model == root.end() || !model->is_object()) return bad("field 'model' is missing");
  auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object()) return bad("field 'model.vocab' must be an object of token -> id");
  std::vector<std::pair<std::string, int32_t>> out;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return bad(absl::StrCat("field 'model.vocab.", it.key(), "' must be a non-negative integer id"));
    }
    out.emplace_back(it.key(), it.value().get<int32_t>());
  }
  return out;
}

// The vqgan_dir option (relative to the served directory `base`, or absolute), else `fallback`.
std::string VqganDir(const families::FamilyOptions& options, const fs::path& base, const fs::path& fallback) {
  auto it = options.find(kVqganDirOption);
  if (it == options.end() || it->second.empty()) return fallback.string();
  const fs::path p(it->second);
  return (p.is_absolute() ? p : base / p).string();
}

absl::StatusOr<Layout> HfLayout(const std::string& model_dir, const families::FamilyOptions& options) {
  Layout l;
  absl::StatusOr<LuminaConfig> config = lumina::LoadLuminaConfig(model_dir);
  if (!config.ok()) return config.status();
  l.config = *std::move(config);
  l.vocab = l.config.vocabulary_map;
  l.tokenizer_file = (fs::path(model_dir) / "tokenizer.json").string();
  l.vqgan_dir = VqganDir(options, model_dir, fs::path(model_dir) / "tokenizer");
  return l;
}

absl::StatusOr<Layout> MetaLayout(const std::string& model_dir, const families::FamilyOptions& options) {
  // GAIR/Anole-7b-v0.1: <root>/models/7b/{params.json, consolidated.pth}, <root>/tokenizer/...
  fs::path dir = fs::path(model_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();                 // a trailing separator
  fs::path weights_dir = dir, root = dir.parent_path().parent_path();  // served: models/7b itself
  for (const char* size : {"7b", "30b"}) {
    if (IsFile(dir / "models" / size / "params.json")) {
      weights_dir = dir / "models" / size;
      root = dir;
      break;
    }
  }
  Layout l;
  l.meta = true;
  if (IsFile(weights_dir / "consolidated.01.pth")) {
    return absl::InvalidArgumentError(
        absl::StrCat(weights_dir.string(),
                     ": a checkpoint sharded over consolidated.00.pth, 01, ... (Chameleon-30B) is not "
                     "supported; argen reads one consolidated.pth"));
  }
  for (const char* name : {"consolidated.pth", "consolidated.00.pth"}) {
    if (IsFile(weights_dir / name)) {
      l.weights_file = (weights_dir / name).string();
      break;
    }
  }
  if (l.weights_file.empty()) {
    return absl::NotFoundError(
        absl::StrCat("model weights ", (weights_dir / "consolidated.pth").string(), " are missing (Meta's layout)"));
  }
  absl::StatusOr<LuminaConfig> config = LoadMetaParams((weights_dir / "params.json").string());
  if (!config.ok()) return config.status();
  l.config = *std::move(config);
  l.vqgan_dir = VqganDir(options, dir, root / "tokenizer");
  l.tokenizer_file = (fs::path(l.vqgan_dir) / "text_tokenizer.json").string();
  if (absl::Status s = RequireFile(l.tokenizer_file, "text tokenizer"); !s.ok()) return s;
  absl::StatusOr<std::vector<std::pair<std::string, int32_t>>> vocab = TokenizerVocab(l.tokenizer_file);
  if (!vocab.ok()) return vocab.status();
  l.vocab = *std::move(vocab);
  for (const auto& [name, id] : l.vocab) {
    if (id >= l.config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(l.tokenizer_file, ": token \"", name, "\" has id ", id,
                                                     ", outside params.json's vocab_size ", l.config.vocab_size));
    }
  }
  std::sort(l.vocab.begin(), l.vocab.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  l.config.vocabulary_map = l.vocab;
  return l;
}

absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> LoadTokenizer(const Layout& layout) {
  absl::StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::LoadFromFile(layout.tokenizer_file);
  if (!tok.ok()) return tok.status();
  auto shared = std::make_shared<const tokenizer::Tokenizer>(*std::move(tok));
  absl::StatusOr<AnoleTokenIds> ids = FindAnoleTokens(*shared);
  if (!ids.ok()) return ids.status();
  // The tokenizer and the vocabulary the image tokens came from must agree on the loop's ids.
  for (auto [name, id] : {std::pair{kBosToken, ids->bos}, std::pair{kEndOfTurnToken, ids->end_of_turn},
                          std::pair{kBeginImageToken, ids->begin_image}, std::pair{kEndImageToken, ids->end_image}}) {
    auto it = std::find_if(layout.vocab.begin(), layout.vocab.end(), [&](const auto& e) { return e.first == name; });
    if (it == layout.vocab.end() || it->second != id) {
      return absl::FailedPreconditionError(absl::StrCat(
          layout.tokenizer_file, " gives '", name, "' id ", id, ", the ",
          layout.meta ? "text tokenizer's vocab " : "config.json vocabulary_map ",
          it == layout.vocab.end() ? std::string("has no such token") : absl::StrCat("says ", it->second)));
    }
  }
  return std::shared_ptr<const tokenizer::Tokenizer>(std::move(shared));
}

model::PromptEncoder AnoleEncoder(std::shared_ptr<const tokenizer::Tokenizer> tokenizer) {
  return model::PromptEncoder([tokenizer](const model::PromptText& text)
                                  -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
    absl::StatusOr<AnolePromptIds> p = BuildAnolePrompt(*tokenizer, text.caption, text.negative_prompt, 0);
    if (!p.ok()) return p.status();
    return std::make_pair(std::move(p->cond), std::move(p->uncond));
  });
}

// 1,024 recorded ids -> VQGAN codes in raster order; errors name the image and position.
absl::StatusOr<std::vector<int32_t>> Codes(const std::vector<int32_t>& tokens, const ImageTokenRange& range,
                                           size_t image) {
  if (static_cast<int32_t>(tokens.size()) != kImageTokens) {
    return absl::InvalidArgumentError(absl::StrCat("token_grids[", image, "]: ", tokens.size(), " tokens, expected ",
                                                   kImageTokens, " (32 x 32 codes)"));
  }
  std::vector<int32_t> codes(tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t offset = tokens[t] - range.first_id;
    if (offset < 0 || offset >= range.count) {
      return absl::InvalidArgumentError(absl::StrCat("token_grids[", image, "][", t, "]: id ", tokens[t],
                                                     " is not an image token [", range.first_id, ", ",
                                                     range.first_id + range.count, ")"));
    }
    codes[t] = range.code_of_offset[offset];
  }
  return codes;
}

absl::StatusOr<model::ImageDecoder> MakeDecoder(const std::string& vqgan_dir, const vqgan::VqganConfig& config,
                                                std::shared_ptr<const ImageTokenRange> range,
                                                const families::DecoderOptions& options) {
  const fs::path ckpt_path = fs::path(vqgan_dir) / "vqgan.ckpt";
  if (absl::Status s = RequireFile(ckpt_path, "VQGAN weights"); !s.ok()) {
    return absl::NotFoundError(absl::StrCat(s.message(), " (Meta's Chameleon image tokenizer; set vqgan_dir)"));
  }
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::OpenCheckpointFile(ckpt_path.string());
  if (!ckpt.ok()) return ckpt.status();
  absl::StatusOr<vqgan::VqganDecoderWeights> weights =
      vqgan::LoadVqganDecoderWeights(vqgan::CheckpointTensorSource(**ckpt), config);
  if (!weights.ok()) return weights.status();
  if (options.gpu) {
#if defined(ARGEN_WITH_CUDA)
    absl::StatusOr<std::pair<vq::VqDecoderWeights, vq::Vq16Config>> vq16 = lumina::AsVq16(*weights, config, kGridSide);
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
    return model::ImageDecoder(
        [decoder,
         range](const std::vector<std::vector<int32_t>>& tokens) -> absl::StatusOr<std::vector<engine::RgbImage>> {
          std::vector<std::vector<int32_t>> grids(tokens.size());
          for (size_t i = 0; i < tokens.size(); ++i) {
            absl::StatusOr<std::vector<int32_t>> codes = Codes(tokens[i], *range, i);
            if (!codes.ok()) return codes.status();
            grids[i] = *std::move(codes);
          }
          return decoder->Decode(grids);
        });
#else
    return absl::UnimplementedError("this build has no CUDA VQ decoder");
#endif
  }
  absl::StatusOr<std::unique_ptr<vqgan::VqganDecoder>> made =
      vqgan::VqganDecoder::Create(*std::move(weights), config, vqgan::DecodeLimits{kImageTokens, kGridSide});
  if (!made.ok()) return made.status();
  std::shared_ptr<vqgan::VqganDecoder> decoder(std::move(*made));
  return model::ImageDecoder(
      [decoder,
       range](const std::vector<std::vector<int32_t>>& tokens) -> absl::StatusOr<std::vector<engine::RgbImage>> {
        std::vector<vqgan::CodeGrid> grids(tokens.size());
        for (size_t i = 0; i < tokens.size(); ++i) {
          absl::StatusOr<std::vector<int32_t>> codes = Codes(tokens[i], *range, i);
          if (!codes.ok()) return codes.status();
          grids[i] = {kGridSide, kGridSide, *std::move(codes)};
        }
        return decoder->Decode(grids);
      });
}

bool NameSaysAnole(const std::string& dir_name) {
  std::string lower = dir_name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("anole") != std::string::npos;
}

}  // namespace

sparse::GridGeometry AnoleGrid() {
  sparse::GridGeometry grid{kGridSide, 0, kImageTokens};  // 32 x 32, no row breaks
  // N_r: 2 2/3 rows, the window measured best on the shipped models (docs/policies.md "Per-family N_r").
  grid.default_n_recent = sparse::RecentRowsWindow(grid, 8, 3);
  return grid;
}

bool IsMetaLayout(const std::string& model_dir) {
  const fs::path dir(model_dir);
  return IsFile(dir / "models" / "7b" / "params.json") || IsFile(dir / "models" / "30b" / "params.json") ||
         (IsFile(dir / "params.json") && !IsFile(dir / "config.json"));
}

absl::StatusOr<families::FamilyModel> LoadAnole(const std::string& model_dir, const families::FamilyOptions& options) {
  if (absl::Status s = families::CheckFamilyOptions("anole", options, {kVqganDirOption}); !s.ok()) return s;
  const bool meta = !IsFile(fs::path(model_dir) / "config.json");
  absl::StatusOr<Layout> layout = meta ? MetaLayout(model_dir, options) : HfLayout(model_dir, options);
  if (!layout.ok()) return layout.status();

  const fs::path yaml_path = fs::path(layout->vqgan_dir) / "vqgan.yaml";
  if (absl::Status s = RequireFile(yaml_path, "VQGAN config"); !s.ok()) {
    return absl::NotFoundError(absl::StrCat(s.message(),
                                            " (Meta's Chameleon image tokenizer: set vqgan_dir to the directory "
                                            "holding vqgan.yaml and vqgan.ckpt)"));
  }
  absl::StatusOr<vqgan::VqganConfig> vq = vqgan::LoadVqganYaml(yaml_path.string());
  if (!vq.ok()) return vq.status();
  absl::StatusOr<ImageTokenRange> range = lumina::BuildImageTokenRange(
      layout->vocab, vq->n_embed, meta ? layout->tokenizer_file + " model.vocab" : "config.json vocabulary_map");
  if (!range.ok()) return range.status();

  families::FamilyModel m;
  lumina::QkNormRows qk{1, 1};  // Meta's one [head_dim] vector per layer, shown as one row
  if (meta) {
    const std::string weights = layout->weights_file;
    const LuminaConfig config = layout->config;
    m.open_checkpoint = [weights, config] { return OpenMetaChameleon(weights, config); };
    // Checked now, so a bad file fails the load naming the Meta tensor.
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> probe = OpenMetaChameleon(weights, config);
    if (!probe.ok()) return probe.status();
  } else {
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(model_dir);
    if (!ckpt.ok()) return ckpt.status();
    absl::StatusOr<lumina::QkNormRows> rows = lumina::ReadQkNormRows(**ckpt, layout->config);
    if (!rows.ok()) return rows.status();
    qk = *rows;
  }
  absl::StatusOr<model::ModelSpec> spec = lumina::LuminaSpec(layout->config, range->first_id, range->count, qk);
  if (!spec.ok()) return spec.status();

  m.family = "anole";
  m.spec = *std::move(spec);
  const int32_t pixels = kGridSide * vq->downsample();
  m.image_size = m.image_width = m.image_height = pixels;
  m.token_grid = kGridSide;
  m.image_tokens = kImageTokens;
  m.grid = AnoleGrid();
  m.image_layouts = {engine::ImageLayout{pixels, pixels, kGridSide, kGridSide, kImageTokens, m.grid}};
  m.max_position_embeddings = layout->config.max_position_embeddings;
  m.default_sampling.cfg_weight = kDefaultCfgWeight;
  m.default_sampling.temperature = kDefaultTemperature;
  m.default_sampling.top_p = kDefaultTopP;
  m.default_sampling.top_k = 0;
  const Layout shared_layout = *layout;
  m.make_prompt = [shared_layout]() -> absl::StatusOr<model::PromptEncoder> {
    absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> tok = LoadTokenizer(shared_layout);
    if (!tok.ok()) return tok.status();
    return AnoleEncoder(*std::move(tok));
  };
  auto shared_range = std::make_shared<const ImageTokenRange>(*std::move(range));
  const vqgan::VqganConfig vq_config = *vq;
  const std::string vq_dir = layout->vqgan_dir;
  m.make_decoder = [vq_dir, vq_config, shared_range](const checkpoint::Checkpoint&,
                                                     const families::DecoderOptions& decoder_options) {
    return MakeDecoder(vq_dir, vq_config, shared_range, decoder_options);
  };
  return m;
}

families::Family AnoleFamily() {
  families::Family f;
  f.name = "anole";
  f.matches = "model_type chameleon in a directory named *anole*, or Meta's models/7b/params.json";
  f.recognises = [](const families::ConfigIdentity& id) {
    return id.model_type == "chameleon" && NameSaysAnole(id.dir_name);
  };
  f.recognises_dir = IsMetaLayout;
  f.load = LoadAnole;
  return f;
}

}  // namespace argen::anole
