// The GPU context every network that runs beside the engine's stack needs
// (CudaVqDecoder, CudaEmu3VqDecoder, CudaVaeDecoder, CudaT5Stack): the current
// device, its own lowest-priority non-blocking stream (so the engine's decode
// stream, the highest priority, is scheduled first) and a cuBLAS handle bound
// to that stream with its own 32 MiB workspace and a fixed math mode.
//
// One copy of this set-up keeps the four in step: the same stream priority,
// the same handle configuration, the same error texts ("<owner>: ...").
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/cuda/device_buffer.h"

namespace argen::vq {

class SideCublasStream {
 public:
  SideCublasStream() = default;
  // Waits for the stream, then destroys the handle and the stream (the
  // workspace goes last, after the handle that used it).
  ~SideCublasStream();
  SideCublasStream(const SideCublasStream&) = delete;
  SideCublasStream& operator=(const SideCublasStream&) = delete;

  // Once, before any use. owner prefixes every error message. No device:
  // FailedPrecondition "<owner>: no CUDA device (...)". tf32: TF32 tensor-core
  // GEMMs (CUBLAS_TF32_TENSOR_OP_MATH), else CUBLAS_DEFAULT_MATH.
  absl::Status Init(absl::string_view owner, bool tf32);

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cuda::DeviceBuffer workspace_;
};

}  // namespace argen::vq
