// CreateEngine: checkpoint directory -> its model family -> GenericEngine over
// the chosen backend, with the family's image decoder and prompt recipe.
#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/engine.h"
#include "engine/families/registry.h"
#include "engine/model/backend_registry.h"
#include "engine/model/create_engine.h"
#include "engine/model/finite_values.h"
#include "engine/model/weight_source.h"
#include "engine/request_rules.h"
#include "engine/sparse/ssd_heads.h"
#include "engine/vq/vq_precision.h"

namespace argen::model {
namespace {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const engine::EngineOptions& options, const ModelSpec& spec,
                                                     std::shared_ptr<const WeightSource> weights,
                                                     const BackendOptions& backend_options) {
  if (options.backend == "cpu") return CreateCpuBackend(spec, std::move(weights), backend_options);
  if (options.backend == "cuda") {
#if defined(ARGEN_WITH_CUDA)
    return CreateCudaBackend(spec, std::move(weights), backend_options);
#else
    return absl::UnimplementedError(
        "backend \"cuda\": this build has no CUDA backend (configure with ARGEN_CUDA=ON where nvcc "
        "exists)");
#endif
  }
  return absl::InvalidArgumentError(absl::StrCat("backend must be \"cpu\" or \"cuda\", got \"", options.backend, "\""));
}

// EngineOptions::vq_backend: "auto", "cpu" or "cuda"; "cuda" only in a CUDA build.
absl::Status ValidateVqBackend(const engine::EngineOptions& options) {
  if (options.vq_backend != "auto" && options.vq_backend != "cpu" && options.vq_backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("vq_backend must be \"auto\", \"cpu\" or \"cuda\", got \"", options.vq_backend, "\""));
  }
  if (absl::StatusOr<vq::DecoderPrecision> p = vq::ParseDecoderPrecision(options.vq_precision); !p.ok()) {
    return p.status();
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

std::string ModelName(const std::string& model_dir) {
  const std::filesystem::path p = std::filesystem::path(model_dir).lexically_normal();
  std::string name = p.filename().string();
  if (name.empty()) name = p.parent_path().filename().string();
  return name;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GenericEngine>> CreateGenericEngine(const engine::EngineOptions& options,
                                                                   PromptEncoder encoder) {
  if (options.backend != "cpu" && options.backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("backend must be \"cpu\" or \"cuda\", got \"", options.backend, "\""));
  }
  if (options.max_batch_rows != 0 && options.max_batch_rows < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_rows must be >= 2 (one CFG pair) or 0 (auto), got ", options.max_batch_rows));
  }
  if (options.max_images_per_request < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_images_per_request must be >= 1, got ", options.max_images_per_request));
  }
  if (options.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 0, got ", options.threads));
  }
  if (absl::Status s = ValidateVqBackend(options); !s.ok()) return s;
  if (options.kv_budget_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv_budget_bytes must be >= 0, got ", options.kv_budget_bytes));
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(options.model_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model_dir \"", options.model_dir, "\" is not a directory"));
  }
  absl::StatusOr<families::FamilyModel> family = families::LoadFamilyModel(options.model_dir, options.family_options);
  if (!family.ok()) return family.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> opened =
      family->open_checkpoint        ? family->open_checkpoint()
      : family->weights_file.empty() ? checkpoint::Checkpoint::Open(options.model_dir)
                                     : checkpoint::OpenCheckpointFile(family->weights_file);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const checkpoint::Checkpoint> ckpt(std::move(*opened));
  // The family's one tensor map, checked in full before anything loads.
  if (absl::Status s = ValidateTensors(*ckpt, family->spec); !s.ok()) return s;

  // Before the backend: a GPU decoder's buffers are then out of the memory a
  // backend sizing its KV pool from what is free sees.
  const bool gpu_decoder = options.vq_backend == "cuda" || (options.vq_backend == "auto" && options.backend == "cuda");
  const vq::DecoderPrecision vq_precision = *vq::ParseDecoderPrecision(options.vq_precision);  // validated above
  if (!gpu_decoder && vq::NeedsGpuDecoder(vq_precision)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vq_precision \"", options.vq_precision,
        "\" needs the GPU VQ decoder (vq_backend \"cuda\", or \"auto\" with backend \"cuda\"); the CPU one is fp32"));
  }
  // NaN/Inf in the decoder's tensors is a load error too (engine/model/finite_values.h;
  // the stack's tensors are checked by CheckpointWeights).
  absl::StatusOr<ImageDecoder> decode = family->make_decoder(*FiniteWeightsView(ckpt), {gpu_decoder, vq_precision});
  if (!decode.ok()) {
    if (!gpu_decoder) return decode.status();
    return absl::Status(decode.status().code(), absl::StrCat("vq_backend \"cuda\": ", decode.status().message()));
  }

  // A continuous-token model's output stage, which its backend runs; its
  // decode loop feeds vectors, so nothing can be forced.
  std::shared_ptr<const TokenHead> token_head;
  if (family->spec.vector_tokens()) {
    if (!family->make_token_head || !family->forced_tokens.empty()) {
      return absl::InternalError(absl::StrCat("family ", family->family,
                                              ": a continuous-token model needs a token head and forces no tokens"));
    }
    absl::StatusOr<std::shared_ptr<const TokenHead>> head = family->make_token_head(*FiniteWeightsView(ckpt));
    if (!head.ok()) return head.status();
    token_head = *std::move(head);
  }

  GenericEngineConfig engine_config;
  engine_config.forced_tokens = family->forced_tokens;
  engine_config.share_prompt_kv = options.share_prompt_kv;
  engine_config.share_prompt_kv_across_requests = options.share_prompt_kv_across_requests;
  // Every size's recipe, made on demand from one tokenizer (the default
  // size's encoder is `encoder` when given).
  if (family->make_recipes) {
    absl::StatusOr<ImageRecipeMaker> recipes = family->make_recipes();
    if (!recipes.ok()) return recipes.status();
    engine_config.make_recipe = *std::move(recipes);
  }
  engine::ModelInfo& info = engine_config.info;
  const StackConfig& stack = family->spec.stack;
  info.name = ModelName(options.model_dir);
  info.family = family->family;
  info.backend = options.backend;
  info.image_size = family->image_size;
  info.token_grid = family->token_grid;
  info.image_tokens = family->image_tokens;
  info.grid = family->grid;
  info.default_width = family->image_width;
  info.default_height = family->image_height;
  info.image_layouts = family->image_layouts;
  info.size_rule = family->size_rule;
  info.default_sampling = family->default_sampling;
  info.num_classes = family->num_classes;
  engine_config.class_encoder = family->class_encoder;
  if (family->make_prompt_embedder) {
    absl::StatusOr<PromptEmbedder> embedder = family->make_prompt_embedder({options.backend == "cuda"});
    if (!embedder.ok()) return embedder.status();
    engine_config.prompt_embedder = *std::move(embedder);
  }
  // The default size's prompt recipe: from the recipe maker where the family
  // has one (so its tokenizer is read once at start), else the family's own.
  if (encoder == nullptr && engine_config.make_recipe) {
    absl::StatusOr<ImageRecipe> recipe = engine_config.make_recipe(engine::DefaultLayout(info));
    if (!recipe.ok()) return recipe.status();
    encoder = std::move(recipe->encoder);
  }
  if (encoder == nullptr) {
    absl::StatusOr<PromptEncoder> made = family->make_prompt();
    if (!made.ok()) return made.status();
    encoder = *std::move(made);
  }
  // Positions beyond the prompt hold the decode tokens, of the longest size.
  const int32_t max_image_tokens = engine::MaxImageTokens(info);
  info.max_prompt_tokens =
      std::max(0, std::min(family->max_position_embeddings - max_image_tokens, kDefaultMaxPromptTokens));
  info.max_images_per_request = options.max_images_per_request;
  // 0: auto (cpu: 64; cuda: the backend sizes it, and the engine takes it from the backend).
  const int32_t rows = options.max_batch_rows == 0 && options.backend != "cuda" ? 64 : options.max_batch_rows;
  info.max_batch_rows = rows;
  info.num_layers = stack.num_layers;
  info.num_heads = stack.num_heads;
  info.num_kv_heads = stack.num_kv_heads;
  info.head_dim = stack.head_dim;
  info.hidden_size = stack.hidden_size;

  BackendOptions backend_options;
  backend_options.threads = options.threads;
  backend_options.kv_budget_bytes = options.kv_budget_bytes;
  backend_options.max_batch_rows = rows;
  backend_options.max_prompt_tokens = info.max_prompt_tokens;
  // The longest L_dec of any size: the CUDA backend plans its policy buffers for it.
  backend_options.decode_tokens = max_image_tokens;
  backend_options.reference_kv_format = options.default_kv_format;
  backend_options.reference_guidance_shared = options.share_prompt_kv && options.share_prompt_kv_across_requests;
  backend_options.weight_format = options.weight_format;
  backend_options.token_head = std::move(token_head);
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      MakeBackend(options, family->spec, CheckpointWeights(ckpt), backend_options);
  if (!backend.ok()) return backend.status();
  // The engine takes the pool size and the KV row size from the backend.
  // ssd's head classification, when the model ships one.
  const std::string ssd_path = (std::filesystem::path(options.model_dir) / sparse::kSsdHeadsFile).string();
  if (std::filesystem::exists(ssd_path, ec)) {
    absl::StatusOr<sparse::HeadClasses> heads = sparse::LoadHeadClasses(ssd_path);
    if (!heads.ok()) return heads.status();
    if (heads->layers != stack.num_layers || heads->kv_heads != stack.num_kv_heads) {
      return absl::InvalidArgumentError(absl::StrCat(ssd_path, ": classifies ", heads->layers, " layers x ",
                                                     heads->kv_heads, " kv heads, the model has ", stack.num_layers,
                                                     " x ", stack.num_kv_heads));
    }
    engine_config.ssd_heads = std::make_shared<const sparse::HeadClasses>(*std::move(heads));
  }
  return std::make_unique<GenericEngine>(*std::move(backend), std::move(encoder), *std::move(decode),
                                         std::move(engine_config));
}

}  // namespace argen::model

namespace argen::engine {

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(const EngineOptions& options) {
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> engine = model::CreateGenericEngine(options);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<Engine>(std::move(*engine));
}

}  // namespace argen::engine
