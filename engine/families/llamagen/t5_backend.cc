#include "engine/families/llamagen/t5_backend.h"

#include "absl/strings/str_cat.h"

namespace argen::llamagen {

absl::StatusOr<T5Backend> ParseT5Backend(const std::string& option) {
  if (option.empty()) return T5Backend::kFollowEngine;
  if (option == "cpu") return T5Backend::kCpu;
  if (option == "cuda") return T5Backend::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("family option 't5_backend' must be \"cpu\" or \"cuda\", got \"", option, "\""));
}

bool T5RunsOnGpu(T5Backend backend, bool engine_on_gpu) {
  switch (backend) {
    case T5Backend::kCpu:
      return false;
    case T5Backend::kCuda:
      return true;
    case T5Backend::kFollowEngine:
      break;
  }
  return engine_on_gpu;
}

}  // namespace argen::llamagen
