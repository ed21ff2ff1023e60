// Aggregation over prompts and heads, and the CSVs it writes.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/characterize/aggregate.h"

namespace argen::characterize {
namespace {

// A head whose query t puts `prompt_share` on prompt key 0 and the rest on
// decode key `t - lag` (or on itself while t < lag).
HeadStats MakeHead(int32_t lp, int32_t T, double prompt_share, int32_t lag) {
  HeadStats s(StatsOptions{.prompt_len = lp, .max_queries = T, .max_distance = 4, .locality_window = 8});
  for (int32_t t = 0; t < T; ++t) {
    std::vector<float> row(lp + t + 1, 0.0f);
    row[0] = static_cast<float>(prompt_share);
    row[lp + std::max(0, t - lag)] += static_cast<float>(1 - prompt_share);
    EXPECT_TRUE(s.AddQuery(row).ok());
  }
  return s;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Aggregate, AveragesOverPromptsHeadsAndLayers) {
  Aggregate agg(/*layers=*/2, /*heads=*/2, /*max_distance=*/4);
  // Layer 0 head 0: two prompts with prompt share 0.2 and 0.6 -> mean 0.4.
  agg.Add(0, 0, MakeHead(3, 30, 0.2, 0));
  agg.Add(0, 0, MakeHead(3, 30, 0.6, 0));
  agg.Add(0, 1, MakeHead(3, 30, 0.5, 0));
  agg.Add(1, 0, MakeHead(3, 30, 0.1, 20));  // far lag: middle mass, non-local
  agg.Add(1, 1, MakeHead(3, 30, 0.3, 0));
  EXPECT_NEAR(agg.head(0, 0).prompt, 0.4, 1e-6);
  EXPECT_EQ(agg.head(0, 0).prompts, 2);
  EXPECT_NEAR(agg.MeanMass(0, 0), (0.4 + 0.5) / 2, 1e-6);
  EXPECT_NEAR(agg.MeanMass(-1, 0), (0.4 + 0.5 + 0.1 + 0.3) / 4, 1e-6);
  // Lag-0 heads: all decode mass local. Layer 1 head 0 with lag 20: the
  // decode weight sits on key 0 (t < 20) -- local only at t = 0 -- or 20 back.
  EXPECT_NEAR(agg.head(0, 1).local, 0.5, 1e-6);
  EXPECT_NEAR(agg.head(0, 1).middle, 0.0, 1e-6);
  EXPECT_GT(agg.head(1, 0).middle, 0.8);
  // Pure lag patterns (prompt excluded from the decode-key cosines): diagonal 1.
  for (int32_t d = 1; d <= 4; ++d) EXPECT_NEAR(agg.Similarity(0, d).diagonal, 1.0, 1e-6);

  const std::string dir = ::testing::TempDir();
  ASSERT_TRUE(agg.WriteMassCsv(dir + "/mass.csv").ok());
  ASSERT_TRUE(agg.WriteSimilarityCsv(dir + "/similarity.csv").ok());
  ASSERT_TRUE(agg.WriteLocalityCsv(dir + "/locality.csv").ok());
  const std::string mass = ReadAll(dir + "/mass.csv");
  EXPECT_EQ(mass.rfind("scope,layer,head,prompt,local,middle\n", 0), 0u);
  EXPECT_NE(mass.find("head,0,0,0.400000,"), std::string::npos) << mass;
  EXPECT_NE(mass.find("all,-1,-1,0.325000,"), std::string::npos) << mass;
  const std::string sim = ReadAll(dir + "/similarity.csv");
  EXPECT_NE(sim.find("all,-1,1,"), std::string::npos);
  EXPECT_NE(sim.find("layer,1,4,"), std::string::npos);
  // Locality: lag-0 heads keep all weight before the query off the far keys
  // except the prompt key (far once the query is > 8 positions past it).
  const std::string loc = ReadAll(dir + "/locality.csv");
  EXPECT_EQ(loc.rfind("layer,head,s,s_decode,type\n", 0), 0u);
  EXPECT_NE(loc.find("1,0,"), std::string::npos);
  EXPECT_FALSE(agg.WriteMassCsv("/nonexistent-dir/x.csv").ok());
}

}  // namespace
}  // namespace argen::characterize
