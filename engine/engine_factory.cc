// CreateEngine: checkpoint directory -> GenericEngine over the chosen backend,
// with the VQ decoder and the checkpoint's tokenizer.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/janus_config.h"
#include "engine/engine.h"
#include "engine/model/backend_registry.h"
#include "engine/model/create_engine.h"
#include "engine/model/model_dims.h"
#include "engine/sparse/ssd_heads.h"
#include "engine/vq/vq_decoder.h"
#if defined(ARGEN_WITH_CUDA)
#include "engine/vq_cuda/cuda_vq_decoder.h"
#endif

namespace argen::model {
namespace {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(
    const engine::EngineOptions& options, std::shared_ptr<const checkpoint::Checkpoint> ckpt,
    const ModelDims& dims, const BackendOptions& backend_options) {
  if (options.backend == "cpu") return CreateCpuBackend(std::move(ckpt), dims, backend_options);
  if (options.backend == "cuda") {
#if defined(ARGEN_WITH_CUDA)
    return CreateCudaBackend(std::move(ckpt), dims, backend_options);
#else
    return absl::UnimplementedError(
        "backend \"cuda\": this build has no CUDA backend (configure with ARGEN_CUDA=ON where nvcc "
        "exists)");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend must be \"cpu\" or \"cuda\", got \"", options.backend, "\""));
}

// EngineOptions::vq_backend: "auto", "cpu" or "cuda"; "cuda" only in a CUDA build.
absl::Status ValidateVqBackend(const engine::EngineOptions& options) {
  if (options.vq_backend != "auto" && options.vq_backend != "cpu" && options.vq_backend != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat(
        "vq_backend must be \"auto\", \"cpu\" or \"cuda\", got \"", options.vq_backend, "\""));
  }
  if (options.vq_precision != "auto" && options.vq_precision != "fp32" && options.vq_precision != "tf32" &&
      options.vq_precision != "bf16") {
    return absl::InvalidArgumentError(absl::StrCat(
        "vq_precision must be \"auto\", \"fp32\", \"tf32\" or \"bf16\", got \"", options.vq_precision, "\""));
  }
#if !defined(ARGEN_WITH_CUDA)
  if (options.vq_backend == "cuda") {
    return absl::UnimplementedError(
        "vq_backend \"cuda\": this build has no CUDA VQ decoder (configure with ARGEN_CUDA=ON where nvcc "
        "exists)");
  }
#endif
  return absl::OkStatus();
}

