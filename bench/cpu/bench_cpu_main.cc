// argen_bench_cpu: CPU decode throughput of the generic engine over the CPU
// backend, for the tiny test checkpoint and a Janus-Pro-1B-shaped model with
// random weights made in memory (no file), at several batch sizes.
//
//   argen_bench_cpu [--shape tiny,dir,1b] [--batches 1,8] [--steps_1b 0] [--threads 0]
//                   [--model_dir models/argen-scenes-v1] [--prompt_sharing within,across]
//
// A batch of B is B one-image requests (2B rows: cond + uncond) of distinct
// captions of one length (so one guidance prompt), added together; each
// --prompt_sharing mode (share_prompt_kv_across_requests off / on) runs every
// batch, and the line gives the pool's KV bytes per image. Reported per shape and batch: prefill seconds, mean seconds
// per decode step, decode tokens/s (image tokens of all images per second) and seconds per image = (prefill +
// image_tokens x step time) / B, i.e. the LLM part of generation; the VQ decoder is not included. --steps_1b N > 0
// times only the first N decode steps of the 1B shape and extrapolates to 576, which the output says; it then also
// times dense attention over the full prompt + 576 keys (what the last step attends) and prints the upper bound that
// adds it to every step.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/cli.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_weights.h"
#include "engine/cpu/sparse_attention.h"
#include "engine/families/janus/janus_shapes.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/families/registry.h"
#include "engine/model/create_engine.h"
#include "engine/model/generic_engine.h"
#include "engine/model/weight_source.h"

ABSL_FLAG(std::string, shape, "tiny,1b",
          "comma-separated: tiny (--tiny_dir), dir (any checkpoint, --model_dir), 1b (random weights)");
ABSL_FLAG(std::string, batches, "1,8", "comma-separated batch sizes (images per step)");
ABSL_FLAG(int32_t, steps_1b, 0, "1b: decode steps to time (0: all 575)");
ABSL_FLAG(int32_t, threads, 0, "BLAS threads (0: all cores)");
ABSL_FLAG(std::string, tiny_dir, "tests/goldens/tiny/tiny-mha", "tiny checkpoint directory");
ABSL_FLAG(std::string, model_dir, "models/argen-scenes-v1", "checkpoint directory of --shape dir");
ABSL_FLAG(int32_t, prompt_tokens, 40, "prompt length of every request");
ABSL_FLAG(std::string, prompt_sharing, "within",
          "comma-separated: within (share_prompt_kv), across (share_prompt_kv_across_requests)");

namespace argen::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Whether the engine reads prompts shared across requests: a request's
// own_kv_bytes are then below its kv_bytes.
const char* SharingName(const model::GenericEngine& engine) {
  engine::GenerationRequest r;
  r.prompt = "probe";
  if (engine.info().num_classes > 0) {
    r.prompt.clear();
    r.class_id = 0;
  }
  absl::StatusOr<engine::PreparedRequest> p = engine.Prepare(r);
  return p.ok() && p->own_kv_bytes < p->kv_bytes ? "across" : "within";
}

// Fixed-length prompts: bench timing must not depend on a tokenizer.
model::PromptEncoder FixedLengthEncoder(int32_t len, int32_t vocab) {
  return [len, vocab](
             const model::PromptText& text) -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
    std::vector<int32_t> cond(len), uncond(len, 0);
    const int32_t salt = static_cast<int32_t>(std::hash<std::string>{}(text.caption) % 9973);
    for (int32_t i = 0; i < len; ++i) cond[i] = (17 * i + salt) % vocab;
    cond.front() = 1 % vocab;  // BOS-like ends: the guidance row is the same for every caption
    cond.back() = 2 % vocab;
    uncond.front() = cond.front();
    uncond.back() = cond.back();
    return std::make_pair(cond, uncond);
  };
}

