// argen_generate: text -> PNG image(s) on the CPU (or CUDA) engine, from a
// checkpoint directory of a known family (Janus-Pro, Lumina-mGPT).
//
//   argen_generate --model DIR --prompt "a red cube" --out img.png
//       [--seed 0] [--cfg W] [--temperature T] [--top_k K] [--top_p P] [--negative-prompt TEXT]
//       [--policy dense] [--sparsity S] [--images 1] [--backend cpu] [--threads 0]
//       [--vq_backend auto] [--vq_precision auto] [--size WxH] [--kv-cache-dtype auto]
//       [--weight-dtype auto]
//
// Unset sampling flags take the model's defaults, as argen_server does without
// a config value (ModelInfo::default_sampling: the checkpoint's own, e.g. the
// shipped model's cfg 3, else the family's: Janus-Pro cfg 5, Lumina-mGPT cfg 4
// and top-k 2000). A sparse --policy needs --sparsity.
// With --images N > 1 the files are <out stem>_<i>.png. Exit status: 0 on
// success, 1 when generation fails (the message names the cause), 2 on bad usage.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cli.h"
#include "common/image_size.h"
#include "engine/engine.h"
#include "engine/image/generation_metadata.h"
#include "engine/image/png.h"
#include "engine/sparse/policy_params.h"
#include "engine/vq/vq_precision.h"
#include "tools/runner/batch_runner.h"

