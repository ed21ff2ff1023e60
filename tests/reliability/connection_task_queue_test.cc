// server/connection_task_queue.h: a thread per task up to the cap, newest
// first beyond it, and shutdown runs what is queued.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "server/connection_task_queue.h"

namespace argen::server {
namespace {

TEST(ConnectionTaskQueueTest, BlockedTasksDoNotDelayANewOneBelowTheCap) {
  ConnectionTaskQueue queue(16);
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  for (int i = 0; i < 8; ++i) {
    queue.enqueue([&] {
      ++started;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  std::atomic<bool> ran{false};
  queue.enqueue([&] { ran = true; });
  for (int i = 0; i < 2000 && !ran; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(ran.load()) << "a new task waited behind 8 blocked ones";
  // Newest first: the new task may run before the blocked ones have started;
  // each of them still gets its own thread.
  for (int i = 0; i < 2000 && started < 8; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(started.load(), 8);
  release = true;
  queue.shutdown();
}

TEST(ConnectionTaskQueueTest, AtTheCapTheNewestWaitingTaskRunsFirst) {
  ConnectionTaskQueue queue(1);
  std::atomic<bool> release{false};
  std::atomic<bool> blocker_started{false};
  queue.enqueue([&] {
    blocker_started = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!blocker_started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) {
    queue.enqueue([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    });
  }
  release = true;
  queue.shutdown();  // runs the queued ones before joining
  EXPECT_EQ(order, (std::vector<int>{2, 1, 0}));
}

}  // namespace
}  // namespace argen::server
