// The KV / policy-state pool allocator: first fit, exhaustion reported, frees coalesce.
// Host-only (no GPU needed), so it runs in CI.
#include "engine/kv/range_allocator.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace argen::kv {
namespace {

TEST(RangeAllocatorTest, FirstFitAndExhaustion) {
  RangeAllocator a(100);
  auto x = a.Allocate(40, "pool");
  auto y = a.Allocate(40, "pool");
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(*x, 0);
  EXPECT_EQ(*y, 40);
  EXPECT_EQ(a.in_use(), 80);
  auto z = a.Allocate(30, "KV pool");
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(z.status().message().find("KV pool"), absl::string_view::npos);
  a.Free(*x);
  auto w = a.Allocate(30, "pool");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, 0);  // the first hole that fits
  a.Free(12345);     // unknown: ignored
  EXPECT_EQ(a.in_use(), 70);
}

TEST(RangeAllocatorTest, FreesCoalesceBackToOneRange) {
  RangeAllocator a(1000);
  std::mt19937 rng(4);
  std::vector<int64_t> live;
  for (int round = 0; round < 200; ++round) {
    if (!live.empty() && (rng() % 3 == 0 || live.size() > 20)) {
      const size_t i = rng() % live.size();
      a.Free(live[i]);
      live.erase(live.begin() + i);
    } else if (auto r = a.Allocate(1 + rng() % 60, "pool"); r.ok()) {
      live.push_back(*r);
    }
  }
  for (int64_t off : live) a.Free(off);
  EXPECT_EQ(a.in_use(), 0);
  auto all = a.Allocate(1000, "pool");  // only possible if every hole merged again
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, 0);
}

}  // namespace
}  // namespace argen::kv

namespace argen::kv {
namespace {

// Mixed sizes (a CFG pair whose rows differ in length): CanAllocateSequence
// answers exactly what the same Allocate calls do, on random fragmented pools.
TEST(RangeAllocatorTest, CanAllocateSequenceIsExactForMixedSizes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    RangeAllocator a(1000);
    std::vector<int64_t> held;
    for (int i = 0; i < 12; ++i) {
      auto r = a.Allocate(1 + static_cast<int64_t>(rng() % 90), "pool");
      if (r.ok()) held.push_back(*r);
    }
    for (size_t i = 0; i < held.size(); i += 2) a.Free(held[i]);  // holes
    std::vector<int64_t> sizes;
    const int pairs = 1 + static_cast<int>(rng() % 6);
    const int64_t big = 20 + static_cast<int64_t>(rng() % 80), small = 1 + static_cast<int64_t>(rng() % 20);
    for (int p = 0; p < pairs; ++p) {
      sizes.push_back(big);
      sizes.push_back(small);
    }
    const bool predicted = a.CanAllocateSequence(sizes);
    bool placed = true;
    for (int64_t s : sizes) placed = placed && a.Allocate(s, "pool").ok();
    EXPECT_EQ(predicted, placed) << "trial " << trial;
  }
}

}  // namespace
}  // namespace argen::kv
