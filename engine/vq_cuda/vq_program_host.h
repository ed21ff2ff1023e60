// A host replay of a VqProgram (vq_program.h): every primitive in fp32 with
// the GPU's storage rounding, i.e. each activation, q|k|v and probability
// rounded to bf16 where the GPU stores bf16 (round_to_bf16), or kept in float
// (then it is the CPU decoder up to summation order). For tests and tools on
// machines without a GPU: it checks the program's layouts, GEMM arguments and
// bias folding against vq::VqDecoder, and estimates the bf16 path's error.
// GroupNorm statistics in double, GEMMs through BLAS with fp32 accumulation.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/vq_cuda/vq_program.h"

namespace argen::vq {

class HostVqExecutor final : public VqPrimitives {
 public:
  HostVqExecutor(const VqProgram& program, int32_t max_images, bool round_to_bf16);

  // Validated grids (token_grid^2 ids each, at most max_images) -> CHW floats per image.
  absl::Status Decode(const std::vector<std::vector<int32_t>>& grids, std::vector<std::vector<float>>* chw);

  absl::Status Lookup(VqPtr table, int32_t table_rows, int32_t dim, int64_t token_offset, int64_t count,
                      VqPtr out) override;
  absl::Status Conv3x3(int32_t shape_index, const VqConvShape& shape, int32_t n, VqPtr in, VqPtr weight, VqPtr out,
                       float beta) override;
  absl::Status Gemm(const VqGemm& g) override;
  absl::Status GroupNorm(const VqGroupNormArgs& a) override;
  absl::Status Upsample2x(VqPtr in, VqPtr bias, int32_t n, int32_t h, int32_t w, int32_t channels, VqPtr out) override;
  absl::Status AddBias(VqPtr x, VqPtr bias, int64_t rows, int32_t channels) override;
  absl::Status SoftmaxToBf16(VqPtr scores, int64_t rows, int32_t n, VqPtr probs) override;
  absl::Status ConvOut(VqPtr in, VqPtr weight_t, VqPtr bias, int32_t n, int32_t h, int32_t w, int32_t cin, VqPtr out,
                       int64_t plane_stride) override;

 private:
  float* At(VqPtr p);
  bool IsHalf(VqSpace s) const;
  float Store(VqSpace s, float v) const;  // the value as the GPU would store it in space s

  const VqProgram& program_;
  int32_t max_images_;
  bool round_;
  std::vector<float> act_[3], qkv_, scores_, probs_, out_, half_, float_, col_;
  std::vector<int32_t> tokens_;
};

}  // namespace argen::vq