std::unique_ptr<model::GenericEngine> Make1BEngine(int32_t threads, int32_t max_rows, int32_t prompt_len, bool across) {
  absl::StatusOr<model::ModelSpec> spec = janus::JanusSpec(*janus::PublishedJanusConfig("1b"));
  if (!spec.ok()) return nullptr;
  model::BackendOptions options;
  options.threads = threads;
  options.max_batch_rows = max_rows;
  const auto start = Clock::now();
  absl::StatusOr<cpu::CpuWeights> weights = cpu::LoadCpuWeights(*spec, model::RandomWeights(1, 0.02f));
  if (!weights.ok()) return nullptr;
  auto backend = std::make_unique<cpu::CpuBackend>(*spec, *std::move(weights), options);
  std::fprintf(stderr, "1b: random weights in %.1f s\n", Seconds(start));
  model::GenericEngineConfig config;
  config.info.name = "janus-pro-1b-shape-random";
  config.info.family = "janus";
  config.info.backend = "cpu";
  config.info.image_size = 384;
  config.info.token_grid = 24;
  config.info.image_tokens = 576;
  config.info.max_prompt_tokens = 1024;
  config.info.max_images_per_request = max_rows / 2;
  config.info.max_batch_rows = max_rows;
  config.share_prompt_kv_across_requests = across;
  return std::make_unique<model::GenericEngine>(
      std::move(backend), FixedLengthEncoder(prompt_len, spec->text_vocab()),
      [](const std::vector<std::vector<int32_t>>&) -> absl::StatusOr<std::vector<engine::RgbImage>> {
        return absl::UnimplementedError("benchmark engine has no VQ decoder");
      },
      config);
}

// Seconds one decode step spends in dense attention at the last image token
// (prompt + 576 keys per head), for `rows` rows, timed directly on random K/V:
// early timed steps see only ~prompt keys, so this bounds what they miss.
double LateStepAttentionSeconds(const model::StackConfig& d, int32_t rows, int32_t prompt_len, int32_t image_tokens) {
  const int32_t positions = prompt_len + image_tokens;
  std::vector<float> k(int64_t{d.num_kv_heads} * positions * d.head_dim, 0.01f);
  std::vector<float> v(k.size(), 0.02f), q(int64_t{d.num_heads} * d.head_dim, 0.03f);
  std::vector<float> out(q.size()), probs(int64_t{d.num_kv_heads} * image_tokens);
  std::vector<int32_t> attended(int64_t{d.num_kv_heads} * image_tokens), counts(d.num_kv_heads, image_tokens);
  for (size_t i = 0; i < attended.size(); ++i) attended[i] = static_cast<int32_t>(i % image_tokens);
  cpu::DecodeAttentionShape shape{d.num_heads, d.num_kv_heads, d.head_dim, prompt_len, image_tokens};
  std::vector<float> scratch(cpu::DecodeAttentionScratchFloats(shape, image_tokens));
  cpu::DecodeAttentionIo io;
  io.q = q.data();
  io.k = k.data();
  io.v = v.data();
  io.attended = attended.data();
  io.counts = counts.data();
  io.attended_stride = image_tokens;
  io.scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  io.out = out.data();
  io.attended_probs = probs.data();
  io.scratch = scratch.data();
  const auto start = Clock::now();
  for (int32_t i = 0; i < rows * d.num_layers; ++i) cpu::DecodeAttention(shape, io);
  return Seconds(start);
}

