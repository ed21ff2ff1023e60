// The 3x3 convolutions of the bf16 VQ path through cuDNN's convolution API:
// stride 1, pad 1, cross-correlation (nn.Conv2d), NHWC bf16 activations, KRSC
// bf16 filters, fp32 accumulation, tensor-op math. Descriptors and one
// algorithm per (shape, batch size) are chosen up front (Plan); Forward only
// enqueues on the handle's stream (no allocation, no synchronisation).
//
// Every cuDNN status comes back as absl::Status naming the call and shape:
// FailedPrecondition for the NOT_SUPPORTED family (the caller falls back to
// fp32), ResourceExhausted for allocation failures, Internal otherwise.
// Only in builds with cuDNN (ARGEN_WITH_CUDNN).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argen::vq {

struct CudnnConvShape {
  int32_t cin = 0, cout = 0, h = 0, w = 0;
};

class CudnnConvs {
 public:
  // A cuDNN handle on `stream`. No usable cuDNN (library, device): a Status.
  static absl::StatusOr<std::unique_ptr<CudnnConvs>> Create(cudaStream_t stream);
  ~CudnnConvs();
  CudnnConvs(const CudnnConvs&) = delete;
  CudnnConvs& operator=(const CudnnConvs&) = delete;

  // Descriptors and an algorithm for every shape at every batch size. Calls
  // add up: a later call's shapes are numbered after the earlier ones' (the
  // first call's shape i is i), so a decoder may plan its shapes size by size.
  // benchmark: cudnnFindConvolutionForwardAlgorithmEx times the candidates on
  // the given buffers (synchronous; x and y hold at least the largest batch of
  // any shape's input and output, weights[s] a filter of shape s, find_ws
  // workspace_limit bytes) and the fastest that fits the limit is kept; else
  // the heuristics' first candidate that fits.
  absl::Status Plan(const std::vector<CudnnConvShape>& shapes, const std::vector<const void*>& weights,
                    const std::vector<int32_t>& batches, bool benchmark, void* x, void* y, void* find_ws,
                    size_t workspace_limit);

  // Shapes planned so far (the next Plan's first shape gets this number).
  int32_t shape_count() const;

  // The most workspace any chosen algorithm needs.
  size_t workspace_bytes() const;

  // y = conv(x) + beta * y (beta 0 or 1; y must not overlap x), for a planned shape and batch.
  absl::Status Forward(int32_t shape, int32_t batch, const void* x, const void* w, void* y, float beta, void* workspace,
                       size_t workspace_bytes) const;

  // The algorithm chosen per shape at the largest batch (and its measured time when benchmarked).
  std::string Describe() const;

 private:
  struct Impl;
  explicit CudnnConvs(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace argen::vq
