// The CUDA backend's one KV ledger, on the host: its pool is a RangeAllocator
// in bytes and a row takes CudaRowLayout(...).total() of it (KV and policy
// state). Randomised admission/cancel sequences of CFG groups (2N rows of one
// prompt length and policy, as the engine places them): CanAllocate(size, 2N)
// says exactly whether the 2N allocations succeed (both ways: a "no" is
// checked on a copy), the bytes in use are exactly the placed rows' totals
// (what admission reserved), and placed ranges never overlap or leave the pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "engine/cuda/row_layout.h"
#include "engine/kv/range_allocator.h"
#include "engine/sparse/policy_params.h"

namespace argen::cuda {
namespace {

using kv::RangeAllocator;

model::StackConfig TinyStack() {
  model::StackConfig s;
  s.num_layers = 2;
  s.num_kv_heads = 2;
  s.head_dim = 16;
  return s;
}

TEST(CudaRowLayoutTest, KvThenAlignedPolicyStateDenseHasNone) {
  const model::StackConfig s = TinyStack();
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, 64);
  ASSERT_TRUE(dense.ok());
  const RowLayout d = CudaRowLayout(s, 10, *dense);
  EXPECT_EQ(d.kv_bytes, 2 * 2 * 2 * (10 + 64) * 16 * 2);  // K+V, layers, kv heads, positions, head_dim, bf16
  EXPECT_EQ(d.ints_bytes + d.floats_bytes, 0);
  sparse::PolicyParams h2o;
  h2o.kind = sparse::PolicyKind::kH2O;
  h2o.sparsity = 0.5;
  absl::StatusOr<sparse::ResolvedPolicy> p = sparse::ResolvePolicy(h2o, 64);
  ASSERT_TRUE(p.ok());
  const RowLayout l = CudaRowLayout(s, 10, *p);
  const sparse::PolicyLayout pl = sparse::LayoutFor(*p);
  EXPECT_GE(l.ints_bytes, 2 * 2 * pl.ints_per_head * 4);
  EXPECT_GE(l.floats_bytes, 2 * 2 * pl.floats_per_head * 4);
  for (int64_t part : {l.kv_bytes, l.ints_bytes, l.floats_bytes}) EXPECT_EQ(part % kPoolAlignment, 0);
}

TEST(CudaRowPoolLedgerTest, AdmissionPlacesExactlyWhatTheLedgerReserves) {
  const model::StackConfig s = TinyStack();
  std::vector<sparse::ResolvedPolicy> policies;
  for (auto [kind, sparsity] : {std::pair{sparse::PolicyKind::kDense, 0.0},
                                {sparse::PolicyKind::kDiagonal, 0.75},
                                {sparse::PolicyKind::kH2O, 0.5},
                                {sparse::PolicyKind::kSlidingWindow, 0.8},
                                {sparse::PolicyKind::kDiagonalSink4, 0.9}}) {
    sparse::PolicyParams params;
    params.kind = kind;
    params.sparsity = sparsity;
    absl::StatusOr<sparse::ResolvedPolicy> p = sparse::ResolvePolicy(params, 64);
    ASSERT_TRUE(p.ok()) << p.status();
    policies.push_back(*p);
    // The same policy with fp8 KV: smaller rows of another size in the same pool.
    params.kv_format = sparse::KvFormat::kFp8E4m3;
    absl::StatusOr<sparse::ResolvedPolicy> fp8 = sparse::ResolvePolicy(params, 64);
    ASSERT_TRUE(fp8.ok()) << fp8.status();
    EXPECT_LT(CudaRowLayout(s, 10, *fp8).total(), CudaRowLayout(s, 10, *p).total());
    policies.push_back(*fp8);
  }
  std::mt19937 rng(20241129);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t capacity = (int64_t{1} << 18) + 256 * static_cast<int64_t>(rng() % 512);
    RangeAllocator pool(capacity / kPoolAlignment * kPoolAlignment);
    struct Group {
      std::vector<int64_t> offsets;
      int64_t row_bytes;
    };
    std::vector<Group> live;
    int64_t reserved = 0;
    int admitted = 0, refused = 0;
    for (int op = 0; op < 400; ++op) {
      if (!live.empty() && rng() % 3 == 0) {  // a group finishes or is cancelled
        const size_t i = rng() % live.size();
        for (int64_t o : live[i].offsets) pool.Free(o);
        reserved -= live[i].row_bytes * static_cast<int64_t>(live[i].offsets.size());
        live.erase(live.begin() + static_cast<long>(i));
      } else {  // a request asks to be placed
        const int32_t prompt = 1 + static_cast<int32_t>(rng() % 40);
        const int32_t rows = 2 * (1 + static_cast<int32_t>(rng() % 3));
        const int64_t bytes = CudaRowLayout(s, prompt, policies[rng() % policies.size()]).total();
        const bool can = pool.CanAllocate(bytes, rows);
        RangeAllocator trial_pool = pool;  // what placing would do
        bool placed_all = true;
        std::vector<int64_t> offsets;
        for (int r = 0; r < rows; ++r) {
          absl::StatusOr<int64_t> at = trial_pool.Allocate(bytes, "KV pool");
          if (!at.ok()) {
            placed_all = false;
            break;
          }
          offsets.push_back(*at);
        }
        ASSERT_EQ(can, placed_all) << "the ledger and the placement disagree (" << rows << " x " << bytes << ")";
        if (can) {
          pool = trial_pool;
          live.push_back({offsets, bytes});
          reserved += bytes * rows;
          ++admitted;
        } else {
          ++refused;
        }
      }
      ASSERT_EQ(pool.in_use(), reserved);
      ASSERT_LE(pool.in_use(), pool.capacity());
      std::vector<std::pair<int64_t, int64_t>> ranges;
      for (const Group& g : live)
        for (int64_t o : g.offsets) ranges.push_back({o, o + g.row_bytes});
      std::sort(ranges.begin(), ranges.end());
      for (size_t i = 0; i < ranges.size(); ++i) {
        ASSERT_EQ(ranges[i].first % kPoolAlignment, 0);
        ASSERT_LE(ranges[i].second, pool.capacity());
        if (i > 0) {
          ASSERT_LE(ranges[i - 1].second, ranges[i].first) << "overlapping rows";
        }
      }
    }
    EXPECT_GT(admitted, 0);
    EXPECT_GT(refused, 0) << "the pool never filled: the test did not exercise refusals";
  }
}

}  // namespace
}  // namespace argen::cuda
