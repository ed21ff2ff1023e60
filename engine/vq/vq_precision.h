// The image decoder's arithmetic a user asks for: the server's and
// argen_generate's vq_precision, engine::EngineOptions::vq_precision. The one
// place the choice is parsed; the engine factory, the server's config and the
// tools use it, and the families map it onto their GPU decoder.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace argen::vq {

enum class DecoderPrecision {
  kAuto,  // bf16 tensor cores on the GPU, fp32 where that path cannot run; the CPU decoder's fp32
  kBf16,  // bf16 or an error (GPU only)
  kTf32,  // GPU only
  kFp32,  // the accuracy reference
};

// "auto", "bf16", "tf32" or "fp32"; anything else is an InvalidArgument naming
// the choices. (Header-only: the server's config and the tools parse it
// without the decoder libraries.)
inline absl::StatusOr<DecoderPrecision> ParseDecoderPrecision(absl::string_view name) {
  if (name == "auto") return DecoderPrecision::kAuto;
  if (name == "bf16") return DecoderPrecision::kBf16;
  if (name == "tf32") return DecoderPrecision::kTf32;
  if (name == "fp32") return DecoderPrecision::kFp32;
  return absl::InvalidArgumentError(
      absl::StrCat("vq_precision must be \"auto\", \"fp32\", \"tf32\" or \"bf16\", got \"", name, "\""));
}

inline const char* DecoderPrecisionName(DecoderPrecision p) {
  switch (p) {
    case DecoderPrecision::kBf16:
      return "bf16";
    case DecoderPrecision::kTf32:
      return "tf32";
    case DecoderPrecision::kFp32:
      return "fp32";
    case DecoderPrecision::kAuto:
      break;
  }
  return "auto";
}

// The CPU decoder is fp32: it takes auto and fp32; bf16 and tf32 need the GPU one.
inline bool NeedsGpuDecoder(DecoderPrecision p) { return p == DecoderPrecision::kBf16 || p == DecoderPrecision::kTf32; }

}  // namespace argen::vq