// The VQ decoder EngineOptions::vq_backend picks ("auto": the GPU one with the cuda backend).
absl::StatusOr<ImageDecoder> MakeImageDecoder(const engine::EngineOptions& options,
                                              const checkpoint::Checkpoint& ckpt,
                                              const checkpoint::GenVisionConfig& config) {
  const bool gpu = options.vq_backend == "cuda" || (options.vq_backend == "auto" && options.backend == "cuda");
  if (!gpu && options.vq_precision != "auto" && options.vq_precision != "fp32") {
    return absl::InvalidArgumentError(absl::StrCat(
        "vq_precision \"", options.vq_precision,
        "\" needs the GPU VQ decoder (vq_backend \"cuda\", or \"auto\" with backend \"cuda\"); the CPU one is fp32"));
  }
  if (gpu) {
#if defined(ARGEN_WITH_CUDA)
    vq::CudaVqOptions vq_options;
    vq_options.precision = options.vq_precision == "fp32"   ? vq::VqPrecision::kFp32
                           : options.vq_precision == "tf32" ? vq::VqPrecision::kTf32
                                                            : vq::VqPrecision::kBf16;
    vq_options.fallback_to_fp32 = options.vq_precision == "auto";
    absl::StatusOr<std::unique_ptr<vq::CudaVqDecoder>> vq = vq::CudaVqDecoder::Create(ckpt, config, vq_options);
    if (!vq.ok()) {
      return absl::Status(vq.status().code(),
                          absl::StrCat("vq_backend \"cuda\": ", vq.status().message()));
    }
    std::shared_ptr<vq::CudaVqDecoder> decoder(std::move(*vq));
    return ImageDecoder([decoder](const std::vector<std::vector<int32_t>>& grids) {
      return decoder->Decode(grids);
    });
#else
    return absl::UnimplementedError("vq_backend \"cuda\": this build has no CUDA VQ decoder");
#endif
  }
  absl::StatusOr<std::unique_ptr<vq::VqDecoder>> vq = vq::VqDecoder::Create(ckpt, config);
  if (!vq.ok()) return vq.status();
  std::shared_ptr<vq::VqDecoder> decoder(std::move(*vq));
  return ImageDecoder([decoder](const std::vector<std::vector<int32_t>>& grids) {
    return decoder->Decode(grids);
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<GenericEngine>> CreateGenericEngine(
    const engine::EngineOptions& options, PromptEncoder encoder) {
  if (options.backend != "cpu" && options.backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("backend must be \"cpu\" or \"cuda\", got \"", options.backend, "\""));
  }
  if (options.max_batch_rows < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_rows must be >= 2 (one CFG pair), got ", options.max_batch_rows));
  }
  if (options.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 0, got ", options.threads));
  }
  if (absl::Status s = ValidateVqBackend(options); !s.ok()) return s;
  if (options.kv_budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_budget_bytes must be >= 0, got ", options.kv_budget_bytes));
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(options.model_dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("model_dir \"", options.model_dir, "\" is not a directory"));
  }
  absl::StatusOr<checkpoint::JanusConfig> config = checkpoint::LoadJanusConfig(options.model_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<ModelDims> dims = ModelDimsFromConfig(*config);
  if (!dims.ok()) return dims.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> opened =
      checkpoint::Checkpoint::Open(options.model_dir);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const checkpoint::Checkpoint> ckpt(std::move(*opened));

  // Before the backend: a GPU decoder's buffers are then out of the memory a
  // backend sizing its KV pool from what is free sees.
  absl::StatusOr<ImageDecoder> decode = MakeImageDecoder(options, *ckpt, config->gen_vision);
  if (!decode.ok()) return decode.status();

  if (encoder == nullptr) {
    absl::StatusOr<PromptEncoder> from_tokenizer = TokenizerPromptEncoder(options.model_dir);
    if (!from_tokenizer.ok()) return from_tokenizer.status();
    encoder = *std::move(from_tokenizer);
  }

  GenericEngineConfig engine_config;
  engine_config.max_batch_rows = options.max_batch_rows;
  engine::ModelInfo& info = engine_config.info;
  info.name = std::filesystem::path(options.model_dir).lexically_normal().filename().string();
  if (info.name.empty()) {
    info.name = std::filesystem::path(options.model_dir)
                    .lexically_normal()
                    .parent_path()
                    .filename()
                    .string();
  }
  info.backend = options.backend;
  info.image_size = config->gen_vision.image_size;
  info.token_grid = config->gen_vision.token_grid();
  info.image_tokens = config->gen_vision.image_tokens();
  info.image_vocab = dims->image_vocab;
  // Positions beyond the prompt hold the image tokens.
  info.max_prompt_tokens =
      std::max(0, std::min(config->language.max_position_embeddings - info.image_tokens,
                           kDefaultMaxPromptTokens));
  info.num_layers = dims->num_layers;
  info.num_heads = dims->num_heads;
  info.num_kv_heads = dims->num_kv_heads;
  info.head_dim = dims->head_dim;
  info.hidden_size = dims->hidden_size;

  BackendOptions backend_options;
  backend_options.threads = options.threads;
  backend_options.kv_budget_bytes = options.kv_budget_bytes;
  backend_options.max_batch_rows = options.max_batch_rows;
  backend_options.max_prompt_tokens = info.max_prompt_tokens;
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      MakeBackend(options, ckpt, *dims, backend_options);
  if (!backend.ok()) return backend.status();
  info.kv_bytes_per_token_row = (*backend)->KvBytesPerTokenRow();
  // Janus layout: a square grid without row breaks.
  engine_config.grid = sparse::GridGeometry{info.token_grid, 0, info.image_tokens};
  // ssd's head classification, when the model ships one.
  const std::string ssd_path = (std::filesystem::path(options.model_dir) / sparse::kSsdHeadsFile).string();
  if (std::filesystem::exists(ssd_path, ec)) {
    absl::StatusOr<sparse::HeadClasses> heads = sparse::LoadHeadClasses(ssd_path);
    if (!heads.ok()) return heads.status();
    if (heads->layers != dims->num_layers || heads->kv_heads != dims->num_kv_heads) {
      return absl::InvalidArgumentError(absl::StrCat(ssd_path, ": classifies ", heads->layers, " layers x ",
                                                     heads->kv_heads, " kv heads, the model has ", dims->num_layers,
                                                     " x ", dims->num_kv_heads));
    }
    engine_config.ssd_heads = std::make_shared<const sparse::HeadClasses>(*std::move(heads));
  }

  return std::make_unique<GenericEngine>(*std::move(backend), std::move(encoder), *std::move(decode),
                                         std::move(engine_config));
}

}  // namespace argen::model

namespace argen::engine {

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(const EngineOptions& options) {
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> engine =
      model::CreateGenericEngine(options);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<Engine>(std::move(*engine));
}

}  // namespace argen::engine
