// The CUDA backend's memory split (engine/cuda/pool_sizing.h), host arithmetic
// on the published Janus-Pro-7B shape: auto rows and budget fill the free
// memory exactly up to the safety margin, a configured value is kept, the
// figures are those of the reference row, and what cannot fit is an error
// naming the setting.
#include "engine/cuda/pool_sizing.h"

#include <gtest/gtest.h>

#include "engine/cuda/row_layout.h"
#include "engine/families/janus/janus_shapes.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/families/lumina/lumina_shapes.h"
#include "engine/sparse/policy_params.h"

namespace argen::cuda {
namespace {

constexpr int64_t kGB = 1000 * 1000 * 1000;

model::ModelSpec Spec7B() {
  absl::StatusOr<model::ModelSpec> spec = janus::JanusSpec(janus::PublishedJanusConfig("7b").value());
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

PoolSizingInput H200(const model::ModelSpec& spec) {
  PoolSizingInput in;
  in.total_bytes = 150 * kGB;
  in.free_bytes = 128 * kGB;  // after 14.8 GB of 7B weights and the VQ decoder
  in.plan_stride = 576;
  in.max_prompt_tokens = 1024;
  in.sm_count = 132;
  in.reference_row_bytes = ReferenceRowBytes(spec.stack, 576).value();
  return in;
}

TEST(PoolSizingTest, ReferenceRowIsDiagonal95WithRecentWindow64) {
  const model::ModelSpec spec = Spec7B();
  sparse::PolicyParams p;
  p.kind = sparse::PolicyKind::kDiagonal;
  p.sparsity = 0.95;
  p.n_recent = 64;
  const int64_t want = CudaRowLayout(spec.stack, 50, sparse::ResolvePolicy(p, 576).value()).total();
  EXPECT_EQ(ReferenceRowBytes(spec.stack, 576).value(), want);
  // 7B: K+V of 30 layers x 32 heads x 128 x bf16 = 0.49 MB a position; 50 + N_r + N_att positions.
  EXPECT_GT(want, 60 * 491520);
  EXPECT_LT(want, 200 * 491520);
  EXPECT_FALSE(ReferenceRowBytes(spec.stack, 0).ok());
  // A server whose default kv_cache_dtype is fp8 sizes rows for fp8 rows:
  // codes plus one fp32 scale per 128-dim vector, (128 + 4) / 256 of bf16's bytes.
  p.kv_format = sparse::KvFormat::kFp8E4m3;
  const int64_t fp8 = CudaRowLayout(spec.stack, 50, sparse::ResolvePolicy(p, 576).value()).total();
  EXPECT_EQ(ReferenceRowBytes(spec.stack, 576, sparse::KvFormat::kFp8E4m3).value(), fp8);
  const int64_t kv_positions = int64_t{2} * 30 * 32 * (50 + 64) * 128;  // K and V elements of the region
  EXPECT_EQ(CudaRowLayout(spec.stack, 50, sparse::ResolvePolicy(p, 576).value()).kv_bytes,
            (kv_positions * 132 / 128 + 255) / 256 * 256);
  EXPECT_NEAR(static_cast<double>(fp8) / want, 0.52, 0.02);
}

// Sharing across requests: a pair's rows are decode slots, its caption a
// prompt row, its guidance prompt one row for every image; auto rows are
// sized for the mean row of that pair (7B: 114 -> 89 positions a row).
TEST(PoolSizingTest, ReferenceRowWithTheGuidancePromptShared) {
  const model::ModelSpec spec = Spec7B();
  sparse::PolicyParams p;
  p.kind = sparse::PolicyKind::kDiagonal;
  p.sparsity = 0.95;
  p.n_recent = 64;
  const sparse::ResolvedPolicy policy = sparse::ResolvePolicy(p, 576).value();
  const int64_t shared = ReferenceRowBytes(spec.stack, 576, sparse::KvFormat::kAuto, true).value();
  EXPECT_EQ(shared, CudaRowLayout(spec.stack, 0, policy).total() +
                        CudaPromptRowLayout(spec.stack, 50, sparse::KvFormat::kAuto).total() / 2);
  const int64_t own = ReferenceRowBytes(spec.stack, 576).value();
  EXPECT_NEAR(static_cast<double>(shared) / own, 89.0 / 114.0, 0.02);
}

// A long decode (Lumina-mGPT-7B at 768 px, L_dec 2351) attends N_att = 118 keys at
// 95%, more than the 64-slot window, so the reference widens the window to N_att
// instead of falling back to a dense row (which capped auto rows at 102 on the H200).
TEST(PoolSizingTest, LongDecodesSizeRowsForTheSmallestSparseRowNotADenseOne) {
  absl::StatusOr<lumina::PublishedLumina> lumina = lumina::PublishedLumina7B(768);
  ASSERT_TRUE(lumina.ok()) << lumina.status();
  const model::ModelSpec& spec = lumina->spec;
  const int32_t l_dec = lumina->schedule.l_dec;
  ASSERT_EQ(l_dec, 2351);
  sparse::PolicyParams p;
  p.kind = sparse::PolicyKind::kDiagonal;
  p.sparsity = 0.95;
  p.n_recent = 118;  // lround(0.05 * 2351)
  const sparse::ResolvedPolicy want = sparse::ResolvePolicy(p, l_dec).value();
  EXPECT_EQ(want.n_att, 118);
  const int64_t row = ReferenceRowBytes(spec.stack, l_dec).value();
  EXPECT_EQ(row, CudaRowLayout(spec.stack, 50, want).total());
  const int64_t dense =
      CudaRowLayout(spec.stack, 50, sparse::ResolvePolicy(sparse::PolicyParams{}, l_dec).value()).total();
  EXPECT_LT(row * 10, dense);
  // The H200 after 14 GB of weights: rows in the thousands, no longer ~100.
  PoolSizingInput in;
  in.total_bytes = 150 * kGB;
  in.free_bytes = 130 * kGB;
  in.plan_stride = l_dec;
  in.max_prompt_tokens = 1024;
  in.sm_count = 132;
  in.reference_row_bytes = row;
  absl::StatusOr<PoolSizing> s = SizePool(spec, in);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(s->max_batch_rows, 1000);
  EXPECT_LE(WorkspaceBytes(spec, s->max_batch_rows, l_dec, 1024, 132) + s->max_batch_rows * row,
            in.free_bytes - s->margin_bytes);
}

TEST(PoolSizingTest, AutoRowsAndBudgetFillTheFreeMemoryUpToTheMargin) {
  const model::ModelSpec spec = Spec7B();
  const PoolSizingInput in = H200(spec);
  absl::StatusOr<PoolSizing> s = SizePool(spec, in);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->auto_rows);
  EXPECT_TRUE(s->auto_budget);
  EXPECT_EQ(s->margin_bytes, SafetyMargin(in.total_bytes));
  EXPECT_EQ(s->margin_bytes, 150 * kGB * 3 / 100);  // 3% of the card beats 2 GiB here
  EXPECT_EQ(s->max_batch_rows % 2, 0);
  // Beyond the old 2,048-row cap where memory allows (diagonal 95%, N_r 64: ~56 MB a row).
  EXPECT_GT(s->max_batch_rows, 2048);
  EXPECT_EQ(s->workspace_bytes, WorkspaceBytes(spec, s->max_batch_rows, 576, 1024, 132));
  // Everything free is either workspace, pool or margin (the pool rounded to 256 bytes).
  const int64_t used = s->workspace_bytes + s->kv_budget_bytes + s->margin_bytes;
  EXPECT_LE(used, in.free_bytes);
  EXPECT_GT(used, in.free_bytes - 256);
  // The rows are the most that fit: their reference KV beside their workspaces, and not one pair more.
  const int64_t usable = in.free_bytes - s->margin_bytes;
  const int32_t r = s->max_batch_rows;
  EXPECT_LE(WorkspaceBytes(spec, r, 576, 1024, 132) + r * in.reference_row_bytes, usable);
  EXPECT_GT(WorkspaceBytes(spec, r + 2, 576, 1024, 132) + (r + 2) * in.reference_row_bytes, usable);
  EXPECT_NE(s->Describe(in.free_bytes, in.total_bytes).find("max_batch_rows " + std::to_string(r) + " (auto)"),
            std::string::npos);
}

TEST(PoolSizingTest, ConfiguredValuesAreKept) {
  const model::ModelSpec spec = Spec7B();
  PoolSizingInput in = H200(spec);
  in.max_batch_rows = 512;
  absl::StatusOr<PoolSizing> s = SizePool(spec, in);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->max_batch_rows, 512);
  EXPECT_FALSE(s->auto_rows);
  EXPECT_EQ(s->kv_budget_bytes,
            (in.free_bytes - s->margin_bytes - WorkspaceBytes(spec, 512, 576, 1024, 132)) / 256 * 256);
  // A configured budget with auto rows: rows up to what that budget holds at the reference row.
  in.max_batch_rows = 0;
  in.kv_budget_bytes = 10 * kGB;
  s = SizePool(spec, in);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kv_budget_bytes, 10 * kGB / 256 * 256);
  EXPECT_EQ(s->max_batch_rows, 2 * (10 * kGB / (2 * in.reference_row_bytes)));
}

