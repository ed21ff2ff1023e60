#include "engine/cuda/device_memory.h"

#include <cuda_runtime.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"

namespace argen::cuda {

std::string GiB(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

absl::Status CheckDeviceMemoryFits(int64_t bytes, absl::string_view what, absl::string_view advice) {
  size_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "memory info"); !s.ok()) return s;
  if (bytes <= static_cast<int64_t>(free_bytes)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(what, " needs ", GiB(bytes), " but the device has ",
                                                   GiB(static_cast<int64_t>(free_bytes)), " of ",
                                                   GiB(static_cast<int64_t>(total_bytes)), " free; ", advice));
}

bool DeviceUsable() {
  cudaGetLastError();
  return cudaDeviceSynchronize() == cudaSuccess;
}

}  // namespace argen::cuda
