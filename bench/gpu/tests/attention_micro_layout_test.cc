// The attention micro-benchmark's layout (attention_micro_layout.h) on the
// CPU: an MHA model's byte count is the one the micro has always printed;
// a grouped-query model's K and V, slot lists and counts are per KV head
// (NextStep-1-14B: 40 query heads over 8 KV heads, at the family's N_r), so
// its bytes are the MHA formula's at kv_heads; bad shapes are named.
#include "bench/gpu/attention_micro_layout.h"

#include <string>

#include "bench/gpu/janus_shapes.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"

namespace argen::bench {
namespace {

AttentionMicroShape ShapeOf(const BenchModel& m, int32_t images, int32_t n_att, int32_t n_slots) {
  AttentionMicroShape s;
  s.rows = 2 * images;
  s.heads = m.spec.stack.num_heads;
  s.kv_heads = m.spec.stack.num_kv_heads;
  s.head_dim = m.spec.stack.head_dim;
  s.prompt_len = 50;
  s.l_dec = m.grid.l_dec;
  s.n_att = n_att;
  s.n_slots = n_slots;
  return s;
}

TEST(AttentionMicroLayoutTest, AnMhaModelsBytesAreTheFormulaThatWasAlwaysPrinted) {
  absl::StatusOr<BenchModel> m = BenchModelFor("7b");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->spec.stack.num_heads, m->spec.stack.num_kv_heads);
  const AttentionMicroShape s = ShapeOf(*m, 64, 29, 64);
  absl::StatusOr<AttentionMicroLayout> dense = LayOutAttentionMicro(s, false);
  absl::StatusOr<AttentionMicroLayout> sparse = LayOutAttentionMicro(s, true);
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  // 128 rows x 32 heads: K and V of 626 (dense) or 79 (sparse) keys of 128 bf16; sparse also reads its
  // lists and writes its probabilities (4 bytes an entry each).
  EXPECT_EQ(dense->keys, 50 + 576);
  EXPECT_DOUBLE_EQ(dense->bytes, 128.0 * 32 * 626 * 128 * 2 * 2);
  EXPECT_EQ(sparse->keys, 50 + 29);
  EXPECT_DOUBLE_EQ(sparse->bytes, 128.0 * 32 * 79 * 128 * 2 * 2 + 128.0 * 32 * 29 * 4 * 2);
  EXPECT_EQ(dense->capacity, 626);
  EXPECT_EQ(sparse->capacity, 50 + 64);
  EXPECT_EQ(sparse->region, 2LL * 4 * 32 * 114 * 128);
  EXPECT_EQ(sparse->stride, 29);
  EXPECT_EQ(sparse->lists_per_layer, 128 * 32);
}

TEST(AttentionMicroLayoutTest, NextStepsKvListsAndBytesArePerKvHead) {
  absl::StatusOr<BenchModel> m = BenchModelFor("nextstep-14b");
  ASSERT_TRUE(m.ok()) << m.status();
  // --policies diagonal:0.95: n_att 5% of the 1,024 tokens, N_r the family's 86 (2 2/3 rows of 32).
  sparse::PolicyParams params;
  params.kind = sparse::PolicyKind::kDiagonal;
  params.sparsity = 0.95;
  absl::StatusOr<sparse::ResolvedPolicy> p = sparse::ResolvePolicy(params, m->grid);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->n_att, 51);
  EXPECT_EQ(p->n_slots, 86);
  const AttentionMicroShape s = ShapeOf(*m, 64, p->n_att, p->n_slots);
  ASSERT_EQ(s.heads, 40);
  ASSERT_EQ(s.kv_heads, 8);
  absl::StatusOr<AttentionMicroLayout> dense = LayOutAttentionMicro(s, false);
  absl::StatusOr<AttentionMicroLayout> sparse = LayOutAttentionMicro(s, true);
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_EQ(dense->keys, 50 + 1024);
  EXPECT_DOUBLE_EQ(dense->bytes, 128.0 * 8 * 1074 * 128 * 2 * 2);  // not 40 heads' worth
  EXPECT_DOUBLE_EQ(sparse->bytes, 128.0 * 8 * 101 * 128 * 2 * 2 + 128.0 * 8 * 51 * 4 * 2);
  EXPECT_EQ(dense->region, 2LL * 4 * 8 * 1074 * 128);
  EXPECT_EQ(sparse->lists_per_layer, 128 * 8);
  EXPECT_EQ(sparse->stride, 51);
  // The same shape as an MHA model of 8 heads moves the same bytes: the query group adds none.
  AttentionMicroShape mha = s;
  mha.heads = 8;
  EXPECT_DOUBLE_EQ(LayOutAttentionMicro(mha, false)->bytes, dense->bytes);
}

TEST(AttentionMicroLayoutTest, ABadShapeIsNamed) {
  absl::StatusOr<BenchModel> m = BenchModelFor("nextstep-14b");
  ASSERT_TRUE(m.ok()) << m.status();
  AttentionMicroShape s = ShapeOf(*m, 1, 51, 86);
  s.kv_heads = 6;
  absl::StatusOr<AttentionMicroLayout> l = LayOutAttentionMicro(s, false);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("heads (40) is not a multiple of kv_heads (6)"), std::string::npos) << l.status();
  s.kv_heads = 0;
  EXPECT_NE(LayOutAttentionMicro(s, false).status().message().find("kv_heads is 0"), std::string::npos);
  s = ShapeOf(*m, 1, 90, 86);
  EXPECT_TRUE(LayOutAttentionMicro(s, false).ok());  // dense reads no lists
  l = LayOutAttentionMicro(s, true);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("n_att (90) must be in [1, n_slots (86)]"), std::string::npos) << l.status();
}

}  // namespace
}  // namespace argen::bench
