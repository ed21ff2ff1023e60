// Timing of the VQ-16 decode (tokens -> RGB8) on the CPU and/or the GPU.
// Default: the real Janus-Pro size (384 px, 24 x 24 tokens, ch 128, ch_mult
// 1,1,2,2,4, z 256, 16384 x 8 codebook) with random weights served by an
// in-memory checkpoint; --model DIR decodes with a real checkpoint's VQ
// (e.g. models/argen-scenes-v1).
//
//   argen_vq_bench [--backend cpu,cuda] [--batches 1,8,64,256] [--runs N]
//                  [--model DIR] [--image_size S] [--threads T] [--pool P]
//                  [--precision fp32,tf32,bf16] [--chunk C] [--workspace_mib M]
//                  [--algo benchmark|heuristic] [--cudnn_ws_mib M] [--profile 1] [--tf32 1] [--batch B]
//
// Prints one line per run and, per backend (and GPU precision) and batch
// size, the median wall seconds of a Decode call, images/s, ms/image and the
// speed against the first GPU precision listed at the same batch (measured in
// the same run; a warm-up call first). --threads goes to OpenBLAS (0: its
// default, all cores), --pool to the CPU decoder's element-wise pool (0: all
// cores); --precision (each in turn), --chunk, --workspace_mib, --algo
// (bf16: cuDNN's algorithms timed at creation or its heuristics') and
// --cudnn_ws_mib (bf16: the most workspace cuDNN's algorithms may use) to the GPU
// decoder (CudaVqOptions); --profile 1 prints the bf16 path's time per op kind
// and conv shape (CUDA events around each op of one decode at the largest
// batch) after its rows; --tf32 1 is --precision tf32. bf16 runs strict: if
// its path cannot run, that is an error here, not an fp32 number. --batch B
// is --batches B. GPU times are wall times of the synchronous Decode (upload,
// network, RGB8 conversion and download included), i.e. what a caller waits.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/vq/decode_timing.h"
#include "common/cli.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/janus/janus_config.h"
#include "engine/vq/vq_config.h"
#include "engine/vq/vq_decoder.h"
#if defined(ARGEN_WITH_CUDA)
#include "engine/vq_cuda/cuda_vq_decoder.h"
#endif

namespace {

using argen::bench::IntFlag;
using argen::bench::SplitCommas;
using argen::bench::StrFlag;
using argen::checkpoint::Checkpoint;
using argen::checkpoint::TensorInfo;

// Any tensor asked for exists with the asked shape: conv weights ~ N(0, 1/fan_in),
// GroupNorm weights 1, biases 0, the codebook N(0, 1). Deterministic per name.
class RandomCheckpoint final : public Checkpoint {
 public:
  const std::string& dir() const override { return dir_; }
  bool Has(std::string_view) const override { return true; }
  absl::StatusOr<const TensorInfo*> Find(std::string_view name) const override {
    return absl::UnimplementedError(absl::StrCat("random checkpoint: no raw tensor ", std::string(name)));
  }
  absl::Status ReadRowsF32(std::string_view name, const int32_t*, int64_t, float*) const override {
    return absl::UnimplementedError(absl::StrCat("random checkpoint: no rows of ", std::string(name)));
  }
  absl::StatusOr<std::vector<float>> LoadF32(std::string_view name, const std::vector<int64_t>& shape) const override {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    const bool bias = name.ends_with(".bias");
    if (shape.size() == 1) {
      std::fill(v.begin(), v.end(), bias ? 0.0f : 1.0f);
      return v;
    }
    const double fan_in = shape.size() == 4 ? static_cast<double>(shape[1] * shape[2] * shape[3]) : 1.0;
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string_view>{}(name)));
    std::normal_distribution<float> dist(0.0f, static_cast<float>(1.0 / std::sqrt(fan_in)));
    for (float& x : v) x = dist(rng);
    return v;
  }

 private:
  std::string dir_ = "<random>";
};

