// CUDA / cuBLAS results as absl::Status, with the operation named.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace argen::cuda {

inline absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  if (err == cudaErrorMemoryAllocation)
    return absl::ResourceExhaustedError(absl::StrCat("cuda: ", what, ": ", cudaGetErrorString(err)));
  return absl::InternalError(absl::StrCat("cuda: ", what, ": ", cudaGetErrorString(err)));
}

inline absl::Status CublasStatus(cublasStatus_t s, absl::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cublas: ", what, ": ", cublasGetStatusString(s)));
}

}  // namespace argen::cuda

#define ARGEN_CUDA_RETURN(expr, what)                                                                       \
  do {                                                                                                      \
    if (absl::Status argen_s_ = ::argen::cuda::CudaStatus((expr), (what)); !argen_s_.ok()) return argen_s_; \
  } while (0)

#define ARGEN_STATUS_RETURN(expr)                                        \
  do {                                                                   \
    if (absl::Status argen_s_ = (expr); !argen_s_.ok()) return argen_s_; \
  } while (0)
