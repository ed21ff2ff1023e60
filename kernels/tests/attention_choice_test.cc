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

// The engine's split target: 2 blocks an SM, except for groups of 4+ query
// heads a KV head once their (token, kv head) pairs fill the multiprocessors
// (no split there); a key set past kMaxAttentionChunk still splits.
TEST(AttentionChoiceTest, GroupedLaunchesGoUnsplitOnceThePairsFillTheMultiprocessors) {
  const int sms = 132;
  int splits = 0, chunk = 0;
  // Emu3 720 px at 16 images, diagonal 95%: 32 rows x 8 KV heads = 256 pairs, 4 heads each, 459 keys.
  ChooseAttentionSplits(32, 8, 4, 459, sms, &splits, &chunk);
  EXPECT_EQ(splits, 1);
  EXPECT_GE(chunk, 459);
  ChooseAttentionSplits(32, 8, 4, 459, sms, &splits, &chunk, /*blocks_per_sm=*/2);  // the former target
  EXPECT_EQ(splits, 2);
  // Exactly one pair an SM: unsplit; NextStep-1's 5 heads a KV head too.
  ChooseAttentionSplits(33, 4, 4, 459, sms, &splits, &chunk);
  EXPECT_EQ(splits, 1);
  ChooseAttentionSplits(32, 8, 5, 459, sms, &splits, &chunk);
  EXPECT_EQ(splits, 1);
  // One head a KV head (7B at 4 images, 256 pairs, 626 keys): still 2 blocks an SM's worth.
  ChooseAttentionSplits(8, 32, 1, 626, sms, &splits, &chunk);
  EXPECT_EQ(splits, 2);
  // Fewer pairs than SMs: 2 blocks an SM's worth (Emu3 at 8 images: 128 pairs -> 3 splits of 160 keys).
  ChooseAttentionSplits(16, 8, 4, 459, sms, &splits, &chunk);
  EXPECT_EQ(splits, 3);
  EXPECT_EQ(chunk, 160);
  // Dense Emu3 at 16 images (8,243 keys): the chunk limit splits it all the same.
  ChooseAttentionSplits(32, 8, 4, 8243, sms, &splits, &chunk);
  EXPECT_EQ(splits, (8243 + kMaxAttentionChunk - 1) / kMaxAttentionChunk);
  EXPECT_LE(chunk, kMaxAttentionChunk);
}

// The two-pass kernel's 256-thread blocks: Emu3's 16-image sparse launch
// only among the measured shapes (unsplit, 4+ heads a KV head, head_dim 128,
// 256+ keys, at most 2 pairs an SM).
TEST(AttentionChoiceTest, WideTwoPassBlocksOnlyForFewLongGroupedPairs) {
  AttentionArgs a = Launch(32, 459, 132);  // 16 images x 2 rows
  a.heads = 32;
  a.kv_heads = 8;
  a.chunk = 480;
  EXPECT_EQ(TwoPassBlockThreads(a), 256);
  AttentionArgs nextstep = a;  // 40 / 8 heads at N_r 86: 101 keys
  nextstep.heads = 40;
  nextstep.chunk = 128;
  EXPECT_EQ(TwoPassBlockThreads(nextstep), 128);
  nextstep.chunk = 256;
  EXPECT_EQ(TwoPassBlockThreads(nextstep), 256);
  AttentionArgs split = a;
  split.splits = 2;
  EXPECT_EQ(TwoPassBlockThreads(split), 128);
  AttentionArgs many = a;  // 64 images: 1,024 pairs
  many.tokens = 128;
  EXPECT_EQ(TwoPassBlockThreads(many), 128);
  AttentionArgs two_sm = a;  // 264 pairs: 2 an SM exactly
  two_sm.tokens = 33;
  EXPECT_EQ(TwoPassBlockThreads(two_sm), 256);
  two_sm.tokens = 34;
  EXPECT_EQ(TwoPassBlockThreads(two_sm), 128);
  AttentionArgs mha = a;  // one head a KV head
  mha.heads = 8;
  EXPECT_EQ(TwoPassBlockThreads(mha), 128);
  AttentionArgs no_sms = a;  // sm_count unknown
  no_sms.sm_count = 0;
  EXPECT_EQ(TwoPassBlockThreads(no_sms), 128);
  AttentionArgs hd64 = a;
  hd64.head_dim = 64;
  EXPECT_EQ(TwoPassBlockThreads(hd64), 128);
}

}  // namespace
}  // namespace argen::kernels
