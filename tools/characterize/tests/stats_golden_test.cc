// HeadStats against numpy (tests/goldens/characterize/stats.json, made by
// tools/goldens/make_characterize_golden.py) on a random attention map with a
// diagonal stripe: masses, vertical/diagonal similarities in both key spaces,
// locality scores.
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/characterize/attention_stats.h"

namespace argen::characterize {
namespace {

nlohmann::json LoadGolden() {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  EXPECT_NE(src, nullptr);
  std::ifstream f(std::string(src ? src : ".") + "/tests/goldens/characterize/stats.json");
  EXPECT_TRUE(f.good());
  return nlohmann::json::parse(f);
}

HeadStats RunGolden(const nlohmann::json& g, KeySpace keys) {
  StatsOptions o;
  o.prompt_len = g["prompt_len"];
  o.max_queries = g["queries"];
  o.max_distance = g["max_distance"];
  o.locality_window = g["locality_window"];
  o.similarity_keys = keys;
  HeadStats s(o);
  for (const auto& row : g["rows"]) {
    const std::vector<float> r = row.get<std::vector<float>>();
    EXPECT_TRUE(s.AddQuery(r).ok());
  }
  return s;
}

TEST(StatsGolden, MatchesNumpyReference) {
  const nlohmann::json g = LoadGolden();
  const nlohmann::json& e = g["expected"];
  for (KeySpace keys : {KeySpace::kDecode, KeySpace::kSequence}) {
    const HeadStats s = RunGolden(g, keys);
    const MassSummary m = s.Mass();
    EXPECT_NEAR(m.prompt, e["mass"]["prompt"].get<double>(), 1e-6);
    EXPECT_NEAR(m.local, e["mass"]["local"].get<double>(), 1e-6);
    EXPECT_NEAR(m.middle, e["mass"]["middle"].get<double>(), 1e-6);
    EXPECT_NEAR(s.LocalityScore(), e["locality"].get<double>(), 1e-6);
    EXPECT_NEAR(s.DecodeLocalityScore(), e["decode_locality"].get<double>(), 1e-6);
    const auto& sims = e[keys == KeySpace::kDecode ? "similarity_decode" : "similarity_sequence"];
    for (const auto& row : sims) {
      const int32_t d = row["d"];
      const SimilarityAt got = s.Similarity(d);
      EXPECT_EQ(got.pairs, row["pairs"].get<int64_t>()) << "d=" << d;
      EXPECT_NEAR(got.vertical, row["vertical"].get<double>(), 1e-6) << "d=" << d;
      EXPECT_NEAR(got.diagonal, row["diagonal"].get<double>(), 1e-6) << "d=" << d;
    }
  }
}

}  // namespace
}  // namespace argen::characterize