TEST(PoolSizingTest, WorkspacesGrowWithRowsAndPlanStride) {
  const model::ModelSpec spec = Spec7B();
  const int64_t a = WorkspaceBytes(spec, 1024, 576, 1024, 132), b = WorkspaceBytes(spec, 2048, 576, 1024, 132);
  EXPECT_GT(b, a);
  EXPECT_GT(WorkspaceBytes(spec, 1024, 576, 1024, 132), WorkspaceBytes(spec, 1024, 64, 1024, 132));
  // Per row at 7B: activations (~0.3 MB) + logits (64 KB) + plans for 576 keys (~2.3 MB).
  EXPECT_GT((b - a) / 1024, 1000000);
  EXPECT_LT((b - a) / 1024, 6000000);
}

TEST(PoolSizingTest, TooLittleMemoryIsAnErrorNamingTheSetting) {
  const model::ModelSpec spec = Spec7B();
  PoolSizingInput in = H200(spec);
  in.free_bytes = 3 * kGB;  // under the margin plus one pair
  absl::StatusOr<PoolSizing> s = SizePool(spec, in);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("max_batch_rows auto"), std::string::npos) << s.status();
  in.max_batch_rows = 16384;  // workspaces alone over what is free
  in.free_bytes = 40 * kGB;
  s = SizePool(spec, in);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("kv_budget_bytes auto"), std::string::npos) << s.status();
}

}  // namespace
}  // namespace argen::cuda
