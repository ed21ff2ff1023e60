// The KV manager (engine/kv/kv_manager.h) with the CUDA device's row sizes
// (CudaRowSizer: host arithmetic) in a pool of byte ranges placed first fit,
// as CudaBackend::Pool gives it: randomised admission / cancel / sharing
// sequences never place what CanPlace did not admit, never overlap or leave
// the pool, and free everything.
#include <gtest/gtest.h>

#include "engine/cuda/row_layout.h"
#include "engine/kv/tests/kv_manager_walk.h"

namespace argen::cuda {
namespace {

TEST(KvManagerCudaSizerTest, RandomAdmissionCancelSharingInTheDevicePool) {
  model::StackConfig stack;
  stack.num_layers = 2;
  stack.num_kv_heads = 2;
  stack.head_dim = 16;
  stack.hidden_size = 64;
  const CudaRowSizer sizer(stack);
  const sparse::ResolvedPolicy dense = kv::testing::WalkPolicy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto);
  // Room for about a dozen dense images of 8-token prompts, 256-byte aligned (kPoolAlignment).
  const int64_t pool = 12 * 2 * sizer.RowBytes(8, dense) / kPoolAlignment * kPoolAlignment;
  for (uint32_t seed : {11u, 12u}) {
    SCOPED_TRACE(seed);
    kv::testing::FakeDevice device(sizer, {pool, true, 64, 16384});
    kv::testing::WalkCounts counts;
    {
      kv::KvManager kv(device);
      ASSERT_NO_FATAL_FAILURE(kv::testing::RandomRequestWalk(kv, device, pool, 600, seed, &counts));
    }
    EXPECT_GT(counts.added, 50);
    EXPECT_GT(counts.refused, 10) << "the walk never filled the pool";
    EXPECT_GT(counts.cancelled, 50);
    EXPECT_GT(counts.shared_prompts_found, 0);
  }
}

// A vector model's rows also hold the token vectors their pair drew
// ([l_dec][token_dim] f32, aligned, after the other parts); prompt rows draw
// none, and a code model's rows are unchanged.
TEST(KvManagerCudaSizerTest, AVectorModelsRowsHoldTheirDrawnVectors) {
  model::StackConfig stack;
  stack.num_layers = 2;
  stack.num_kv_heads = 2;
  stack.head_dim = 16;
  stack.hidden_size = 64;
  constexpr int32_t kTokenDim = 16;
  for (sparse::PolicyKind kind : {sparse::PolicyKind::kDense, sparse::PolicyKind::kDiagonal}) {
    const sparse::ResolvedPolicy policy =
        kv::testing::WalkPolicy(kind, kind == sparse::PolicyKind::kDense ? 0.0 : 0.75, sparse::KvFormat::kAuto);
    ASSERT_GT(policy.l_dec, 0);
    const RowLayout code = CudaRowLayout(stack, 8, policy), vector = CudaRowLayout(stack, 8, policy, kTokenDim);
    const int64_t drawn =
        (int64_t{policy.l_dec} * kTokenDim * 4 + kPoolAlignment - 1) / kPoolAlignment * kPoolAlignment;
    EXPECT_EQ(code.vectors_bytes, 0);
    EXPECT_EQ(vector.vectors_bytes, drawn);
    EXPECT_EQ(vector.total(), code.total() + drawn);
    const CudaRowSizer code_sizer(stack), vector_sizer(stack, kTokenDim);
    EXPECT_EQ(vector_sizer.RowBytes(8, policy), code_sizer.RowBytes(8, policy) + drawn);
    EXPECT_EQ(vector_sizer.SharingRowBytes(8, policy), code_sizer.SharingRowBytes(8, policy) + drawn);
    EXPECT_EQ(vector_sizer.PromptRowBytes(8, policy.kv_format), code_sizer.PromptRowBytes(8, policy.kv_format));
  }
}

}  // namespace
}  // namespace argen::cuda
