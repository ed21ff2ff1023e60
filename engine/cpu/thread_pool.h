// A fixed pool of worker threads for the CPU backend's per-row loops
// (attention, KV writes, policy updates) between BLAS calls. ParallelFor
// hands out indices from an atomic counter; the caller works too. No heap
// allocation per call, so it is usable in the decode loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace argen::cpu {

class ThreadPool {
 public:
  // `threads` >= 1 participants: threads - 1 workers plus the calling thread.
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

}  // namespace argen::cpu
