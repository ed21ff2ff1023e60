// Characterization statistics on synthetic attention patterns with known answers.
#include <cmath>
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "tools/characterize/attention_map.h"
#include "tools/characterize/attention_stats.h"

namespace argen::characterize {
namespace {

// A lag profile like an image model's: the previous token and the token one
// grid row above (lags 23-25 on a 24-wide grid) get most weight. Not an
// exponential (an exponential in the lag is also shift-proportional, which
// would make the vertical similarity 1 too).
double LagProfile(int32_t lag) {
  switch (lag) {
    case 0:
      return 3.0;
    case 1:
      return 1.5;
    case 23:
    case 25:
      return 0.8;
    case 24:
      return 2.0;
    default:
      return 0.05 / (1 + lag);
  }
}

// Feeds `queries` rows; weight(t, key) gives the raw weight of key index
// `key` (0..lp-1 prompt, lp + k decode position k) for query t; rows are
// normalized to sum 1 as softmax weights do.
void Feed(HeadStats& stats, int32_t lp, int32_t queries, const std::function<double(int32_t, int32_t)>& weight) {
  for (int32_t t = 0; t < queries; ++t) {
    std::vector<float> row(lp + t + 1);
    double sum = 0;
    for (int32_t k = 0; k < lp + t + 1; ++k) sum += weight(t, k);
    for (int32_t k = 0; k < lp + t + 1; ++k) row[k] = static_cast<float>(weight(t, k) / sum);
    ASSERT_TRUE(stats.AddQuery(row).ok());
  }
}

TEST(AttentionStats, PureDiagonalPatternHasDiagonalSimilarityOne) {
  // Weight depends only on the lag t - k: the image-model stripe pattern.
  const int32_t lp = 6, T = 80;
  StatsOptions o{.prompt_len = lp, .max_queries = T, .max_distance = 16};
  HeadStats stats(o);
  Feed(stats, lp, T, [&](int32_t t, int32_t key) {
    if (key < lp) return 0.0;
    return LagProfile(t - (key - lp));
  });
  for (int32_t d = 1; d <= 16; ++d) {
    const SimilarityAt s = stats.Similarity(d);
    EXPECT_EQ(s.pairs, T - d);
    EXPECT_NEAR(s.diagonal, 1.0, 1e-6) << "d=" << d;
    EXPECT_LT(s.vertical, s.diagonal - 0.05) << "d=" << d;
  }
}

TEST(AttentionStats, PureVerticalPatternHasVerticalSimilarityOne) {
  // Weight depends only on the key: the LLM heavy-hitter pattern.
  const int32_t lp = 4, T = 60;
  HeadStats stats(StatsOptions{.prompt_len = lp, .max_queries = T, .max_distance = 8});
  Feed(stats, lp, T, [&](int32_t t, int32_t key) {
    if (key < lp) return 0.0;
    const int32_t k = key - lp;
    return (k == 0 || k == 3 || k == 11 || k == 12 || k == 30) ? 5.0 : 0.2;
  });
  for (int32_t d = 1; d <= 8; ++d) {
    const SimilarityAt s = stats.Similarity(d);
    EXPECT_NEAR(s.vertical, 1.0, 1e-6) << "d=" << d;
    EXPECT_LT(s.diagonal, s.vertical - 0.05) << "d=" << d;
  }
  EXPECT_TRUE(std::isnan(stats.Similarity(9).vertical));  // beyond max_distance
}

TEST(AttentionStats, SequenceKeySpaceIncludesThePrompt) {
  // Lag-only weights over the whole sequence: diagonal 1 in sequence space.
  const int32_t lp = 10, T = 40;
  HeadStats stats(
      StatsOptions{.prompt_len = lp, .max_queries = T, .max_distance = 5, .similarity_keys = KeySpace::kSequence});
  Feed(stats, lp, T, [&](int32_t t, int32_t key) { return LagProfile(lp + t - key); });
  for (int32_t d = 1; d <= 5; ++d) {
    EXPECT_NEAR(stats.Similarity(d).diagonal, 1.0, 1e-6);
    EXPECT_LT(stats.Similarity(d).vertical, 0.99);
  }
}

TEST(AttentionStats, MassOnPromptLocalMiddle) {
  // Uniform over decode keys, nothing on the prompt, 10 queries: local is the
  // newest key only (ceil(0.1 x (t+1)) = 1 for t < 10), so the mean local mass
  // is H_10 / 10.
  {
    HeadStats stats(StatsOptions{.prompt_len = 3, .max_queries = 10});
    Feed(stats, 3, 10, [](int32_t, int32_t key) { return key < 3 ? 0.0 : 1.0; });
    const MassSummary m = stats.Mass();
    const double h10 = 1 + 1 / 2. + 1 / 3. + 1 / 4. + 1 / 5. + 1 / 6. + 1 / 7. + 1 / 8. + 1 / 9. + 1 / 10.;
    EXPECT_EQ(m.queries, 10);
    EXPECT_NEAR(m.prompt, 0.0, 1e-9);
    EXPECT_NEAR(m.local, h10 / 10, 1e-6);
    EXPECT_NEAR(m.middle, 1 - h10 / 10, 1e-6);
  }
  // Half on the prompt, half on the newest key: 0.5 / 0.5 / 0.
  {
    HeadStats stats(StatsOptions{.prompt_len = 5, .max_queries = 30});
    Feed(stats, 5, 30, [](int32_t t, int32_t key) {
      if (key < 5) return 0.1;
      return key - 5 == t ? 0.5 : 0.0;
    });
    const MassSummary m = stats.Mass();
    EXPECT_NEAR(m.prompt, 0.5, 1e-6);
    EXPECT_NEAR(m.local, 0.5, 1e-6);
    EXPECT_NEAR(m.middle, 0.0, 1e-6);
  }
  // At t = 19 the local set is the newest ceil(2.0) = 2 keys: weight on lag 1
  // is local there, weight on lag 2 is middle.
  {
    HeadStats stats(StatsOptions{.prompt_len = 0, .max_queries = 20});
    Feed(stats, 0, 20, [](int32_t t, int32_t key) { return (t == 19 ? key == 18 : key == t) ? 1.0 : 0.0; });
    EXPECT_NEAR(stats.Mass().local, 1.0, 1e-6);
    HeadStats stats2(StatsOptions{.prompt_len = 0, .max_queries = 20});
    Feed(stats2, 0, 20, [](int32_t t, int32_t key) { return (t == 19 ? key == 17 : key == t) ? 1.0 : 0.0; });
    EXPECT_NEAR(stats2.Mass().middle, 1.0 / 20, 1e-6);
  }
}

TEST(AttentionStats, LocalityScoreWindowBoundary) {
  const int32_t w = 8, lp = 0, T = 50;
  // All weight (before the query) on lag w: inside the window -> s = 0.
  // On lag w + 1: outside -> s = 1. Queries with no key that far are skipped
  // (their mass before the query is zero).
  for (int32_t lag : {1, w, w + 1, 20}) {
    HeadStats stats(StatsOptions{.prompt_len = lp, .max_queries = T, .locality_window = w});
    Feed(stats, lp, T, [&](int32_t t, int32_t key) {
      if (key == t) return 1.0;
      return t - key == lag ? 1.0 : 0.0;
    });
    const double expected = lag > w ? 1.0 : 0.0;
    EXPECT_NEAR(stats.DecodeLocalityScore(), expected, 1e-9) << "lag=" << lag;
    EXPECT_NEAR(stats.LocalityScore(), expected, 1e-9) << "lag=" << lag;
  }
  // Everything on prompt key 0 with a long prompt: far for every query in the
  // sequence score; no decode mass before the query -> NaN decode score.
  HeadStats stats(StatsOptions{.prompt_len = 40, .max_queries = 10, .locality_window = 32});
  Feed(stats, 40, 10, [](int32_t, int32_t key) { return key == 0 ? 1.0 : 0.0; });
  EXPECT_NEAR(stats.LocalityScore(), 1.0, 1e-9);
  EXPECT_TRUE(std::isnan(stats.DecodeLocalityScore()));
}

TEST(AttentionStats, RejectsMalformedRows) {
  HeadStats stats(StatsOptions{.prompt_len = 2, .max_queries = 2});
  std::vector<float> wrong(5, 0.2f);
  EXPECT_EQ(stats.AddQuery(wrong).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> r0(3, 1.0f / 3), r1(4, 0.25f), r2(5, 0.2f);
  EXPECT_TRUE(stats.AddQuery(r0).ok());
  EXPECT_TRUE(stats.AddQuery(r1).ok());
  EXPECT_EQ(stats.AddQuery(r2).code(), absl::StatusCode::kOutOfRange);
}

TEST(AttentionMap, HeatmapShapeAndScale) {
  AttentionMap map(2, 3);
  ASSERT_TRUE(map.AddQuery(std::vector<float>{0.0f, 0.0f, 1.0f}).ok());
  ASSERT_TRUE(map.AddQuery(std::vector<float>{0.5f, 0.0f, 0.0f, 0.5f}).ok());
  ASSERT_TRUE(map.AddQuery(std::vector<float>{1e-5f, 0.25f, 0.25f, 0.25f, 0.25f - 1e-5f}).ok());
  const Rgb8Image img = map.Heatmap(4.0);
  ASSERT_EQ(img.width, 5);
  ASSERT_EQ(img.height, 3);
  auto px = [&](int32_t y, int32_t x) { return &img.rgb[(static_cast<size_t>(y) * 5 + x) * 3]; };
  auto brightness = [&](int32_t y, int32_t x) { return px(y, x)[0] + px(y, x)[1] + px(y, x)[2]; };
  EXPECT_EQ(brightness(0, 0), 0);                 // zero weight
  EXPECT_EQ(brightness(0, 4), 0);                 // future key
  EXPECT_EQ(brightness(2, 0), 0 + 0 + 4);         // below 10^-4: the darkest colour
  EXPECT_GT(brightness(0, 2), brightness(1, 0));  // 1.0 brighter than 0.5
  EXPECT_GT(brightness(1, 0), brightness(2, 1));  // 0.5 brighter than 0.25
}

}  // namespace
}  // namespace argen::characterize
