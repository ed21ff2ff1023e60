// ThreadPool::ParallelFor runs every index exactly once, on valid
// participants, for any count and pool size, many times in a row.
#include "engine/cpu/thread_pool.h"

#include <atomic>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace argen::cpu {
namespace {

TEST(ThreadPoolTest, EveryIndexExactlyOnce) {
  for (int32_t threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 17, 1000}) {
      for (int repeat = 0; repeat < 20; ++repeat) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<bool> bad_participant{false};
        pool.ParallelFor(n, [&](int64_t i, int32_t p) {
          hits[i].fetch_add(1);
          if (p < 0 || p >= threads) bad_participant = true;
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
        EXPECT_FALSE(bad_participant.load());
      }
    }
  }
}

TEST(ThreadPoolTest, ConstCallableAndResultsVisibleAfterReturn) {
  ThreadPool pool(3);
  std::vector<int64_t> out(500, -1);
  const auto fill = [&out](int64_t i, int32_t) { out[i] = i * i; };
  pool.ParallelFor(static_cast<int64_t>(out.size()), fill);
  for (int64_t i = 0; i < 500; ++i) ASSERT_EQ(out[i], i * i);
}

}  // namespace
}  // namespace argen::cpu
