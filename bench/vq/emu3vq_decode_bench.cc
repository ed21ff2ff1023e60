// Timing of Emu3's vision decode (codes -> RGB8) on the GPU, its precisions
// side by side in one run: random weights at the published tokenizer's shape
// (BAAI/Emu3-VisionTokenizer's decoder, the Emu3VqConfig defaults), grids of
// --grid HxW codes (default 90x90: the 720 x 720 px image Emu3-Gen makes).
//
//   argen_emu3vq_bench [--precision fp32,tf32,bf16] [--batches 1,4,16] [--runs N] [--grid HxW]
//                      [--chunk C] [--workspace_mib M] [--algo benchmark|heuristic] [--cudnn_ws_mib M]
//
// Prints one line per run and, per precision and batch size, the median wall
// seconds of a Decode call, images/s, ms/image and the speed against the first
// precision listed at the same batch (a warm-up call first; the decoder plans
// the grid size at creation). Each precision runs strict: a bf16 path that
// cannot run is an error here, not an fp32 number. Times are wall times of
// the synchronous Decode (upload, network, RGB8 conversion and download).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/vq/decode_timing.h"
#include "common/cli.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_decoder.h"
#include "engine/emu3vq/emu3vq_weights.h"
#include "engine/vq_cuda/cuda_emu3vq_decoder.h"

