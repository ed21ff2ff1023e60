#include "server/connection_task_queue.h"

#include <algorithm>

namespace argen::server {

ConnectionTaskQueue::ConnectionTaskQueue(size_t max_threads) : max_threads_(std::max<size_t>(1, max_threads)) {}

ConnectionTaskQueue::~ConnectionTaskQueue() { shutdown(); }

void ConnectionTaskQueue::enqueue(std::function<void()> task) {
  std::unique_lock<std::mutex> lock(mu_);
  tasks_.push_back(std::move(task));
  if (idle_ == 0 && threads_.size() < max_threads_ && !shutdown_) {
    threads_.emplace_back([this] { Work(); });
  } else {
    ready_.notify_one();
  }
}

void ConnectionTaskQueue::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    ready_.wait(lock, [this] { return shutdown_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) return;                             // shutting down and nothing left
    std::function<void()> task = std::move(tasks_.back());  // newest first
    tasks_.pop_back();
    lock.unlock();
    task();
    lock.lock();
  }
}

void ConnectionTaskQueue::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutdown_ && threads_.empty()) return;
    shutdown_ = true;
    threads.swap(threads_);
  }
  ready_.notify_all();
  for (std::thread& t : threads) t.join();
}

}  // namespace argen::server
