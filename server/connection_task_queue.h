// A cpp-httplib task queue that gives every open connection its own thread
// (up to `max_threads`), so a client that connects and sends nothing holds
// only its own thread: it cannot make a later connection wait behind it, as
// it does in httplib's fixed pool, where each idle connection holds a pool
// thread for the keep-alive time and the rest queue in order. Beyond
// `max_threads` connections wait, the newest first (a fresh scrape goes ahead
// of a pile of silent connections). Threads that finish stay for the next
// connection.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "httplib.h"

namespace argen::server {

class ConnectionTaskQueue final : public httplib::TaskQueue {
 public:
  explicit ConnectionTaskQueue(size_t max_threads);
  ~ConnectionTaskQueue() override;

  void enqueue(std::function<void()> task) override;
  // Runs what is queued, then joins every thread.
  void shutdown() override;

 private:
  void Work();

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;  // newest at the back
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

}  // namespace argen::server