// Decode as TimeDecodes calls it: the batch's random tokens, made once a batch.
template <typename Decoder>
std::function<absl::Status(int)> RandomTokenDecode(Decoder& decoder, const argen::vq::Vq16Config& config) {
  auto grids = std::make_shared<std::vector<std::vector<int32_t>>>();
  return [&decoder, &config, grids](int batch) -> absl::Status {
    if (static_cast<int>(grids->size()) != batch) {
      std::mt19937 rng(1);
      std::uniform_int_distribution<int32_t> id(0, config.codebook_size - 1);
      grids->assign(batch, std::vector<int32_t>(config.image_tokens()));
      for (auto& g : *grids)
        for (int32_t& t : g) t = id(rng);
    }
    return decoder.Decode(*grids).status();
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (std::optional<int> rc = argen::cli::HelpOrVersion(
          argc, argv, "argen_vq_bench",
          "argen_vq_bench: VQ-16 decode timing (tokens -> RGB8) on the CPU and/or the GPU.\n"
          "  argen_vq_bench [--backend cpu,cuda] [--batches 1,8,64,256] [--runs N] [--model DIR]\n"
          "                 [--image_size S] [--threads T] [--pool P] [--precision fp32,tf32,bf16]\n"
          "                 [--chunk C] [--workspace_mib M] [--algo benchmark|heuristic] [--cudnn_ws_mib M]\n"
          "                 [--profile 1] [--tf32 1] [--batch B]\n"
          "(the comment at the top of bench/vq/vq_decode_bench.cc says what each does)")) {
    return *rc;
  }
  const int runs = std::max(1, IntFlag(argc, argv, "--runs", 3));
  const int threads = IntFlag(argc, argv, "--threads", 0);
  const int pool = std::max(0, IntFlag(argc, argv, "--pool", 0));
  const std::string model_dir = StrFlag(argc, argv, "--model", "");
  const std::vector<std::string> backends = SplitCommas(StrFlag(argc, argv, "--backend", "cpu"));
  std::vector<int> batches;
  for (const std::string& b : SplitCommas(StrFlag(argc, argv, "--batches", StrFlag(argc, argv, "--batch", "1"))))
    batches.push_back(std::max(1, std::atoi(b.c_str())));
  if (threads > 0) openblas_set_num_threads(threads);

  argen::vq::Vq16Config config;  // official VQ-16 defaults
  RandomCheckpoint random_ckpt;
  std::unique_ptr<argen::checkpoint::Checkpoint> model_ckpt;
  const argen::checkpoint::Checkpoint* ckpt = &random_ckpt;
  if (!model_dir.empty()) {
    auto opened = argen::checkpoint::Checkpoint::Open(model_dir);
    auto janus = argen::janus::LoadJanusConfig(model_dir);
    if (!opened.ok() || !janus.ok()) {
      std::fprintf(stderr, "%s\n", std::string((!opened.ok() ? opened.status() : janus.status()).message()).c_str());
      return 1;
    }
    model_ckpt = std::move(*opened);
    ckpt = model_ckpt.get();
    config = janus->gen_vision;
  } else {
    config.image_size = IntFlag(argc, argv, "--image_size", 384);
  }
  std::printf("VQ-16 decoder (%s): %d px, %dx%d tokens, ch %d, ch_mult",
              model_dir.empty() ? "random weights" : model_dir.c_str(), config.image_size, config.token_grid(),
              config.token_grid(), config.ch);
  for (int32_t m : config.ch_mult) std::printf(" %d", m);
  std::printf(", z %d, codebook %d x %d\n", config.z_channels, config.codebook_size, config.codebook_embed_dim);

  std::vector<argen::bench::DecodeRow> rows;
  bool failed = false;
  for (const std::string& backend : backends) {
    if (backend == "cpu") {
      const auto t0 = std::chrono::steady_clock::now();
      auto decoder = argen::vq::VqDecoder::Create(*ckpt, config, pool);
      if (!decoder.ok()) {
        std::fprintf(stderr, "cpu: %s\n", std::string(decoder.status().message()).c_str());
        return 1;
      }
      std::printf("cpu: BLAS threads %d, pool %d; scratch %.1f MiB; created in %.2f s\n", openblas_get_num_threads(),
                  pool, (*decoder)->scratch_bytes() / 1048576.0,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!argen::bench::TimeDecodes("cpu", RandomTokenDecode(**decoder, config), batches, runs, &rows)) return 1;
    } else if (backend == "cuda") {
#if defined(ARGEN_WITH_CUDA)
      std::vector<std::string> precisions =
          SplitCommas(StrFlag(argc, argv, "--precision", IntFlag(argc, argv, "--tf32", 0) != 0 ? "tf32" : "fp32"));
      for (const std::string& name : precisions) {
        argen::vq::CudaVqOptions options;
        if (name == "fp32")
          options.precision = argen::vq::VqPrecision::kFp32;
        else if (name == "tf32")
          options.precision = argen::vq::VqPrecision::kTf32;
        else if (name == "bf16")
          options.precision = argen::vq::VqPrecision::kBf16;
        else {
          std::fprintf(stderr, "--precision: unknown \"%s\" (fp32, tf32, bf16)\n", name.c_str());
          return 2;
        }
        options.fallback_to_fp32 = false;
        options.max_images_per_chunk = IntFlag(argc, argv, "--chunk", options.max_images_per_chunk);
        options.workspace_bytes =
            int64_t{IntFlag(argc, argv, "--workspace_mib", static_cast<int>(options.workspace_bytes >> 20))} << 20;
        const std::string algo = StrFlag(argc, argv, "--algo", "benchmark");
        if (algo != "benchmark" && algo != "heuristic") {
          std::fprintf(stderr, "--algo: benchmark or heuristic, got \"%s\"\n", algo.c_str());
          return 2;
        }
        options.benchmark_algorithms = algo == "benchmark";
        options.cudnn_workspace_bytes =
            int64_t{IntFlag(argc, argv, "--cudnn_ws_mib", static_cast<int>(options.cudnn_workspace_bytes >> 20))} << 20;
        const std::string label = "cuda-" + name;
        const auto t0 = std::chrono::steady_clock::now();
        auto decoder = argen::vq::CudaVqDecoder::Create(*ckpt, config, options);
        if (!decoder.ok()) {
          std::fprintf(stderr, "%s: %s\n", label.c_str(), std::string(decoder.status().message()).c_str());
          failed = true;
          continue;
        }
        std::printf("%s: %s; created in %.2f s\n", label.c_str(), (*decoder)->description().c_str(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (!argen::bench::TimeDecodes(label, RandomTokenDecode(**decoder, config), batches, runs, &rows))
          failed = true;
        if (IntFlag(argc, argv, "--profile", 0) != 0 && (*decoder)->precision() == argen::vq::VqPrecision::kBf16) {
          // The largest ladder size (a power of two, or the chunk) not above the largest batch.
          const int most = *std::max_element(batches.begin(), batches.end());
          int n = 1;
          while (n * 2 <= std::min(most, (*decoder)->chunk_images())) n *= 2;
          if (most >= (*decoder)->chunk_images()) n = (*decoder)->chunk_images();
          auto profile = (*decoder)->Profile(n);
          std::printf("%s\n", profile.ok() ? profile->c_str() : std::string(profile.status().message()).c_str());
        }
      }
#else
      std::fprintf(stderr, "--backend cuda: this build has no CUDA (configure with ARGEN_CUDA=ON)\n");
      return 2;
#endif
    } else {
      std::fprintf(stderr, "--backend: unknown backend \"%s\" (cpu, cuda)\n", backend.c_str());
      return 2;
    }
  }
  // Speed against the first GPU row of the same batch (same run).
  argen::bench::PrintDecodeTable("backend", rows, [&](const argen::bench::DecodeRow& r) {
    for (const argen::bench::DecodeRow& b : rows)
      if (b.batch == r.batch && b.label.rfind("cuda", 0) == 0 && r.label.rfind("cuda", 0) == 0) return &b;
    return static_cast<const argen::bench::DecodeRow*>(nullptr);
  });
  return failed ? 1 : 0;
}
