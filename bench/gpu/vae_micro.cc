#include "bench/gpu/vae_micro.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "engine/vq_cuda/cuda_vae_decoder.h"

namespace argen::bench {

bool RunVaeMicro(const vqgan::VqganDecoderWeights& weights, const vqgan::VqganConfig& config, int32_t side,
                 const std::vector<int>& batches, bool tf32, std::vector<VaeMicroRow>* rows, std::string* error) {
  int max_images = 1;
  for (int b : batches) max_images = std::max(max_images, b);
  vq::CudaVaeOptions options;
  options.max_images_per_chunk = max_images;
  options.workspace_bytes = int64_t{16} << 30;  // the H200 has room: chunks as large as the batch allows
  options.tf32 = tf32;
  absl::StatusOr<std::unique_ptr<vq::CudaVaeDecoder>> decoder =
      vq::CudaVaeDecoder::Create(weights, config, vqgan::DecodeLimits{side * side, side}, options);
  if (!decoder.ok()) {
    *error = std::string(decoder.status().message());
    return false;
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  std::vector<vqgan::LatentGrid> latents(max_images);
  for (vqgan::LatentGrid& l : latents) {
    l.height = l.width = side;
    l.chw.resize(static_cast<size_t>(config.z_channels) * side * side);
    for (float& x : l.chw) x = unit(rng);
  }
  std::vector<std::vector<float>> chw;
  const std::vector<vqgan::LatentGrid> one(latents.begin(), latents.begin() + 1);
  if (absl::Status s = (*decoder)->DecodeToFloat(one, &chw); !s.ok()) {  // warm-up
    *error = std::string(s.message());
    return false;
  }
  for (int images : batches) {
    const std::vector<vqgan::LatentGrid> batch(latents.begin(), latents.begin() + images);
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = (*decoder)->DecodeToFloat(batch, &chw);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok()) {
      *error = std::string(s.message());
      return false;
    }
    rows->push_back({images, ms, (*decoder)->chunk_images()});
  }
  return true;
}

}  // namespace argen::bench
