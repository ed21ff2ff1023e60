// Owning device (or pinned host) allocation; move-only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_status.h"

namespace argen::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes, absl::string_view what) {
    DeviceBuffer b;
    b.bytes_ = bytes;
    if (bytes > 0) {
      const cudaError_t err = cudaMalloc(&b.ptr_, bytes);
      if (err != cudaSuccess) {
        b.ptr_ = nullptr;
        cudaGetLastError();  // clear the sticky-free allocation error
        return CudaStatus(err, absl::StrCat(what, " (", bytes, " bytes)"));
      }
    }
    return b;
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  template <typename T = void>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes, absl::string_view what) {
    PinnedBuffer b;
    b.bytes_ = bytes;
    if (bytes > 0) {
      const cudaError_t err = cudaMallocHost(&b.ptr_, bytes);
      if (err != cudaSuccess) {
        b.ptr_ = nullptr;
        return CudaStatus(err, absl::StrCat(what, " (pinned, ", bytes, " bytes)"));
      }
    }
    return b;
  }
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  template <typename T = void>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace argen::cuda
