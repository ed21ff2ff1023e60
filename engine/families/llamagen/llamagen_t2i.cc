#include "engine/families/llamagen/llamagen_t2i.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/families/llamagen/t2i_prompt.h"
#if defined(ARGEN_WITH_CUDA)
#include "engine/families/llamagen/t5_encoder_cuda.h"
#endif

namespace argen::llamagen {

namespace {

// Why T5 is on the GPU and how to move it, for errors opening it there.
constexpr char kOnGpu[] =
    "the T5 encoder on cuda (family option t5_backend \"cuda\", or unset with backend cuda; t5_backend \"cpu\" "
    "runs it on the host)";

// The T5 encoder on the chosen device (the CPU one is the reference).
absl::StatusOr<std::unique_ptr<T5TextEncoder>> OpenT5(const std::string& t5_dir, bool on_gpu, int32_t slots) {
  if (!on_gpu) {
    absl::StatusOr<std::unique_ptr<T5Encoder>> cpu = T5Encoder::Open(t5_dir);
    if (!cpu.ok()) return cpu.status();
    return std::unique_ptr<T5TextEncoder>(*std::move(cpu));
  }
#if defined(ARGEN_WITH_CUDA)
  absl::StatusOr<std::unique_ptr<CudaT5Encoder>> gpu = CudaT5Encoder::Open(t5_dir, slots);
  if (!gpu.ok()) {
    return absl::Status(gpu.status().code(), absl::StrCat(kOnGpu, ": ", gpu.status().message()));
  }
  return std::unique_ptr<T5TextEncoder>(*std::move(gpu));
#else
  (void)slots;
  return absl::UnimplementedError(absl::StrCat(kOnGpu, ": this build has no CUDA (configure with ARGEN_CUDA=ON)"));
#endif
}

}  // namespace

void SetTextConditioning(const LlamaGenConfig& config, const std::string& gpt_path, T5Backend t5_backend,
                         families::FamilyModel& m) {
  // sample_t2i.py's defaults: cfg 7.5 on every token, top-k 1000, temperature 1, top-p 1.
  m.default_sampling = engine::SamplingParams{};
  m.default_sampling.cfg_weight = 7.5f;
  m.default_sampling.temperature = 1.0f;
  m.default_sampling.top_k = std::min(1000, config.vq.codebook_size);
  m.default_sampling.top_p = 1.0f;
  // Prompts are embeddings (make_prompt_embedder); the id recipe is never asked.
  m.make_prompt = []() -> absl::StatusOr<model::PromptEncoder> {
    return model::PromptEncoder(
        [](const model::PromptText&) -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
          return absl::InternalError("LlamaGen t2i prompts are embeddings, not token ids");
        });
  };
  m.make_prompt_embedder = [config, gpt_path, t5_backend](
                               const families::EmbedderOptions& options) -> absl::StatusOr<model::PromptEmbedder> {
    const bool t5_on_gpu = T5RunsOnGpu(t5_backend, options.engine_on_gpu);
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> gpt = checkpoint::OpenCheckpointFile(gpt_path);
    if (!gpt.ok()) return gpt.status();
    absl::StatusOr<std::unique_ptr<T5TextEncoder>> t5 = OpenT5(config.t5_dir, t5_on_gpu, config.cls_token_num);
    if (!t5.ok()) return t5.status();
    absl::StatusOr<std::shared_ptr<const T2iPrompt>> prompt =
        T2iPrompt::Load(*std::move(t5), config.t5_dir, **gpt, config.caption_dim, config.dim, config.cls_token_num);
    if (!prompt.ok()) return prompt.status();
    return model::PromptEmbedder(
        [prompt = *std::move(prompt)](const model::PromptText& text) -> absl::StatusOr<model::PromptEmbeddings> {
          if (!text.negative_prompt.empty()) {
            // generate.py guides against the learned uncond_embedding; the model knows no other.
            return absl::InvalidArgumentError(
                "negative_prompt: LlamaGen t2i guides against its learned unconditional embedding; it takes no "
                "negative prompt");
          }
          absl::StatusOr<PrefixEmbeddings> prefix = prompt->Embed(text.caption);
          if (!prefix.ok()) return prefix.status();
          return model::PromptEmbeddings{std::move(prefix->cond), std::move(prefix->uncond)};
        });
  };
}

}  // namespace argen::llamagen
