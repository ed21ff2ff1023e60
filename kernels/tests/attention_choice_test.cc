// Which decode-attention kernel a launch runs (host code only, no GPU needed):
// kAuto's rule for the warp kernel (short key sets and many (token, kv head)
// pairs per multiprocessor), explicit choices, and fp8's exclusion of the
// staged kernel.
#include <gtest/gtest.h>

#include "kernels/attention.h"

namespace argen::kernels {
namespace {

AttentionArgs Launch(int tokens, int max_keys, int sm_count, AttentionVariant variant = AttentionVariant::kAuto) {
  AttentionArgs a;
  a.tokens = tokens;
  a.heads = 32;
  a.kv_heads = 32;
  a.head_dim = 128;
  a.splits = 1;
  a.chunk = (max_keys + 31) / 32 * 32;
  a.max_keys = max_keys;
  a.sm_count = sm_count;
  a.variant = variant;
  return a;
}

TEST(AttentionChoiceTest, AutoTakesTheWarpKernelForShortKeySetsWithManyPairsOnly) {
  const int sms = 132;  // H200
  // 7B diagonal 95% N_r 64 (79 keys): 1,119 and 64 images take it, 16 images do not.
  EXPECT_EQ(ChosenAttentionVariant(Launch(2238, 79, sms)), AttentionVariant::kWarp);
  EXPECT_EQ(ChosenAttentionVariant(Launch(128, 79, sms)), AttentionVariant::kWarp);
  EXPECT_EQ(ChosenAttentionVariant(Launch(32, 79, sms)), AttentionVariant::kTwoPass);
  // The boundary: kWarpAutoPairsPerSm pairs per SM.
  const int boundary = kWarpAutoPairsPerSm * sms / 32;  // tokens of 32 kv heads
  EXPECT_EQ(ChosenAttentionVariant(Launch(boundary, 79, sms)), AttentionVariant::kWarp);
  EXPECT_EQ(ChosenAttentionVariant(Launch(boundary - 1, 79, sms)), AttentionVariant::kTwoPass);
  // Dense's 626 keys stay on the two-pass kernel; so does any launch without sm_count or with splits.
  EXPECT_EQ(ChosenAttentionVariant(Launch(128, 626, sms)), AttentionVariant::kTwoPass);
  EXPECT_EQ(ChosenAttentionVariant(Launch(2238, 79, 0)), AttentionVariant::kTwoPass);
  AttentionArgs split = Launch(2238, 79, sms);
  split.splits = 2;
  EXPECT_EQ(ChosenAttentionVariant(split), AttentionVariant::kTwoPass);
}

TEST(AttentionChoiceTest, ExplicitChoicesAndFp8) {
  // Asked for, the warp kernel runs whatever the pairs, up to 1024 keys.
  EXPECT_EQ(ChosenAttentionVariant(Launch(2, 1000, 132, AttentionVariant::kWarp)), AttentionVariant::kWarp);
  EXPECT_EQ(ChosenAttentionVariant(Launch(2, 1100, 132, AttentionVariant::kWarp)), AttentionVariant::kTwoPass);
  EXPECT_EQ(ChosenAttentionVariant(Launch(2238, 79, 132, AttentionVariant::kTwoPass)), AttentionVariant::kTwoPass);
  EXPECT_EQ(ChosenAttentionVariant(Launch(4, 79, 132, AttentionVariant::kStaged)), AttentionVariant::kStaged);
  AttentionArgs fp8 = Launch(4, 79, 132, AttentionVariant::kStaged);
  fp8.kv_formats = kKvFormatsFp8;
  EXPECT_EQ(ChosenAttentionVariant(fp8), AttentionVariant::kTwoPass);  // the staged kernel reads bf16 only
  fp8.variant = AttentionVariant::kWarp;
  EXPECT_EQ(ChosenAttentionVariant(fp8), AttentionVariant::kWarp);
}

}  // namespace
}  // namespace argen::kernels
