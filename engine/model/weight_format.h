// How a backend stores the decoder layers' projection matrices (q|k|v, o,
// gate|up, down: nearly all of a model's weights): the server's and the
// tools' weight_dtype. The embeddings, the input MLP and the output head stay
// in the backend's own precision either way.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argen::model {

enum class WeightFormat {
  kAuto,  // the backend's own: bf16 on cuda, f32 on cpu
  // e4m3 with a scale per output channel, each GEMM's input quantized per row
  // at run time (W8A8, kernels/fp8_linear.h); the CPU backend computes the
  // same rounding in f32 (the reference of the CUDA path).
  kFp8,
};

// "auto" or "fp8"; anything else is an InvalidArgument naming the choices.
absl::StatusOr<WeightFormat> ParseWeightFormat(absl::string_view name);
std::string WeightFormatName(WeightFormat format);

}  // namespace argen::model
