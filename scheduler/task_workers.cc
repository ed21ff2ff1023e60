#include "scheduler/task_workers.h"

#include <utility>

namespace argen::scheduler {

TaskWorkers::TaskWorkers(int threads) {
  if (threads < 1) threads = 1;
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

TaskWorkers::~TaskWorkers() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (auto& t : threads_) t.join();
}

void TaskWorkers::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

int TaskWorkers::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(tasks_.size()) + running_;
}

void TaskWorkers::Run() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || !tasks_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stop_ and nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    task();
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace argen::scheduler
