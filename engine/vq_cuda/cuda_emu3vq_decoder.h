// Emu3's vision tokenizer decoder on the GPU: code grids of any listed size
// -> RGB8 images, the same network, reductions (frame 0; causal 3-D convs as
// their last temporal tap, BatchNorm3d as a per-channel affine: emu3vq_weights.h)
// and validation as the CPU emu3vq::Emu3VqDecoder (the reference).
//
// It runs on CudaVqDecoder's fp32 machinery (fp32_vq_ops.h, kernels/
// vq_kernels.h): channel-major activations [C][N*H*W] over a chunk of grids
// of one size, each convolution one cuBLAS SGEMM (3x3 through banded im2col),
// GroupNorm in double statistics, single-head attention as strided-batched
// GEMMs. Emu3's own pieces are kernels/emu3vq_kernels.h: the temporal stack's
// BatchNorm affine + swish, and SpatialNorm, whose conv_y / conv_b are 1x1
// convs of the condition zq at the code resolution (they commute with the
// nearest resize) applied while modulating the GroupNorm output.
//
// Precision (CudaEmu3VqOptions::precision, VqPrecision as CudaVqDecoder's):
// fp32 (the reference; default), TF32 GEMMs on the same path, or bf16: the
// NHWC tensor-core path of bf16_emu3vq_network.h (cuDNN + cuBLAS bf16, the
// VQ-16 bf16 path's kernels). Where bf16 cannot run (no cuDNN, a layout its
// kernels do not take) Create falls back to fp32 and logs why, or fails with
// FailedPrecondition when fallback_to_fp32 is false; precision() says which
// path runs.
//
// Memory: weights uploaded once; every device and pinned buffer is sized at
// Create for a chunk of the largest grid (max_cells); Decode allocates only
// its result images. (bf16 plans cuDNN per grid size: at Create for
// plan_grids, otherwise on a size's first decode.) Grids of one size decode together, chunk by chunk;
// sizes in one call decode group by group, the images back in call order.
//
// Streams and thread-safety as CudaVqDecoder: its own lowest-priority
// non-blocking stream; calls serialise on a mutex; CUDA and cuBLAS failures
// come back as absl::Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_decoder.h"
#include "engine/emu3vq/emu3vq_weights.h"
#include "engine/engine.h"
#include "engine/vq_cuda/cuda_vq_decoder.h"

namespace argen::vq {

struct CudaEmu3VqOptions {
  // Most grids decoded together; fewer when the workspace limit allows fewer. 1 ... 4096.
  int32_t max_images_per_chunk = 16;
  // Limit on the device scratch (weights and the 32 MiB cuBLAS workspace come
  // on top): activations take at most half, the im2col band the rest. One
  // 720x720 image of the published tokenizer needs about 3.6 GB.
  int64_t workspace_bytes = int64_t{4} << 30;
  VqPrecision precision = VqPrecision::kFp32;
  // bf16 where it cannot run here: decode in fp32 and log why (true), or fail Create (false).
  bool fallback_to_fp32 = true;
  // bf16: time cuDNN's algorithm candidates when a grid size is planned (true) or take its heuristics' first.
  bool benchmark_algorithms = true;
  // bf16: the most workspace cuDNN may use (within workspace_bytes).
  int64_t cudnn_workspace_bytes = int64_t{256} << 20;
  // bf16: grid sizes (rows, columns of codes) whose cuDNN plans are made at Create.
  std::vector<std::pair<int32_t, int32_t>> plan_grids;
};

class CudaEmu3VqDecoder {
 public:
  // max_cells: the largest grid (codes) a call may decode. No GPU or too
  // little memory: a Status (ResourceExhausted for memory).
  static absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> Create(const emu3vq::Emu3VqWeights& weights,
                                                                   const emu3vq::Emu3VqConfig& config,
                                                                   int32_t max_cells,
                                                                   const CudaEmu3VqOptions& options = {});
  ~CudaEmu3VqDecoder();
  CudaEmu3VqDecoder(const CudaEmu3VqDecoder&) = delete;
  CudaEmu3VqDecoder& operator=(const CudaEmu3VqDecoder&) = delete;

  // As Emu3VqDecoder::Decode: every grid is validated (emu3vq::ValidateCodeGrid,
  // the CPU decoder's messages) before any is decoded.
  absl::StatusOr<std::vector<engine::RgbImage>> Decode(const std::vector<emu3vq::CodeGrid>& grids);
  // Frame 0's float output per grid, [3, f*h, f*w] CHW (before the pixel conversion).
  absl::Status DecodeToFloat(const std::vector<emu3vq::CodeGrid>& grids, std::vector<std::vector<float>>* chw);

  int32_t chunk_images() const;  // grids per chunk after the workspace limit
  size_t scratch_bytes() const;  // device activations, condition, attention, im2col band / cuDNN
  size_t weight_bytes() const;
  VqPrecision precision() const;               // the path that runs (fp32 after a bf16 fallback)
  const std::string& fallback_reason() const;  // why bf16 fell back to fp32; empty otherwise
  std::string description() const;

  struct State;

 private:
  explicit CudaEmu3VqDecoder(std::unique_ptr<State> state);
  // Decodes same-size validated grids (at most a chunk) to RGB8 (rgb) or
  // floats in the pinned host staging.
  absl::Status RunChunk(const std::vector<const emu3vq::CodeGrid*>& grids, bool rgb);
  // Grid indices by size, in call order within a size, split into chunks.
  std::vector<std::vector<size_t>> Chunks(const std::vector<emu3vq::CodeGrid>& grids) const;

  std::mutex mu_;
  std::unique_ptr<State> s_;
};

}  // namespace argen::vq