void RunBatch(const std::string& shape, model::GenericEngine& engine, int32_t batch, int32_t max_steps) {
  std::vector<engine::GroupId> ids;
  for (int32_t i = 0; i < batch; ++i) {
    engine::GenerationRequest r;
    char caption[32];
    std::snprintf(caption, sizeof(caption), "benchmark %04d", i);
    r.prompt = caption;
    if (engine.info().num_classes > 0) {  // a class-conditional model: request i draws class i
      r.prompt.clear();
      r.class_id = i % engine.info().num_classes;
    }
    r.sampling.seed = static_cast<uint64_t>(i);
    absl::StatusOr<engine::PreparedRequest> p = engine.Prepare(r);
    if (!p.ok()) {
      std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return;
    }
    ids.push_back(*engine.Add(*p));
  }
  const int32_t image_tokens = engine.info().image_tokens;
  const double kv_mb_per_image = static_cast<double>(engine.KvBytesInUse()) / batch / 1e6;
  auto start = Clock::now();
  if (!engine.Step().ok()) return;
  const double prefill_s = Seconds(start);
  const int32_t decode_steps = image_tokens - 1;
  const int32_t timed = max_steps > 0 ? std::min(max_steps, decode_steps) : decode_steps;
  start = Clock::now();
  for (int32_t s = 0; s < timed; ++s) {
    absl::StatusOr<engine::StepReport> r = engine.Step();
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return;
    }
  }
  const double decode_s = Seconds(start);
  for (engine::GroupId id : ids) engine.Remove(id);
  const double step_s = decode_s / timed;
  const double tokens_per_s = batch / step_s;
  const double s_per_image = (prefill_s + image_tokens * step_s) / batch;
  std::printf(
      "%-5s %-6s batch %2d  prefill %7.3f s  decode %4d/%d steps  %8.4f s/step  %9.1f tokens/s  %8.2f "
      "s/image  %8.3f KV MB/image%s\n",
      shape.c_str(), SharingName(engine), batch, prefill_s, timed, decode_steps, step_s, tokens_per_s, s_per_image,
      kv_mb_per_image, timed < decode_steps ? "  (extrapolated from the timed steps)" : "");
  if (timed < decode_steps) {
    const double late = LateStepAttentionSeconds(engine.backend().spec().stack, 2 * batch,
                                                 absl::GetFlag(FLAGS_prompt_tokens), image_tokens);
    std::printf(
        "%-5s batch %2d  dense attention at the last step: %.4f s/step; upper bound with it: "
        "%.4f s/step, %.1f tokens/s, %.2f s/image\n",
        shape.c_str(), batch, late, step_s + late, batch / (step_s + late),
        (prefill_s + image_tokens * (step_s + late)) / batch);
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace argen::bench

int main(int argc, char** argv) {
  if (std::optional<int> rc = argen::cli::HelpOrVersion(
          argc, argv, "argen_bench_cpu",
          "argen_bench_cpu: CPU decode throughput of the generic engine (tiny checkpoint, a checkpoint\n"
          "directory, or a Janus-Pro-1B shape with random weights), at several batch sizes.\n"
          "  argen_bench_cpu [--shape tiny,dir,1b] [--batches 1,8] [--steps_1b 0] [--threads 0]\n"
          "                  [--model_dir models/argen-scenes-v1] [--prompt_sharing within,across]")) {
    return *rc;
  }
  absl::ParseCommandLine(argc, argv);
  using namespace argen;
  std::vector<int32_t> batches;
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int32_t v = 0;
    if (!absl::SimpleAtoi(b, &v) || v < 1) {
      std::fprintf(stderr, "argen_bench_cpu: --batches: bad value \"%s\"\n", std::string(b).c_str());
      return 2;
    }
    batches.push_back(v);
  }
  int32_t max_batch = 1;
  for (int32_t b : batches) max_batch = std::max(max_batch, b);
  const int32_t threads = absl::GetFlag(FLAGS_threads);
  std::vector<bool> modes;  // share_prompt_kv_across_requests
  for (absl::string_view m : absl::StrSplit(absl::GetFlag(FLAGS_prompt_sharing), ',')) {
    if (m != "within" && m != "across") {
      std::fprintf(stderr, "argen_bench_cpu: --prompt_sharing: bad value \"%s\" (within, across)\n",
                   std::string(m).c_str());
      return 2;
    }
    modes.push_back(m == "across");
  }
  for (absl::string_view shape : absl::StrSplit(absl::GetFlag(FLAGS_shape), ',')) {
    for (bool across : modes) {
      std::unique_ptr<model::GenericEngine> engine;
      int32_t steps = 0;
      if (shape == "tiny" || shape == "dir") {
        engine::EngineOptions options;
        options.model_dir = absl::GetFlag(shape == "tiny" ? FLAGS_tiny_dir : FLAGS_model_dir);
        // The family's spec gives the text vocabulary the fixed prompts draw from.
        absl::StatusOr<families::FamilyModel> family = families::LoadFamilyModel(options.model_dir);
        if (!family.ok()) {
          std::fprintf(stderr, "argen_bench_cpu: %s\n", family.status().ToString().c_str());
          return 1;
        }
        options.threads = threads;
        options.max_batch_rows = 2 * max_batch;
        options.max_images_per_request = max_batch;
        options.share_prompt_kv_across_requests = across;
        absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(
            options, bench::FixedLengthEncoder(absl::GetFlag(FLAGS_prompt_tokens), family->spec.text_vocab()));
        if (!e.ok()) {
          std::fprintf(stderr, "argen_bench_cpu: %s\n", e.status().ToString().c_str());
          return 1;
        }
        engine = std::move(*e);
      } else if (shape == "1b") {
        engine = bench::Make1BEngine(threads, 2 * max_batch, absl::GetFlag(FLAGS_prompt_tokens), across);
        if (engine == nullptr) return 1;
        steps = absl::GetFlag(FLAGS_steps_1b);
      } else {
        std::fprintf(stderr, "argen_bench_cpu: --shape: unknown \"%s\"\n", std::string(shape).c_str());
        return 2;
      }
      for (int32_t b : batches) bench::RunBatch(std::string(shape), *engine, b, steps);
    }
  }
  return 0;
}
