// How a backend stores the decoder layers' projection matrices (q|k|v, o,
// gate|up, down: nearly all of a model's weights): the server's and the
// tools' weight_dtype. The embeddings, the input MLP and the output head stay
// in the backend's own precision either way.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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
// (Header-only: the server's config and the tools parse it without the model library.)
inline absl::StatusOr<WeightFormat> ParseWeightFormat(absl::string_view name) {
  if (name == "auto") return WeightFormat::kAuto;
  if (name == "fp8") return WeightFormat::kFp8;
  return absl::InvalidArgumentError(
      absl::StrCat("weight_dtype '", name, "' is not one of: auto (bf16 on cuda, f32 on cpu), fp8 (e4m3 W8A8)"));
}

inline std::string WeightFormatName(WeightFormat format) { return format == WeightFormat::kFp8 ? "fp8" : "auto"; }

}  // namespace argen::model
