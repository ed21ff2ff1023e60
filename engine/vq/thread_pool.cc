#include "engine/vq/thread_pool.h"

#include <algorithm>

namespace argen::vq {
namespace {

// Chunk `index` of `parts` over [0, n).
std::pair<int64_t, int64_t> Chunk(int64_t n, int32_t parts, int32_t index) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

}  // namespace

ThreadPool::ThreadPool(int32_t threads) {
  for (int32_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int32_t index) {
  uint64_t seen = 0;
  for (;;) {
    int64_t n;
    const absl::FunctionRef<void(int64_t, int64_t)>* fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      n = n_;
      fn = fn_;
    }
    const auto [begin, end] = Chunk(n, threads(), index);
    if (begin < end) (*fn)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    n_ = n;
    fn_ = &fn;
    pending_ = static_cast<int32_t>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  const auto [begin, end] = Chunk(n, threads(), 0);
  if (begin < end) fn(begin, end);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace argen::vq