namespace {

using argen::bench::IntFlag;
using argen::bench::SplitCommas;
using argen::bench::StrFlag;
using argen::emu3vq::CodeGrid;
using argen::emu3vq::Emu3VqConfig;

// Random weights that keep activations O(1): conv weights uniform with
// variance 1 / fan_in, norm gammas near 1, BatchNorm variances in [0.5, 1.5].
argen::emu3vq::TensorSource RandomWeights() {
  auto rng = std::make_shared<std::mt19937>(2026);
  return [rng](const std::string& name, const std::vector<int64_t>& shape) -> absl::StatusOr<std::vector<float>> {
    int64_t count = 1, fan_in = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      count *= shape[i];
      if (i > 0) fan_in *= shape[i];
    }
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(count);
    const bool vector = shape.size() == 1;
    const float limit = std::sqrt(3.0f / static_cast<float>(fan_in));
    for (float& x : v) {
      const float r = u(*rng);
      if (name.ends_with("running_var")) {
        x = 1.0f + 0.5f * r;
      } else if (vector && name.find("norm") != std::string::npos && name.ends_with(".weight")) {
        x = 1.0f + 0.1f * r;
      } else if (vector) {
        x = 0.05f * r;
      } else if (name.find("embedding") != std::string::npos) {
        x = r;
      } else {
        x = limit * r;
      }
    }
    return v;
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (std::optional<int> rc = argen::cli::HelpOrVersion(
          argc, argv, "argen_emu3vq_bench",
          "argen_emu3vq_bench: Emu3 vision decode timing on the GPU (random weights, published shape).\n"
          "  argen_emu3vq_bench [--precision fp32,tf32,bf16] [--batches 1,4,16] [--runs N] [--grid HxW]\n"
          "                     [--chunk C] [--workspace_mib M] [--algo benchmark|heuristic] [--cudnn_ws_mib M]\n"
          "(the comment at the top of bench/vq/emu3vq_decode_bench.cc says what each does)")) {
    return *rc;
  }
  const int runs = std::max(1, IntFlag(argc, argv, "--runs", 3));
  std::vector<int> batches;
  for (const std::string& b : SplitCommas(StrFlag(argc, argv, "--batches", "1,4,16")))
    batches.push_back(std::max(1, std::atoi(b.c_str())));
  int gh = 90, gw = 90;
  if (std::sscanf(StrFlag(argc, argv, "--grid", "90x90").c_str(), "%dx%d", &gh, &gw) != 2 || gh < 1 || gw < 1) {
    std::fprintf(stderr, "--grid: HxW codes, e.g. 90x90\n");
    return 2;
  }
  const std::string algo = StrFlag(argc, argv, "--algo", "benchmark");
  if (algo != "benchmark" && algo != "heuristic") {
    std::fprintf(stderr, "--algo: benchmark or heuristic, got \"%s\"\n", algo.c_str());
    return 2;
  }
  const Emu3VqConfig config;  // the published tokenizer's decoder
  absl::StatusOr<argen::emu3vq::Emu3VqWeights> weights =
      argen::emu3vq::LoadEmu3VqWeights(RandomWeights(), config, argen::emu3vq::Emu3VqNaming::kBaai, "");
  if (!weights.ok()) {
    std::fprintf(stderr, "weights: %s\n", std::string(weights.status().message()).c_str());
    return 1;
  }
  const int f = config.spatial_factor();
  std::printf("Emu3 vision decoder (random weights, published shape): %dx%d codes -> %dx%d px, ch %d\n", gh, gw, gh * f,
              gw * f, config.ch);

  std::vector<argen::bench::DecodeRow> rows;
  bool failed = false;
  for (const std::string& name : SplitCommas(StrFlag(argc, argv, "--precision", "fp32,bf16"))) {
    argen::vq::CudaEmu3VqOptions options;
    if (name == "fp32") {
      options.precision = argen::vq::VqPrecision::kFp32;
    } else if (name == "tf32") {
      options.precision = argen::vq::VqPrecision::kTf32;
    } else if (name == "bf16") {
      options.precision = argen::vq::VqPrecision::kBf16;
    } else {
      std::fprintf(stderr, "--precision: unknown \"%s\" (fp32, tf32, bf16)\n", name.c_str());
      return 2;
    }
    options.fallback_to_fp32 = false;
    options.max_images_per_chunk = IntFlag(argc, argv, "--chunk", options.max_images_per_chunk);
    options.workspace_bytes =
        int64_t{IntFlag(argc, argv, "--workspace_mib", static_cast<int>(options.workspace_bytes >> 20))} << 20;
    options.benchmark_algorithms = algo == "benchmark";
    options.cudnn_workspace_bytes =
        int64_t{IntFlag(argc, argv, "--cudnn_ws_mib", static_cast<int>(options.cudnn_workspace_bytes >> 20))} << 20;
    options.plan_grids = {{gh, gw}};
    const std::string label = "cuda-" + name;
    const auto t0 = std::chrono::steady_clock::now();
    auto decoder = argen::vq::CudaEmu3VqDecoder::Create(*weights, config, gh * gw, options);
    if (!decoder.ok()) {
      std::fprintf(stderr, "%s: %s\n", label.c_str(), std::string(decoder.status().message()).c_str());
      failed = true;
      continue;
    }
    std::printf("%s: %s; created in %.2f s\n", label.c_str(), (*decoder)->description().c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    // The batch's random codes, made once a batch (the warm-up call makes them).
    std::vector<CodeGrid> grids;
    const auto decode = [&](int batch) -> absl::Status {
      if (static_cast<int>(grids.size()) != batch) {
        std::mt19937 rng(1);
        std::uniform_int_distribution<int32_t> id(0, config.codebook_size - 1);
        grids.assign(batch, CodeGrid{gh, gw, std::vector<int32_t>(static_cast<size_t>(gh) * gw)});
        for (CodeGrid& g : grids)
          for (int32_t& c : g.codes) c = id(rng);
      }
      return (*decoder)->Decode(grids).status();
    };
    if (!argen::bench::TimeDecodes(label, decode, batches, runs, &rows)) failed = true;
  }
  // Speed against the first precision's row at the same batch (same run).
  argen::bench::PrintDecodeTable("precision", rows, [&](const argen::bench::DecodeRow& r) {
    for (const argen::bench::DecodeRow& b : rows)
      if (b.batch == r.batch) return &b;
    return static_cast<const argen::bench::DecodeRow*>(nullptr);
  });
  return failed ? 1 : 0;
}
