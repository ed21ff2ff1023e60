// The one CPU thread pool of the engine: a fixed set of workers that sleep on
// a condition variable between jobs (so they do not compete with BLAS threads)
// and take indices from an atomic counter; the calling thread works too. No
// heap allocation per call, so it is usable in the decode loop.
//
// Two entry points over the same workers:
//  - ParallelFor(n, [parallel,] fn(i, participant)): one call per index (the
//    CPU backend's per-row loops: attention, KV writes, policy updates);
//  - ParallelForRange(n, fn(begin, end)): [0, n) split into size() contiguous
//    chunks (the VQ decoder's element-wise work: im2col, GroupNorm,
//    upsampling, softmax, pixel conversion).
// One job at a time per pool (not reentrant).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"

namespace argen::parallel {

class ThreadPool {
 public:
  // `threads` participants: threads - 1 workers plus the calling thread;
  // threads <= 1 runs everything inline on the caller.
  explicit ThreadPool(int32_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t size() const { return static_cast<int32_t>(workers_.size()) + 1; }

  // Calls fn(i, participant) for every i in [0, n), participant in [0, size()),
  // each i exactly once; returns when all calls have finished. Not reentrant.
  template <typename Fn>
  void ParallelFor(int64_t n, Fn&& fn) {
    ParallelFor(n, true, std::forward<Fn>(fn));
  }
  // parallel == false runs everything on the calling thread (participant 0),
  // for work too small to pay for waking the workers.
  template <typename Fn>
  void ParallelFor(int64_t n, bool parallel, Fn&& fn) {
    if (n <= 0) return;
    if (!parallel || workers_.empty() || n == 1) {
      for (int64_t i = 0; i < n; ++i) fn(i, 0);
      return;
    }
    using Callable = std::remove_reference_t<Fn>;
    Run(n, const_cast<void*>(static_cast<const void*>(&fn)),
        [](void* ctx, int64_t i, int32_t p) { (*static_cast<Callable*>(ctx))(i, p); });
  }

  // Splits [0, n) into at most size() contiguous chunks of near-equal length
  // and calls fn(begin, end) once per non-empty chunk (chunks are dealt to the
  // participants like ParallelFor's indices); returns when all are done.
  // n == 1 or a pool of one runs fn(0, n) inline. Not reentrant.
  void ParallelForRange(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn);

 private:
  using Trampoline = void (*)(void*, int64_t, int32_t);
  void Run(int64_t n, void* ctx, Trampoline call);
  void WorkerLoop(int32_t participant);
  void Drain(int32_t participant);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  uint64_t generation_ = 0;  // guarded by mu_
  int32_t busy_ = 0;         // workers still in the current job; guarded by mu_
  bool stop_ = false;        // guarded by mu_
  // The current job (published under mu_ before generation_ changes).
  int64_t n_ = 0;
  void* ctx_ = nullptr;
  Trampoline call_ = nullptr;
  std::atomic<int64_t> next_{0};
};

// ParallelForRange on `pool`, or fn(0, n) inline when pool is null (n > 0).
inline void ParallelForRange(ThreadPool* pool, int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (pool == nullptr) {
    if (n > 0) fn(0, n);
  } else {
    pool->ParallelForRange(n, fn);
  }
}

}  // namespace argen::parallel
