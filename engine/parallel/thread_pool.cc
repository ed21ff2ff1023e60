#include "engine/parallel/thread_pool.h"

#include <algorithm>

namespace argen::parallel {

ThreadPool::ThreadPool(int32_t threads) {
  for (int32_t p = 1; p < threads; ++p) workers_.emplace_back([this, p] { WorkerLoop(p); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelForRange(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  const int64_t parts = std::min<int64_t>(n, size());
  const int64_t base = n / parts, extra = n % parts;
  ParallelFor(parts, [&](int64_t c, int32_t) {
    const int64_t begin = c * base + std::min(c, extra);
    fn(begin, begin + base + (c < extra ? 1 : 0));
  });
}

void ThreadPool::Drain(int32_t participant) {
  for (int64_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) call_(ctx_, i, participant);
}

void ThreadPool::Run(int64_t n, void* ctx, Trampoline call) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    n_ = n;
    ctx_ = ctx;
    call_ = call;
    next_.store(0);
    busy_ = static_cast<int32_t>(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  Drain(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return busy_ == 0; });
}

void ThreadPool::WorkerLoop(int32_t participant) {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    Drain(participant);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace argen::parallel