namespace {

using argen::engine::Engine;

struct Args {
  std::string model;  // checkpoint directory (config.json, safetensors, tokenizer.json)
  std::string prompt;
  std::optional<int32_t> class_id;  // class-conditional models, instead of a prompt
  std::string out;
  uint64_t seed = 0;
  // Unset: the model family's default (engine::ModelInfo::default_sampling).
  std::optional<double> cfg, temperature, top_p;
  std::optional<int32_t> top_k;
  std::string negative_prompt;  // "": the family's unconditional prompt
  std::string policy = "dense";
  std::optional<double> sparsity;  // required for a sparse policy
  int32_t images = 1;
  std::string backend = "cpu";
  int32_t threads = 0;
  std::string vq_backend = "auto";
  std::string vq_precision = "auto";
  std::string size = "auto";            // WxH, one of the model's sizes; auto: its default
  std::string kv_cache_dtype = "auto";  // auto | fp8 (e4m3 KV with per-vector scales)
  std::string weight_dtype = "auto";    // auto | fp8 (the layers' projections in e4m3, W8A8)
  int32_t parallel_window = 0;          // GenerationRequest::parallel_window; 0: off
  int32_t speculative_window = 0;       // GenerationRequest::speculative_window; 0: off
};

std::string OutputPath(const std::string& out, int32_t index, int32_t count) {
  if (count == 1) return out;
  std::filesystem::path p(out);
  return (p.parent_path() / absl::StrCat(p.stem().string(), "_", index, p.extension().string())).string();
}

absl::Status Generate(const Args& args) {
  argen::engine::EngineOptions options;
  options.model_dir = args.model;
  options.backend = args.backend;
  options.threads = args.threads;
  options.vq_backend = args.vq_backend;
  options.vq_precision = args.vq_precision;
  absl::StatusOr<argen::model::WeightFormat> weight_format = argen::model::ParseWeightFormat(args.weight_dtype);
  if (!weight_format.ok()) return weight_format.status();
  options.weight_format = *weight_format;
  const auto load_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Engine>> engine = argen::engine::CreateEngine(options);
  if (!engine.ok()) return engine.status();
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  argen::engine::GenerationRequest request;
  request.prompt = args.prompt;
  request.negative_prompt = args.negative_prompt;
  request.class_id = args.class_id;
  request.num_images = args.images;
  request.sampling = (*engine)->info().default_sampling;
  request.sampling.seed = args.seed;
  if (args.cfg) request.sampling.cfg_weight = static_cast<float>(*args.cfg);
  if (args.temperature) request.sampling.temperature = static_cast<float>(*args.temperature);
  if (args.top_k) request.sampling.top_k = *args.top_k;
  if (args.top_p) request.sampling.top_p = static_cast<float>(*args.top_p);
  if (args.size != "auto") {
    const std::optional<std::pair<int32_t, int32_t>> size = argen::ParseImageSize(args.size);
    if (!size) return absl::InvalidArgumentError(absl::StrCat("--size '", args.size, "' is not WxH"));
    request.width = size->first;
    request.height = size->second;
  }
  absl::StatusOr<argen::sparse::PolicyKind> kind = argen::sparse::ParsePolicyName(args.policy);
  if (!kind.ok()) return kind.status();
  request.policy.kind = *kind;
  // As on the server: a sparse policy without a sparsity would run dense.
  if (*kind != argen::sparse::PolicyKind::kDense && !args.sparsity) {
    return absl::InvalidArgumentError(absl::StrCat("--sparsity: ", args.policy,
                                                   " is a sparse policy; name its sparsity in (0, 1), e.g. "
                                                   "--sparsity 0.9 (docs/quality.md rates each setting)"));
  }
  request.policy.sparsity = args.sparsity.value_or(0.0);
  absl::StatusOr<argen::sparse::KvFormat> kv_format = argen::sparse::ParseKvFormat(args.kv_cache_dtype);
  if (!kv_format.ok()) return kv_format.status();
  request.policy.kv_format = *kv_format;
  request.parallel_window = args.parallel_window;
  request.speculative_window = args.speculative_window;
  // The engine's own checks (an unsupported size is refused listing the model's
  // sizes) and the policy as it resolves it for the request's size.
  absl::StatusOr<argen::engine::PreparedRequest> prepared = (*engine)->Prepare(request);
  if (!prepared.ok()) return prepared.status();

  // What every PNG records about itself.
  argen::image::GenerationMetadata metadata;
  metadata.prompt = request.prompt;
  metadata.negative_prompt = request.negative_prompt;
  metadata.class_id = request.class_id;
  metadata.seed = request.sampling.seed;
  metadata.sampling = request.sampling;
  metadata.policy = prepared->policy;
  metadata.sparsity = request.policy.sparsity;
  metadata.model = (*engine)->info().name;

  argen::runner::RunOptions run;
  run.max_rows = options.max_batch_rows;
  run.decode_images = true;
  argen::runner::RunHooks hooks;
  double gen_s = 0;
  argen::runner::FinishedJob counts;  // its steps and drafts (no tokens)
  hooks.on_finished = [&](argen::runner::FinishedJob job) -> absl::Status {
    gen_s = job.seconds;
    counts.steps = job.steps;
    counts.drafts_proposed = job.drafts_proposed;
    counts.drafts_accepted = job.drafts_accepted;
    const int32_t count = static_cast<int32_t>(job.images.size());
    for (int32_t i = 0; i < count; ++i) {
      const std::string path = OutputPath(args.out, i, count);
      const argen::engine::RgbImage& img = job.images[i];
      absl::StatusOr<std::string> png = argen::image::EncodePng(img.rgb, img.width, img.height);
      if (!png.ok()) return png.status();
      png = argen::image::AddGenerationMetadata(*png, metadata, i);
      if (!png.ok()) return png.status();
      std::ofstream file(path, std::ios::binary | std::ios::trunc);
      file.write(png->data(), static_cast<std::streamsize>(png->size()));
      file.close();
      if (!file) return absl::UnavailableError(absl::StrCat("cannot write ", path));
      std::fprintf(stderr, "wrote %s\n", path.c_str());
    }
    return absl::OkStatus();
  };
  const argen::runner::RunResult result = argen::runner::RunJobs(**engine, {{request, /*tag=*/0}}, run, hooks);
  if (!result.status.ok()) return result.status;
  const int32_t tokens = prepared->layout.image_tokens;
  std::fprintf(stderr,
               "load %.2f s, generation %.2f s (%d tokens x %d images, %.1f tokens/s), KV %s, %lld bytes, weights %s\n",
               load_s, gen_s, tokens, request.num_images, tokens * request.num_images / gen_s,
               std::string(argen::sparse::KvFormatName(prepared->policy.kv_format)).c_str(),
               static_cast<long long>(prepared->kv_bytes), args.weight_dtype.c_str());
  if (counts.drafts_proposed > 0) {
    std::fprintf(stderr, "speculative decoding: %d steps for %d tokens, %lld of %lld drafts accepted (%.1f%%)\n",
                 counts.steps, tokens, static_cast<long long>(counts.drafts_accepted),
                 static_cast<long long>(counts.drafts_proposed),
                 100.0 * static_cast<double>(counts.drafts_accepted) / static_cast<double>(counts.drafts_proposed));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app(
      "argen_generate: text -> PNG image(s) from a checkpoint (Janus-Pro, Lumina-mGPT), without a server.\n"
      "  argen_generate --model DIR --prompt \"...\" --out img.png [--images N ...]\n"
      "With --images N > 1 the files are <out stem>_<i>.png. Every PNG carries the generation\n"
      "metadata (prompt, seed, policy, guidance, model, argen version) as text chunks.",
      "argen_generate");
  argen::cli::Configure(app, "argen_generate");
  app.add_option("--model," + argen::cli::FlagNames("model_dir"), args.model,
                 "Checkpoint directory (config.json, safetensors or pytorch_model*.bin, tokenizer.json)")
      ->required();
  using argen::cli::FlagNames;
  CLI::Option* prompt = app.add_option("-p,--prompt", args.prompt, "The caption");
  CLI::Option* class_id =
      app.add_option(FlagNames("class_id"), args.class_id,
                     "Class-conditional models (LlamaGen c2i): the class to draw, instead of --prompt");
  prompt->excludes(class_id);
  app.add_option("-o,--out,--output", args.out, "Output PNG path (alias --output, -o)")->required();
  app.add_option(FlagNames("seed"), args.seed, "Sampling seed; image i of the request uses stream (seed, i)")
      ->check(argen::cli::Uint64Digits());
  app.add_option(FlagNames("cfg") + "," + FlagNames("cfg-weight") + "," + FlagNames("guidance-scale"), args.cfg,
                 "Classifier-free guidance weight (unset: the model's default: the shipped model's 3, Janus-Pro's 5)");
  app.add_option(FlagNames("negative-prompt"), args.negative_prompt,
                 "What the image should not show: the unconditional (guidance) prompt; unset: the family's default");
  app.add_option(FlagNames("temperature"), args.temperature, "Sampling temperature (unset: the family's default)");
  app.add_option(FlagNames("top_k"), args.top_k, "Top-k filter, 0: off (unset: the family's default)");
  app.add_option(FlagNames("top_p"), args.top_p, "Top-p filter in (0, 1], 1: off (unset: the family's default)");
  app.add_option(FlagNames("policy"), args.policy,
                 "Sparse KV policy: dense, sliding_window, streaming_llm, h2o, tova, alisa, diagonal, "
                 "diagonal_sink4, grid_window, diagonal_grid, ssd, line_evict (a sparse one needs --sparsity)");
  app.add_option(FlagNames("sparsity"), args.sparsity, "Fraction of decode KV not attended per step, in [0, 1)");
  // --images last among the names: help shows "--images INT=1".
  app.add_option("-n," + FlagNames("count") + "," + FlagNames("num-images") + ",--images", args.images,
                 "Images to generate for the prompt (also --count, --num-images, -n)");
  app.add_option(FlagNames("backend"), args.backend, "cpu or cuda");
  app.add_option(FlagNames("threads"), args.threads, "CPU threads (0: all cores)");
  app.add_option(FlagNames("vq_backend"), args.vq_backend,
                 "VQ image decoder: auto (cuda when --backend cuda, else cpu), cpu or cuda");
  app.add_option(FlagNames("vq_precision"), args.vq_precision,
                 "GPU VQ decoder: auto (bf16, fp32 fallback), bf16, tf32 or fp32")
      ->check([](const std::string& v) {
        return argen::vq::ParseDecoderPrecision(v).ok() ? std::string()
                                                        : std::string("expected auto, bf16, tf32 or fp32");
      });
  app.add_option(FlagNames("size"), args.size,
                 "Image size WxH in pixels, one of the model's sizes (argen_client info lists them); auto: the "
                 "model's default")
      ->check([](const std::string& v) {
        return v == "auto" || argen::ParseImageSize(v) ? std::string()
                                                       : std::string("expected WxH (e.g. 512x768) or auto");
      });
  app.add_option(FlagNames("parallel_window"), args.parallel_window,
                 "parallel decoding (dense policy; docs/serving.md): image row r+1 starts once row r has this many "
                 "tokens; 0: off (one token per step); at most the image's tokens per row");
  app.add_option(FlagNames("speculative_window"), args.speculative_window,
                 "speculative Jacobi decoding (dense policy, exact; docs/serving.md): tokens verified per step, the "
                 "last made one and window - 1 drafts; 0: off; at most 32");
  app.add_option(FlagNames("kv-cache-dtype"), args.kv_cache_dtype,
                 "KV cache storage: auto (bf16 on cuda, f32 on cpu) or fp8 (e4m3 with per-vector scales: about half "
                 "the KV memory on cuda; the cpu rounds through e4m3 without saving memory)")
      ->check([](const std::string& v) {
        return argen::sparse::ParseKvFormat(v).ok() && !v.empty() ? std::string() : std::string("expected auto or fp8");
      });
  app.add_option(
         FlagNames("weight-dtype"), args.weight_dtype,
         "the decoder layers' projection weights: auto (bf16 on cuda, f32 on cpu) or fp8 (e4m3 with per-channel "
         "scales, inputs quantized per token; the cpu emulates its numbers)")
      ->check([](const std::string& v) {
        return argen::model::ParseWeightFormat(v).ok() ? std::string() : std::string("expected auto or fp8");
      });
  app.footer("Exit status: 0 on success, 1 when generation fails (the message names the cause), 2 on bad usage.");
  if (std::optional<int> rc = argen::cli::Parse(app, argc, argv, std::cout, std::cerr)) return *rc;
  if (prompt->count() == 0 && class_id->count() == 0) {
    std::fprintf(stderr, "argen_generate: --prompt is required (or --class_id for a class-conditional model)\n");
    return 2;
  }
  if (absl::Status s = Generate(args); !s.ok()) {
    std::fprintf(stderr, "argen_generate: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
