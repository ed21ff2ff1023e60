// A few threads running queued tasks in FIFO order; used for VQ decode and
// image encoding so they never stall the decode loop. The destructor runs the
// tasks still queued, then joins.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace argen::scheduler {

class TaskWorkers {
 public:
  explicit TaskWorkers(int threads);
  ~TaskWorkers();
  TaskWorkers(const TaskWorkers&) = delete;
  TaskWorkers& operator=(const TaskWorkers&) = delete;

  void Post(std::function<void()> task);
  // Tasks queued or running.
  int pending() const;

 private:
  void Run();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace argen::scheduler
