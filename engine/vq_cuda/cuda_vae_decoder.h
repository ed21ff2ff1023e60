// A continuous-latent image decoder on the GPU: the taming / Flux VAE decoder
// of engine/vqgan without its quantizer (VqganConfig::quantized false: conv_in,
// the middle block with attention, the up levels, norm_out, conv_out), decoding
// latents [z_channels, h, w] to its float output [out_ch, dh, dw] (d: the
// config's downsample()). NextStep-1's VAE runs on it; the CPU
// vqgan::VqganDecoder::DecodeLatentToFloat is the reference.
//
// It runs on the GPU decoders' fp32 machinery (fp32_vq_ops.h, kernels/
// vq_kernels.h): channel-major activations [C][N*H*W] over a chunk of latents
// of one size, each convolution one cuBLAS SGEMM (3x3 through banded im2col),
// GroupNorm with double statistics, single-head attention as strided-batched
// GEMMs.
//
// Precision: fp32 (the reference; default) or TF32 GEMMs. No bf16 path.
//
// Memory: weights uploaded once; every device and pinned buffer is sized at
// Create for a chunk of the largest latent (limits); a call allocates only its
// results. Latents of one size decode together, chunk by chunk; sizes in one
// call decode group by group, the outputs back in call order.
//
// Streams and thread-safety as the other GPU decoders: its own
// lowest-priority non-blocking stream; calls serialise on a mutex; CUDA and
// cuBLAS failures come back as absl::Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_decoder.h"
#include "engine/vqgan/vqgan_weights.h"

namespace argen::vq {

struct CudaVaeOptions {
  // Most latents decoded together; fewer when the workspace limit allows fewer. 1 ... 4096.
  int32_t max_images_per_chunk = 16;
  // Limit on the device scratch (weights and the 32 MiB cuBLAS workspace come
  // on top): activations, attention and staging take at most half, the im2col
  // band the rest.
  int64_t workspace_bytes = int64_t{4} << 30;
  bool tf32 = false;  // TF32 tensor-core GEMMs instead of fp32
};

class CudaVaeDecoder {
 public:
  // `config` must have no quantizer and no tanh output; limits bound the
  // latents (cells and side, in latent pixels). No GPU or too little memory:
  // a Status (ResourceExhausted for memory).
  static absl::StatusOr<std::unique_ptr<CudaVaeDecoder>> Create(const vqgan::VqganDecoderWeights& weights,
                                                                const vqgan::VqganConfig& config,
                                                                vqgan::DecodeLimits limits,
                                                                const CudaVaeOptions& options = {});
  ~CudaVaeDecoder();
  CudaVaeDecoder(const CudaVaeDecoder&) = delete;
  CudaVaeDecoder& operator=(const CudaVaeDecoder&) = delete;

  // Every latent is validated before any is decoded (InvalidArgument naming
  // latents[i]: an empty or too large size, a wrong value count); then
  // (*chw)[i] is latent i's output [out_ch, dh, dw], CHW.
  absl::Status DecodeToFloat(const std::vector<vqgan::LatentGrid>& latents, std::vector<std::vector<float>>* chw);

  int32_t chunk_images() const;  // latents per chunk after the workspace limit
  size_t scratch_bytes() const;  // device activations, attention, im2col band, staging
  size_t weight_bytes() const;
  std::string description() const;

  struct State;

 private:
  explicit CudaVaeDecoder(std::unique_ptr<State> state);
  absl::Status Validate(const vqgan::LatentGrid& latent, size_t index) const;
  // Decodes same-size validated latents (at most a chunk) to the pinned float staging [out_ch][n*HW].
  absl::Status RunChunk(const std::vector<const vqgan::LatentGrid*>& latents);

  std::mutex mu_;
  std::unique_ptr<State> s_;
};

}  // namespace argen::vq
