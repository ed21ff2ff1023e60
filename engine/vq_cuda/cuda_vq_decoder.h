// The VQ-16 image decoder on the GPU: image token grids -> RGB8 images, the same
// network and the same validation as the CPU vq::VqDecoder (the reference).
//
// Two paths, by CudaVqOptions::precision:
// - fp32 / TF32 (the accuracy reference): whole batch chunks go through the
//   network together in the channel-major layout [C][N*H*W]
//   (kernels/vq_kernels.h), so every convolution of a chunk is one cuBLAS
//   SGEMM (3x3 ones through im2col, in column bands when the workspace limit
//   asks for it) and every GroupNorm one launch. Attention at the lowest
//   resolution is a strided-batched GEMM per image.
// - bf16 (tensor cores; Bf16VqNetwork): channels-last bf16 activations, cuDNN
//   3x3 convolutions and cuBLAS bf16 GEMMs with fp32 accumulation, our own
//   fused GroupNorm(+swish), upsample and conv_out kernels, biases folded
//   (vq_program.h). Where it cannot run (no cuDNN, a layout its kernels do not
//   take, cuDNN NOT_SUPPORTED) Create falls back to fp32 with a log line on
//   stderr (fallback_to_fp32) or fails.
//
// Memory: weights are uploaded once; every device and pinned host buffer
// (activations, im2col band or cuDNN workspace, attention scratch, token and
// pixel staging, the cuBLAS workspace) is allocated at Create, sized for the
// chunk, and the bf16 path's cuDNN algorithms are chosen there for every batch
// size it runs. Decode allocates only its result images. A batch larger than
// the chunk is decoded chunk by chunk.
//
// Numerics: fp32 GEMMs (CUBLAS_DEFAULT_MATH) or TF32; GroupNorm and softmax
// statistics in double as on the CPU; the pixel conversion is the CPU's bit
// for bit given the same floats. bf16 stores activations in bf16 (bounds and
// measurements: cuda_vq_decoder_test, docs/PERFORMANCE.md).
//
// Streams: the decoder works on its own non-blocking stream created with the
// lowest priority (the engine's decode stream has the highest), so a decode
// step's kernels are scheduled first; nothing in Decode synchronises the
// device or touches the legacy default stream (it waits on its own stream only).
//
// Thread-safety: Decode/DecodeToFloat may be called from any thread; calls
// serialise on a mutex. CUDA, cuBLAS and cuDNN failures come back as
// absl::Status, never as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/engine.h"
#include "engine/vq/vq_config.h"
#include "engine/vq/vq_weights.h"

namespace argen::vq {

enum class VqPrecision {
  kFp32,  // fp32 GEMMs: the accuracy reference
  kTf32,  // TF32 tensor-core GEMMs on the fp32 path (~1e-3 relative error)
  kBf16,  // the bf16 NHWC path (cuDNN + cuBLAS tensor cores)
};
const char* VqPrecisionName(VqPrecision p);  // "fp32", "tf32", "bf16"

struct CudaVqOptions {
  // Most images decoded together; fewer when the workspace limit allows fewer. 1 ... 4096.
  int32_t max_images_per_chunk = 32;
  // Limit on the device scratch (weights and the 32 MiB cuBLAS workspace come
  // on top). fp32: activations, im2col band and attention; activations take
  // at most half, the im2col band the rest (it is banded to fit). bf16:
  // activations, attention, GroupNorm scratch and cuDNN's workspace.
  int64_t workspace_bytes = int64_t{4} << 30;
  VqPrecision precision = VqPrecision::kFp32;
  // bf16 where it cannot run here: decode in fp32 and log why (true), or fail Create (false).
  bool fallback_to_fp32 = true;
  // bf16: time cuDNN's algorithm candidates at Create (true) or take its heuristics' first.
  bool benchmark_algorithms = true;
  // bf16: the most workspace cuDNN may use (within workspace_bytes).
  int64_t cudnn_workspace_bytes = int64_t{256} << 20;
};

class CudaVqDecoder {
 public:
  // Loads gen_vision_model.* (vq::LoadVqDecoderWeights; errors name the tensor
  // and file), validates the options, uploads the weights and allocates every
  // buffer. No GPU or too little memory: a Status (ResourceExhausted for memory).
  static absl::StatusOr<std::unique_ptr<CudaVqDecoder>> Create(const checkpoint::Checkpoint& checkpoint,
                                                               const vq::Vq16Config& config,
                                                               const CudaVqOptions& options = {});
  static absl::StatusOr<std::unique_ptr<CudaVqDecoder>> Create(VqDecoderWeights weights, const vq::Vq16Config& config,
                                                               const CudaVqOptions& options = {});
  ~CudaVqDecoder();
  CudaVqDecoder(const CudaVqDecoder&) = delete;
  CudaVqDecoder& operator=(const CudaVqDecoder&) = delete;

  // As VqDecoder::Decode: every grid is validated before any is decoded, with
  // the CPU decoder's InvalidArgument messages.
  absl::StatusOr<std::vector<engine::RgbImage>> Decode(const std::vector<std::vector<int32_t>>& token_grids);

  // As VqDecoder::DecodeToFloat: one grid to [3, image_size, image_size] CHW floats.
  absl::Status DecodeToFloat(std::span<const int32_t> tokens, std::vector<float>* chw);
  // Several grids at once (chunked like Decode): (*chw)[i] is grid i's CHW floats.
  absl::Status DecodeToFloatBatch(const std::vector<std::vector<int32_t>>& token_grids,
                                  std::vector<std::vector<float>>* chw);

  // bf16 path only: Bf16VqNetwork::Profile of one n-image decode (n a power of two <= chunk, or the chunk).
  absl::StatusOr<std::string> Profile(int32_t n);

  int32_t image_size() const;
  int32_t token_grid() const;
  int32_t codebook_size() const;
  int32_t chunk_images() const;                // images per chunk after the workspace limit
  size_t scratch_bytes() const;                // device activations + im2col / cuDNN workspace + attention
  size_t weight_bytes() const;                 // device weights
  VqPrecision precision() const;               // the path that runs (fp32 after a bf16 fallback)
  const std::string& fallback_reason() const;  // why bf16 fell back to fp32; empty otherwise
  std::string description() const;             // path, chunk and (bf16) cuDNN's algorithms

  struct State;

 private:
  explicit CudaVqDecoder(std::unique_ptr<State> state);
  static absl::Status SetupFp32(State& s, const VqDecoderWeights& weights);
  absl::Status ValidateGrid(std::span<const int32_t> tokens, size_t grid_index) const;
  // Decodes grids [begin, end) (validated, end - begin <= chunk) to the device
  // output [3][n*hw]; then copies RGB8 (rgb != nullptr) or floats to the host staging.
  absl::Status RunChunk(const std::vector<std::span<const int32_t>>& grids, bool rgb);

  std::mutex mu_;  // guards everything the device work touches
  std::unique_ptr<State> s_;
};

}  // namespace argen::vq
