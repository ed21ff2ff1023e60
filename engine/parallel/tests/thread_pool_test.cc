// The engine's thread pool: ParallelFor runs every index exactly once, on
// valid participants; ParallelForRange covers [0, n) exactly once with at most
// size() contiguous chunks; both for any count and pool size, many times in a
// row, interleaved on one pool; the null-pool helper runs inline.
#include "engine/parallel/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace argen::parallel {
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
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
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

TEST(ThreadPoolTest, SerialParallelForRunsOnTheCaller) {
  ThreadPool pool(4);
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<int> hits(50, 0);
  bool elsewhere = false;
  pool.ParallelFor(50, /*parallel=*/false, [&](int64_t i, int32_t p) {
    ++hits[static_cast<size_t>(i)];
    if (p != 0 || std::this_thread::get_id() != caller) elsewhere = true;
  });
  EXPECT_FALSE(elsewhere);
  for (int h : hits) ASSERT_EQ(h, 1);
}

TEST(ThreadPoolTest, EveryIndexRunsExactlyOnceAcrossManyJobs) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4);
  for (int64_t n : {0, 1, 3, 4, 5, 97, 1000}) {
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<int> hits(static_cast<size_t>(n), 0);
      pool.ParallelForRange(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "n " << n << " i " << i;
    }
  }
}

TEST(ThreadPoolTest, RangeChunksAreContiguousNonEmptyAndAtMostOnePerParticipant) {
  for (int32_t threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 4, 5, 17, 1000}) {
      std::mutex mu;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      pool.ParallelForRange(n, [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        chunks.emplace_back(b, e);
      });
      std::sort(chunks.begin(), chunks.end());
      ASSERT_FALSE(chunks.empty());
      EXPECT_LE(static_cast<int64_t>(chunks.size()), std::min<int64_t>(n, threads)) << threads << " " << n;
      EXPECT_EQ(chunks.front().first, 0);
      EXPECT_EQ(chunks.back().second, n);
      for (size_t c = 0; c < chunks.size(); ++c) {
        EXPECT_LT(chunks[c].first, chunks[c].second);
        if (c > 0) {
          EXPECT_EQ(chunks[c].first, chunks[c - 1].second);
        }
        // Near-equal: no chunk longer than ceil(n / chunks) or shorter than floor.
        const int64_t len = chunks[c].second - chunks[c].first;
        const int64_t parts = static_cast<int64_t>(chunks.size());
        EXPECT_GE(len, n / parts);
        EXPECT_LE(len, (n + parts - 1) / parts);
      }
    }
  }
}

TEST(ThreadPoolTest, BothEntryPointsInterleaveOnOnePool) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 100; ++rep) {
    const int64_t n = 1 + rep * 7;
    std::vector<int> a(static_cast<size_t>(n), 0), b(static_cast<size_t>(n), 0);
    pool.ParallelFor(n, [&](int64_t i, int32_t) { ++a[static_cast<size_t>(i)]; });
    pool.ParallelForRange(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ++b[static_cast<size_t>(i)];
    });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(a[static_cast<size_t>(i)], 1);
      ASSERT_EQ(b[static_cast<size_t>(i)], 1);
    }
  }
}

TEST(ThreadPoolTest, NullPoolRangeRunsInlineAsOneChunk) {
  std::vector<std::pair<int64_t, int64_t>> calls;
  ParallelForRange(nullptr, 10, [&](int64_t b, int64_t e) { calls.emplace_back(b, e); });
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], std::make_pair(int64_t{0}, int64_t{10}));
  calls.clear();
  ParallelForRange(nullptr, 0, [&](int64_t b, int64_t e) { calls.emplace_back(b, e); });
  EXPECT_TRUE(calls.empty());

  ThreadPool pool(2);
  std::vector<int> hits(9, 0);
  ParallelForRange(&pool, 9, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
  });
  for (int h : hits) ASSERT_EQ(h, 1);
}

}  // namespace
}  // namespace argen::parallel
