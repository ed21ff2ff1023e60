#include "engine/families/llamagen/llamagen_family.h"

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/families/llamagen/llamagen_config.h"
#include "engine/families/llamagen/llamagen_spec.h"
#include "engine/families/llamagen/llamagen_t2i.h"
#include "engine/families/llamagen/t5_backend.h"
#include "engine/model/finite_values.h"
#include "engine/vq/vq_decoder.h"
#include "engine/vq/vq_weights.h"
#if defined(ARGEN_WITH_CUDA)
#include "engine/vq_cuda/cuda_vq_decoder.h"
#endif

namespace argen::llamagen {
namespace {

namespace fs = std::filesystem;

// vq_ds16_c2i.pt's {"model": VQModel state dict}: the decoder's tensors
// without Janus' gen_vision_model. prefix; the codes are the GPT's logits
// (no id mapping, nothing forced).
absl::StatusOr<model::ImageDecoder> MakeDecoder(const std::string& vq_path, const vq::Vq16Config& config,
                                                const families::DecoderOptions& options) {
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> opened = checkpoint::OpenCheckpointFile(vq_path);
  if (!opened.ok()) return opened.status();
  const std::shared_ptr<const checkpoint::Checkpoint> ckpt = model::FiniteWeightsView(std::move(*opened));
  absl::StatusOr<vq::VqDecoderWeights> weights = vq::LoadVqDecoderWeights(*ckpt, config, /*prefix=*/"");
  if (!weights.ok()) return weights.status();
  if (options.gpu) {
#if defined(ARGEN_WITH_CUDA)
    vq::CudaVqOptions vq_options;
    vq_options.precision = options.precision == vq::DecoderPrecision::kFp32   ? vq::VqPrecision::kFp32
                           : options.precision == vq::DecoderPrecision::kTf32 ? vq::VqPrecision::kTf32
                                                                              : vq::VqPrecision::kBf16;
    vq_options.fallback_to_fp32 = options.precision == vq::DecoderPrecision::kAuto;
    absl::StatusOr<std::unique_ptr<vq::CudaVqDecoder>> vq =
        vq::CudaVqDecoder::Create(*std::move(weights), config, vq_options);
    if (!vq.ok()) return vq.status();
    std::shared_ptr<vq::CudaVqDecoder> decoder(std::move(*vq));
    return model::ImageDecoder(
        [decoder](const std::vector<std::vector<int32_t>>& grids) { return decoder->Decode(grids); });
#else
    return absl::UnimplementedError("this build has no CUDA VQ decoder");
#endif
  }
  absl::StatusOr<std::unique_ptr<vq::VqDecoder>> vq = vq::VqDecoder::Create(*std::move(weights), config);
  if (!vq.ok()) return vq.status();
  std::shared_ptr<vq::VqDecoder> decoder(std::move(*vq));
  return model::ImageDecoder(
      [decoder](const std::vector<std::vector<int32_t>>& grids) { return decoder->Decode(grids); });
}

}  // namespace

absl::StatusOr<families::FamilyModel> LoadLlamaGen(const std::string& model_dir, const std::string& t5_dir,
                                                   const std::string& t5_backend) {
  absl::StatusOr<T5Backend> t5_device = ParseT5Backend(t5_backend);
  if (!t5_device.ok()) return t5_device.status();
  absl::StatusOr<LlamaGenConfig> config = LoadLlamaGenConfig(model_dir, t5_dir);
  if (!config.ok()) return config.status();
  for (const auto& [key, value] : {std::pair{"t5_dir", &t5_dir}, std::pair{"t5_backend", &t5_backend}}) {
    if (!config->text_conditional && !value->empty()) {
      return absl::InvalidArgumentError(absl::StrCat("family option '", key, "': ", config->gpt_file,
                                                     " is class-conditional and has no text encoder"));
    }
  }
  absl::StatusOr<model::ModelSpec> spec = LlamaGenSpec(*config);
  if (!spec.ok()) return spec.status();
  families::FamilyModel m;
  m.family = "llamagen";
  m.spec = *std::move(spec);
  m.weights_file = (fs::path(model_dir) / config->gpt_file).string();
  m.image_size = config->image_size;
  m.token_grid = config->grid();
  m.image_tokens = config->image_tokens();
  m.grid = sparse::GridGeometry{m.token_grid, 0, m.image_tokens};  // square, raster order, no row breaks
  // N_r: Janus-Pro's measured best window in rows (2 2/3; docs/policies.md "Per-family N_r").
  m.grid.default_n_recent = sparse::RecentRowsWindow(m.grid, 8, 3);
  m.image_layouts = {
      engine::ImageLayout{m.image_size, m.image_size, m.token_grid, m.token_grid, m.image_tokens, m.grid}};
  // The class token or the caption slots, then the image tokens (gpt.py: block_size + cls_token_num positions).
  m.max_position_embeddings = config->cls_token_num + m.image_tokens;
  if (config->text_conditional) {
    SetTextConditioning(*config, m.weights_file, *t5_device, m);
  } else {
    // sample_c2i.py's defaults: cfg 4.0 on every token (cfg_interval -1), top-k 2000, temperature 1, top-p 1.
    m.default_sampling = engine::SamplingParams{};
    m.default_sampling.cfg_weight = 4.0f;
    m.default_sampling.temperature = 1.0f;
    m.default_sampling.top_k = std::min(2000, config->vq.codebook_size);
    m.default_sampling.top_p = 1.0f;
    m.num_classes = config->num_classes;
    // generate.py: cond_null = num_classes, the class table's extra row.
    m.class_encoder = [classes = config->num_classes](
                          int32_t class_id) -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
      if (class_id < 0 || class_id >= classes) {
        return absl::InvalidArgumentError(absl::StrCat("class_id: must be in [0, ", classes, "), got ", class_id));
      }
      return std::make_pair(std::vector<int32_t>{class_id}, std::vector<int32_t>{classes});
    };
    m.make_prompt = []() -> absl::StatusOr<model::PromptEncoder> {
      return model::PromptEncoder(
          [](const model::PromptText&) -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
            return absl::InvalidArgumentError("prompt: LlamaGen c2i is class-conditional: send class_id, not a prompt");
          });
    };
  }
  const std::string vq_path = (fs::path(model_dir) / config->vq_file).string();
  const vq::Vq16Config vq = config->vq;
  m.make_decoder = [vq_path, vq](const checkpoint::Checkpoint&, const families::DecoderOptions& options) {
    return MakeDecoder(vq_path, vq, options);
  };
  return m;
}

families::Family LlamaGenFamily() {
  families::Family f;
  f.name = "llamagen";
  f.matches =
      "model_type llamagen, or a directory with c2i_<size>_<px>.pt or t2i_<size>_stage<k>_<px>.pt and no config.json";
  f.recognises = [](const families::ConfigIdentity& id) { return id.model_type == "llamagen"; };
  f.recognises_dir = [](const std::string& model_dir) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(model_dir, ec)) {
      const std::string name = e.path().filename().string();
      if (IsC2iFileName(name) || IsT2iFileName(name)) return true;
    }
    return false;
  };
  f.load = [name = f.name](const std::string& model_dir,
                           const families::FamilyOptions& options) -> absl::StatusOr<families::FamilyModel> {
    if (absl::Status s = families::CheckFamilyOptions(name, options, {"t5_dir", "t5_backend"}); !s.ok()) return s;
    auto value = [&options](const char* key) {
      const auto it = options.find(key);
      return it == options.end() ? std::string() : it->second;
    };
    return LoadLlamaGen(model_dir, value("t5_dir"), value("t5_backend"));
  };
  return f;
}

}  // namespace argen::llamagen
