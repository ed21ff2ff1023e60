#include "engine/model/weight_format.h"

#include "absl/strings/str_cat.h"

namespace argen::model {

absl::StatusOr<WeightFormat> ParseWeightFormat(absl::string_view name) {
  if (name == "auto") return WeightFormat::kAuto;
  if (name == "fp8") return WeightFormat::kFp8;
  return absl::InvalidArgumentError(
      absl::StrCat("weight_dtype '", name, "' is not one of: auto (bf16 on cuda, f32 on cpu), fp8 (e4m3 W8A8)"));
}

std::string WeightFormatName(WeightFormat format) { return format == WeightFormat::kFp8 ? "fp8" : "auto"; }

}  // namespace argen::model
