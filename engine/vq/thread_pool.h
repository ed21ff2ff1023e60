// A small fixed pool for the decoder's element-wise work (im2col, GroupNorm,
// upsampling, softmax, pixel conversion), which would otherwise run on one
// core while OpenBLAS spreads the GEMMs over all of them. Workers sleep on a
// condition variable between jobs, so they do not compete with BLAS threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace argen::vq {

class ThreadPool {
 public:
  // threads <= 1: everything runs inline on the caller.
  explicit ThreadPool(int32_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t threads() const { return static_cast<int32_t>(workers_.size()) + 1; }

  // Splits [0, n) into contiguous chunks, one per thread (the caller takes the
  // first), calls fn(begin, end) for each and returns when all are done.
  // One ParallelFor at a time (the decoder holds its lock around a decode).
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn);

 private:
  void WorkerLoop(int32_t index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  uint64_t generation_ = 0;  // bumped per job
  int32_t pending_ = 0;      // workers still running the current job
  bool stop_ = false;
  int64_t n_ = 0;
  const absl::FunctionRef<void(int64_t, int64_t)>* fn_ = nullptr;
};

// Runs inline when pool is null.
inline void ParallelFor(ThreadPool* pool, int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
  } else {
    pool->ParallelFor(n, fn);
  }
}

}  // namespace argen::vq
