// Which decode-attention kernel a launch runs (host code only, no GPU needed):
// kAuto's rules for the warp kernel (short key sets and many (token, kv head)
// pairs per multiprocessor) and the one-pass kernel (few pairs, one head a KV
// head), explicit choices, and fp8's exclusion of the staged kernel.
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

TEST(AttentionChoiceTest, AutoTakesTheOnePassKernelForFewPairsOfOneHeadAKvHead) {
  const int sms = 132;
  // 7B (32 / 32 heads): one and eight images (64 and 512 pairs) take it, 16 images (1,024) do not.
  EXPECT_EQ(ChosenAttentionVariant(Launch(2, 29, sms)), AttentionVariant::kOnePass);
  EXPECT_EQ(ChosenAttentionVariant(Launch(16, 626, sms)), AttentionVariant::kOnePass);
  EXPECT_EQ(ChosenAttentionVariant(Launch(32, 79, sms)), AttentionVariant::kTwoPass);
  // The boundary: kOnePassAutoPairsPerSm pairs per SM (tokens of 32 kv heads).
  const int boundary = (kOnePassAutoPairsPerSm * sms + 31) / 32;
  EXPECT_EQ(ChosenAttentionVariant(Launch(boundary - 1, 79, sms)), AttentionVariant::kOnePass);
  EXPECT_EQ(ChosenAttentionVariant(Launch(boundary, 79, sms)), AttentionVariant::kTwoPass);
  // Split launches too (a lone image's dense keys).
  AttentionArgs split = Launch(2, 626, sms);
  split.splits = 3;
  EXPECT_EQ(ChosenAttentionVariant(split), AttentionVariant::kOnePass);
  // Not with several query heads a KV head (Emu3-Gen's 32 / 8), key limits, or no SM count.
  AttentionArgs grouped = Launch(2, 409, sms);
  grouped.kv_heads = 8;
  EXPECT_EQ(ChosenAttentionVariant(grouped), AttentionVariant::kTwoPass);
  AttentionArgs limited = Launch(2, 79, sms);
  const int32_t limit = 40;
  limited.key_limits = &limit;
  limited.key_limit_heads = 1;
  EXPECT_EQ(ChosenAttentionVariant(limited), AttentionVariant::kTwoPass);
  EXPECT_EQ(ChosenAttentionVariant(Launch(2, 79, 0)), AttentionVariant::kTwoPass);
}

TEST(AttentionChoiceTest, ExplicitChoicesAndFp8) {
  // Asked for, the one-pass kernel runs whatever the shape, format and key limits.
  AttentionArgs one_pass = Launch(2238, 79, 132, AttentionVariant::kOnePass);
  one_pass.kv_heads = 8;
  one_pass.kv_formats = kKvFormatsFp8;
  EXPECT_EQ(ChosenAttentionVariant(one_pass), AttentionVariant::kOnePass);
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
