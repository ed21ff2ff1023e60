// The published Anole-7b shape (argen_bench --model anole-512): Chameleon-7B's
// dims (GAIR-NLP/anole's 7b settings, transformers' ChameleonConfig defaults)
// through the family's own params reader and tensor map, and Anole's grid.
#include "engine/families/anole/anole_shapes.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace argen::anole {
namespace {

TEST(AnoleShapesTest, PublishedAnole7BIsChameleon7BOnAnolesGrid) {
  absl::StatusOr<PublishedAnole> p = PublishedAnole7B();
  ASSERT_TRUE(p.ok()) << p.status();
  const model::StackConfig& s = p->spec.stack;
  EXPECT_EQ(s.hidden_size, 4096);
  EXPECT_EQ(s.num_layers, 32);
  EXPECT_EQ(s.num_heads, 32);
  EXPECT_EQ(s.num_kv_heads, 32);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.intermediate_size, 11008);
  EXPECT_TRUE(s.qk_norm);
  EXPECT_FALSE(s.swin_norm);
  EXPECT_FLOAT_EQ(s.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(s.rope_theta, 10000.0f);
  EXPECT_EQ(p->config.vocab_size, 65536);
  EXPECT_EQ(p->config.max_position_embeddings, 4096);
  // The image codes: ids 4..8195, the head's rows over them.
  EXPECT_EQ(p->spec.input.sampled_offset, 4);
  EXPECT_EQ(p->spec.logits(), 8192);
  ASSERT_FALSE(p->spec.input.table.shape.empty());
  EXPECT_EQ(p->spec.input.table.shape[0], 65536);
  EXPECT_EQ(p->spec.layers.size(), 32u);
  // Meta's one [head_dim] vector per layer, used by every head.
  EXPECT_EQ(p->spec.layers[0].q_norm.weight.shape, (std::vector<int64_t>{1, 128}));
  EXPECT_EQ(p->spec.layers[0].q_norm.weight.used_rows(), 32);
  EXPECT_EQ(p->grid.width, 32);
  EXPECT_EQ(p->grid.row_break_tokens, 0);
  EXPECT_EQ(p->grid.l_dec, 1024);
  EXPECT_EQ(p->grid.default_n_recent, 86);  // 2 2/3 rows of 32, rounded up
  EXPECT_EQ(kPublishedUncondTokens, 2);
}

}  // namespace
}  // namespace argen::anole
