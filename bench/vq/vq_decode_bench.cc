// CPU timing of the VQ-16 decode (tokens -> RGB8) at the real Janus-Pro size
// (384 px, 24 x 24 tokens, ch 128, ch_mult 1,1,2,2,4, z 256, 16384 x 8
// codebook) with random weights served by an in-memory checkpoint.
//
//   argen_vq_bench [--runs N] [--threads T] [--pool P] [--batch B] [--image_size S]
//
// Prints one line per run and the median seconds per image. --threads goes to
// OpenBLAS (0: its default, all cores), --pool to the decoder's element-wise
// pool (0: all cores).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/janus_config.h"
#include "engine/vq/vq_decoder.h"

namespace {

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
  absl::StatusOr<std::vector<float>> LoadF32(std::string_view name,
                                             const std::vector<int64_t>& shape) const override {
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

// CPU seconds of all threads of the process: with one thread, a contention-free
// measure of the work on a shared machine.
double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

int IntFlag(int argc, char** argv, const char* flag, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = std::max(1, IntFlag(argc, argv, "--runs", 3));
  const int threads = IntFlag(argc, argv, "--threads", 0);
  const int batch = std::max(1, IntFlag(argc, argv, "--batch", 1));
  const int pool = std::max(0, IntFlag(argc, argv, "--pool", 0));
  argen::checkpoint::GenVisionConfig config;  // official VQ-16 defaults
  config.image_size = IntFlag(argc, argv, "--image_size", 384);
  if (threads > 0) openblas_set_num_threads(threads);

  RandomCheckpoint ckpt;
  const auto t0 = std::chrono::steady_clock::now();
  auto decoder = argen::vq::VqDecoder::Create(ckpt, config, pool);
  if (!decoder.ok()) {
    std::fprintf(stderr, "%s\n", std::string(decoder.status().message()).c_str());
    return 1;
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "VQ-16 decoder: %d px, %dx%d tokens, ch %d, z %d, codebook %d x %d; BLAS threads %d, pool %d; "
      "scratch %.1f MiB; weights made+loaded in %.2f s\n",
      config.image_size, config.token_grid(), config.token_grid(), config.ch, config.z_channels,
      config.codebook_size, config.codebook_embed_dim, openblas_get_num_threads(), pool,
      (*decoder)->scratch_bytes() / 1048576.0, load_s);

  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> id(0, config.codebook_size - 1);
  std::vector<std::vector<int32_t>> grids(batch, std::vector<int32_t>(config.image_tokens()));
  for (auto& g : grids)
    for (int32_t& t : g) t = id(rng);

  std::vector<double> per_image;
  for (int r = 0; r < runs; ++r) {
    const auto s = std::chrono::steady_clock::now();
    const double cpu0 = ProcessCpuSeconds();
    auto images = (*decoder)->Decode(grids);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
    const double cpu = ProcessCpuSeconds() - cpu0;
    if (!images.ok()) {
      std::fprintf(stderr, "%s\n", std::string(images.status().message()).c_str());
      return 1;
    }
    std::printf("run %d: batch %d in %.3f s (%.3f s/image, %.3f CPU s/image)\n", r, batch, sec, sec / batch,
                cpu / batch);
    per_image.push_back(sec / batch);
  }
  std::sort(per_image.begin(), per_image.end());
  // On a shared machine the minimum is the least disturbed run.
  std::printf("median: %.3f s/image, min: %.3f s/image\n", per_image[per_image.size() / 2],
              per_image.front());
  return 0;
}
