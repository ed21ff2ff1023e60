// y[rows x out] (f32) = x[rows x in] (bf16) * W^T, W = [out x in] row-major
// (bf16, a torch Linear weight), with y = result + beta * y (beta = 1 fuses
// the residual add). fp32 accumulation.
//
// Three paths behind one call (Gemm::Linear), chosen by GemmMode:
//   kCublas       cublasGemmEx, CUBLAS_GEMM_DEFAULT (the first round's path)
//   kLtHeuristic  cublasLtMatmul with the heuristic's first algorithm
//   kLtTuned      cublasLtMatmul with the fastest of the heuristic's first
//                 kTuneCandidates algorithms, timed with events on the real
//                 operands the first time a shape (rows, in, out, beta != 0,
//                 operand alignment) is met outside stream capture. A shape
//                 first met during capture takes the heuristic's first
//                 algorithm, untimed. The choice is process-wide and final
//                 (every Gemm object of the process, graph or eager, runs the
//                 same algorithm for a shape, so results repeat bit for bit).
// Tuning never changes results: a beta == 0 shape is timed on its real output
// (every candidate overwrites it, then the winner writes it once more); a
// beta != 0 shape is timed on the scratch buffer with the same beta (a shape
// whose output does not fit the scratch takes the heuristic's first algorithm).
// Operands below 16-byte alignment (pointers or leading dimensions), and shapes
// cuBLASLt has no algorithm for, take cublasGemmEx in every mode.
// Nothing is allocated on the device after Init.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/cuda/device_buffer.h"

namespace argen::cuda {

// The cublasGemmEx call (kCublas), on `handle`'s stream and workspace.
absl::Status LinearBf16(cublasHandle_t handle, const __nv_bfloat16* x, const __nv_bfloat16* w,
                        int rows, int in, int out, float* y, float beta, const char* what);

enum class GemmMode : int32_t { kCublas = 0, kLtHeuristic = 1, kLtTuned = 2 };
const char* GemmModeName(GemmMode m);  // "cublas", "lt-heuristic", "lt-tuned"
bool ParseGemmMode(absl::string_view s, GemmMode* m);

// Process-wide tuning totals (all Gemm objects).
struct GemmTuningStats {
  int32_t shapes_tuned = 0;     // timed selections made
  int32_t shapes_untimed = 0;   // first met in capture / output too large for the scratch: heuristic's first
  double tuning_ms = 0;         // host wall time spent timing candidates
};
GemmTuningStats GetGemmTuningStats();

class Gemm {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  static constexpr int kTuneCandidates = 8;
  static constexpr int kTuneReps = 3;

  Gemm() = default;
  ~Gemm() { Reset(); }
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Creates the cuBLAS and cuBLASLt handles bound to `stream`, one workspace
  // (kWorkspaceBytes) both use (they run in order on the one stream), and the
  // zeroed fp32 timing scratch of `scratch_floats` (the largest rows * out of a
  // beta != 0 GEMM that should be tuned).
  absl::Status Init(cudaStream_t stream, size_t scratch_floats);
  // Destroys the handles and descriptors (the stream must be idle); frees the buffers.
  void Reset();

  void SetMode(GemmMode m) { mode_ = m; }
  GemmMode mode() const { return mode_; }
  cublasHandle_t cublas() const { return cublas_; }

  absl::Status Linear(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in, int out, float* y,
                      float beta, const char* what);

 private:
  // (rows, in, out, beta != 0, alignment bytes of the pointers and leading dimensions, capped at 256)
  using Key = std::tuple<int, int, int, bool, int>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    std::vector<cublasLtMatmulHeuristicResult_t> candidates;  // empty: cublasGemmEx
    bool have_final = false;                                  // kLtTuned: `algo` is the process-wide choice
    cublasLtMatmulAlgo_t algo{};
  };
  absl::Status MakePlan(const Key& key, Plan* plan);
  // Looks up, or picks (timing when not capturing), the process-wide algorithm of `key`.
  absl::Status Choose(const Key& key, Plan* plan, const __nv_bfloat16* x, const __nv_bfloat16* w, float* y,
                      float beta);
  cublasStatus_t RunLt(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* x,
                       const __nv_bfloat16* w, float* y, float beta) const;

  // Default kCublas: on the H200 the Lt paths measured no faster (7B, 16/64 images and
  // the 48 GB max batch; bench/gpu/results/h200-2026-11-29-gemm, docs/PERFORMANCE.md).
  GemmMode mode_ = GemmMode::kCublas;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  int device_ = 0;
  DeviceBuffer workspace_, scratch_;
  size_t scratch_floats_ = 0;
  std::vector<cudaEvent_t> events_;  // 2 per candidate
  std::map<Key, Plan> plans_;
};

}  // namespace argen::cuda
