// argen_generate: text -> PNG image(s) on the CPU (or CUDA) engine, from a
// Janus-Pro checkpoint directory.
//
//   argen_generate --model DIR --prompt "a red cube" --out img.png
//       [--seed 0] [--cfg 5] [--temperature 1] [--top_k 0] [--top_p 1]
//       [--policy dense] [--sparsity 0] [--images 1] [--backend cpu] [--threads 0]
//       [--vq_backend auto] [--vq_precision auto]
//
// With --images N > 1 the files are <out stem>_<i>.png. Exit status: 0 on
// success, 1 when generation fails (the message names the cause), 2 on bad usage.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/image/png.h"
#include "engine/sparse/policy_params.h"
#include "tools/runner/batch_runner.h"

ABSL_FLAG(std::string, model, "",
          "checkpoint directory (config.json, safetensors or pytorch_model*.bin, tokenizer.json)");
ABSL_FLAG(std::string, prompt, "", "the caption");
ABSL_FLAG(std::string, out, "", "output PNG path");
ABSL_FLAG(uint64_t, seed, 0, "sampling seed; image i of the request uses stream (seed, i)");
ABSL_FLAG(double, cfg, 5.0, "classifier-free guidance weight");
ABSL_FLAG(double, temperature, 1.0, "sampling temperature (> 0)");
ABSL_FLAG(int32_t, top_k, 0, "top-k filter (0: off)");
ABSL_FLAG(double, top_p, 1.0, "top-p filter in (0, 1] (1: off)");
ABSL_FLAG(std::string, policy, "dense",
          "sparse KV policy: dense, sliding_window, streaming_llm, h2o, tova, alisa, diagonal, "
          "diagonal_sink4, grid_window, diagonal_grid, ssd");
ABSL_FLAG(double, sparsity, 0.0, "fraction of decode KV not attended per step, in [0, 1)");
ABSL_FLAG(int32_t, images, 1, "images to generate for the prompt");
ABSL_FLAG(std::string, backend, "cpu", "cpu or cuda");
ABSL_FLAG(int32_t, threads, 0, "CPU threads (0: all cores)");
ABSL_FLAG(std::string, vq_backend, "auto",
          "VQ image decoder: auto (cuda when --backend cuda, else cpu), cpu or cuda");
ABSL_FLAG(std::string, vq_precision, "auto", "GPU VQ decoder: auto (bf16, fp32 fallback), bf16, tf32 or fp32");

namespace {

using argen::engine::Engine;

std::string OutputPath(const std::string& out, int32_t index, int32_t count) {
  if (count == 1) return out;
  std::filesystem::path p(out);
  return (p.parent_path() / absl::StrCat(p.stem().string(), "_", index, p.extension().string()))
      .string();
}

absl::Status Generate() {
  argen::engine::EngineOptions options;
  options.model_dir = absl::GetFlag(FLAGS_model);
  options.backend = absl::GetFlag(FLAGS_backend);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.vq_backend = absl::GetFlag(FLAGS_vq_backend);
  options.vq_precision = absl::GetFlag(FLAGS_vq_precision);
  const auto load_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Engine>> engine = argen::engine::CreateEngine(options);
  if (!engine.ok()) return engine.status();
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  argen::engine::GenerationRequest request;
  request.prompt = absl::GetFlag(FLAGS_prompt);
  request.num_images = absl::GetFlag(FLAGS_images);
  request.sampling.seed = absl::GetFlag(FLAGS_seed);
  request.sampling.cfg_weight = static_cast<float>(absl::GetFlag(FLAGS_cfg));
  request.sampling.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  request.sampling.top_k = absl::GetFlag(FLAGS_top_k);
  request.sampling.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  absl::StatusOr<argen::sparse::PolicyKind> kind =
      argen::sparse::ParsePolicyName(absl::GetFlag(FLAGS_policy));
  if (!kind.ok()) return kind.status();
  request.policy.kind = *kind;
  request.policy.sparsity = absl::GetFlag(FLAGS_sparsity);

  argen::runner::RunOptions run;
  run.max_rows = options.max_batch_rows;
  run.decode_images = true;
  argen::runner::RunHooks hooks;
  double gen_s = 0;
  hooks.on_finished = [&](argen::runner::FinishedJob job) -> absl::Status {
    gen_s = job.seconds;
    const int32_t count = static_cast<int32_t>(job.images.size());
    for (int32_t i = 0; i < count; ++i) {
      const std::string path = OutputPath(absl::GetFlag(FLAGS_out), i, count);
      const argen::engine::RgbImage& img = job.images[i];
      if (absl::Status s = argen::image::WritePngFile(path, img.rgb, img.width, img.height); !s.ok())
        return s;
      std::fprintf(stderr, "wrote %s\n", path.c_str());
    }
    return absl::OkStatus();
  };
  const argen::runner::RunResult result =
      argen::runner::RunJobs(**engine, {{request, /*tag=*/0}}, run, hooks);
  if (!result.status.ok()) return result.status;
  const int32_t tokens = (*engine)->info().image_tokens;
  std::fprintf(stderr, "load %.2f s, generation %.2f s (%d tokens x %d images, %.1f tokens/s)\n",
               load_s, gen_s, tokens, request.num_images, tokens * request.num_images / gen_s);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "text -> PNG on a Janus-Pro checkpoint.\n"
      "  argen_generate --model DIR --prompt \"...\" --out img.png [--seed --cfg --temperature "
      "--top_k --top_p --policy --sparsity --images N]");
  absl::ParseCommandLine(argc, argv);
  std::vector<std::string> missing;
  for (const auto& [flag, name] : {std::pair{absl::GetFlag(FLAGS_model), "--model"},
                                   {absl::GetFlag(FLAGS_prompt), "--prompt"},
                                   {absl::GetFlag(FLAGS_out), "--out"}}) {
    if (flag.empty()) missing.push_back(name);
  }
  if (!missing.empty()) {
    for (const std::string& m : missing)
      std::fprintf(stderr, "argen_generate: %s is required\n", m.c_str());
    std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  if (absl::Status s = Generate(); !s.ok()) {
    std::fprintf(stderr, "argen_generate: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
