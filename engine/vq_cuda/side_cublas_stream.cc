#include "engine/vq_cuda/side_cublas_stream.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"

namespace argen::vq {
namespace {

constexpr size_t kCublasWorkspace = size_t{32} << 20;

}  // namespace

SideCublasStream::~SideCublasStream() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

absl::Status SideCublasStream::Init(absl::string_view owner, bool tf32) {
  const auto what = [owner](absl::string_view step) { return absl::StrCat(owner, ": ", step); };
  int devices = 0;
  if (cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess || devices == 0) {
    cudaGetLastError();  // a failed query must not surface as a later call's error
    return absl::FailedPreconditionError(
        absl::StrCat(owner, ": no CUDA device (", err == cudaSuccess ? "none found" : cudaGetErrorString(err), ")"));
  }
  ARGEN_CUDA_RETURN(cudaGetDevice(&device_), what("get device"));
  // The lowest priority: the engine's decode stream (highest priority) is scheduled first.
  int least_priority = 0, greatest_priority = 0;
  ARGEN_CUDA_RETURN(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority), what("stream priorities"));
  ARGEN_CUDA_RETURN(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, least_priority), what("stream"));
  ARGEN_STATUS_RETURN(cuda::CublasStatus(cublasCreate(&cublas_), what("create handle")));
  ARGEN_STATUS_RETURN(cuda::CublasStatus(cublasSetStream(cublas_, stream_), what("set stream")));
  ARGEN_STATUS_RETURN(cuda::CublasStatus(
      cublasSetMathMode(cublas_, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), what("math mode")));
  absl::StatusOr<cuda::DeviceBuffer> workspace =
      cuda::DeviceBuffer::Allocate(kCublasWorkspace, what("cublas workspace"));
  if (!workspace.ok()) return workspace.status();
  workspace_ = std::move(*workspace);
  return cuda::CublasStatus(cublasSetWorkspace(cublas_, workspace_.as(), kCublasWorkspace), what("cublas workspace"));
}

}  // namespace argen::vq
