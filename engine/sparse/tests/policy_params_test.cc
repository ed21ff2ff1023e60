// Defaults, names and rejection of invalid parameters (messages name the field).
#include <cmath>
#include <string>

#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"

namespace argen::sparse {
namespace {

PolicyParams Make(PolicyKind kind, double sparsity = 0, int32_t n_att = 0, int32_t n_recent = 0, int32_t n_sink = -1) {
  PolicyParams p;
  p.kind = kind;
  p.sparsity = sparsity;
  p.n_att = n_att;
  p.n_recent = n_recent;
  p.n_sink = n_sink;
  return p;
}

void ExpectRejected(const PolicyParams& params, int32_t l_dec, const std::string& field) {
  auto r = ResolvePolicy(params, l_dec);
  ASSERT_FALSE(r.ok()) << "accepted " << PolicyName(params.kind);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find(field), std::string::npos) << r.status();
  EXPECT_NE(std::string(r.status().message()).find(std::string(PolicyName(params.kind))), std::string::npos)
      << r.status();
}

TEST(PolicyParams, NamesRoundTrip) {
  for (int32_t k = 0; k <= 7; ++k) {
    const auto kind = static_cast<PolicyKind>(k);
    auto parsed = ParsePolicyName(PolicyName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(*ParsePolicyName("StreamingLLM"), PolicyKind::kStreamingLlm);
  EXPECT_EQ(*ParsePolicyName("window"), PolicyKind::kSlidingWindow);
  auto bad = ParsePolicyName("quest");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("quest"), std::string::npos);
  EXPECT_NE(std::string(bad.status().message()).find("diagonal_sink4"), std::string::npos);
}

// Issue 34: a misspelt name gets the nearest known one; a far one gets none.
TEST(PolicyParams, MisspeltNamesGetADidYouMean) {
  for (const auto& [typo, want] : std::vector<std::pair<std::string, std::string>>{{"diagnoal", "diagonal"},
                                                                                   {"Diagonal_Sink", "diagonal_sink4"},
                                                                                   {"slding_window", "sliding_window"},
                                                                                   {"tvoa", "tova"},
                                                                                   {"grid-window", "grid_window"},
                                                                                   {"denze", "dense"}}) {
    EXPECT_EQ(ClosestPolicyName(typo), want) << typo;
    auto bad = ParsePolicyName(typo);
    ASSERT_FALSE(bad.ok()) << typo;
    EXPECT_NE(std::string(bad.status().message()).find("(did you mean \"" + want + "\"?)"), std::string::npos)
        << bad.status();
  }
  EXPECT_EQ(ClosestPolicyName("quest"), "");
  EXPECT_EQ(std::string(ParsePolicyName("quest").status().message()).find("did you mean"), std::string::npos);
}

TEST(PolicyParams, PaperDefaultsForJanusPro) {
  // L_dec = 576; N_att = round((1 - s) * 576); diagonal N_r = 288.
  const struct {
    double s;
    int32_t n_att;
  } table[] = {{0.8, 115}, {0.9, 58}, {0.925, 43}, {0.95, 29}, {0.96, 23}};
  for (const auto& row : table) {
    for (PolicyKind kind : {PolicyKind::kSlidingWindow, PolicyKind::kStreamingLlm, PolicyKind::kH2O, PolicyKind::kTova,
                            PolicyKind::kAlisa, PolicyKind::kDiagonal, PolicyKind::kDiagonalSink4}) {
      auto r = ResolvePolicy(Make(kind, row.s), 576);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->n_att, row.n_att) << PolicyName(kind) << " " << row.s;
      const bool diagonal = kind == PolicyKind::kDiagonal || kind == PolicyKind::kDiagonalSink4;
      EXPECT_EQ(r->n_slots, diagonal ? 288 : row.n_att);
      EXPECT_EQ(r->n_sink, (kind == PolicyKind::kStreamingLlm || kind == PolicyKind::kDiagonalSink4) ? 4 : 0);
    }
  }
  auto h2o = ResolvePolicy(Make(PolicyKind::kH2O, 0.8), 576);
  EXPECT_EQ(h2o->n_recent, 58);  // half of 115 (rounded up) recent, the rest heavy hitters
  auto dense = ResolvePolicy(Make(PolicyKind::kDense), 576);
  EXPECT_EQ(dense->n_att, 576);
  EXPECT_EQ(dense->n_slots, 576);
  auto explicit_att = ResolvePolicy(Make(PolicyKind::kDiagonal, 0, 10, 20), 576);
  ASSERT_TRUE(explicit_att.ok());
  EXPECT_EQ(explicit_att->n_att, 10);
  EXPECT_EQ(explicit_att->n_slots, 20);
}

TEST(PolicyParams, TheFamilysRecentWindowReplacesHalfTheDecodeLength) {
  // 2 2/3 rows, rounded up: Janus-Pro's 24-wide grid 64, Lumina-mGPT's 24 + 1 row end 67,
  // Emu3's 720 px rows of 90 + 1 243.
  EXPECT_EQ(RecentRowsWindow(GridGeometry{24, 0, 576}, 8, 3), 64);
  EXPECT_EQ(RecentRowsWindow(GridGeometry{24, 1, 599}, 8, 3), 67);
  EXPECT_EQ(RecentRowsWindow(GridGeometry{90, 1, 8189}, 8, 3), 243);
  GridGeometry grid{24, 0, 576};
  grid.default_n_recent = 64;
  for (PolicyKind kind : {PolicyKind::kDiagonal, PolicyKind::kDiagonalSink4}) {
    absl::StatusOr<ResolvedPolicy> r = ResolvePolicy(Make(kind, 0.95), grid);  // N_att 29
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->n_recent, 64);
    EXPECT_EQ(r->n_slots, 64);
    // A budget wider than the family's window widens it (sparsity 0.8: N_att 115), as before.
    r = ResolvePolicy(Make(kind, 0.8), grid);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->n_recent, 115);
    // The request's own window wins; without a family default the paper's 0.5 L_dec stays.
    r = ResolvePolicy(Make(kind, 0.95, 0, 100), grid);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->n_recent, 100);
    r = ResolvePolicy(Make(kind, 0.95), GridGeometry{24, 0, 576});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->n_recent, 288);
  }
  // A family window longer than the decode length is clamped to it.
  grid.default_n_recent = 1000;
  absl::StatusOr<ResolvedPolicy> r = ResolvePolicy(Make(PolicyKind::kDiagonal, 0.95), grid);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->n_recent, 576);
}

TEST(PolicyParams, InvalidParametersAreRejectedWithTheirName) {
  ExpectRejected(Make(PolicyKind::kDiagonal, 1.0), 576, "sparsity");
  ExpectRejected(Make(PolicyKind::kDiagonal, -0.1), 576, "sparsity");
  ExpectRejected(Make(PolicyKind::kSlidingWindow, 0.9999), 576, "sparsity");  // rounds to 0 keys
  ExpectRejected(Make(PolicyKind::kDense, 0.5), 576, "sparsity");
  ExpectRejected(Make(PolicyKind::kDiagonal, 0, 100, 50), 576, "n_att");     // n_att > n_recent
  ExpectRejected(Make(PolicyKind::kDiagonal, 0, 10, 600), 576, "n_recent");  // beyond L_dec
  ExpectRejected(Make(PolicyKind::kSlidingWindow, 0, 577), 576, "n_att");
  ExpectRejected(Make(PolicyKind::kSlidingWindow, 0, -3), 576, "n_att");
  ExpectRejected(Make(PolicyKind::kSlidingWindow, 0.5, 10), 576, "n_att");  // both given
  ExpectRejected(Make(PolicyKind::kStreamingLlm, 0, 4), 576, "n_sink");     // no recent slot
  ExpectRejected(Make(PolicyKind::kDiagonalSink4, 0, 4, 8), 576, "n_sink");
  ExpectRejected(Make(PolicyKind::kH2O, 0, 10, 0, 2), 576, "n_sink");
  ExpectRejected(Make(PolicyKind::kTova, 0, 10, 3), 576, "n_recent");
  ExpectRejected(Make(PolicyKind::kH2O, 0, 10, 11), 576, "n_recent");
  ExpectRejected(Make(PolicyKind::kStreamingLlm, 0, 10, 0, -2), 576, "n_sink");
  ExpectRejected(Make(PolicyKind::kDiagonal, 0.5), 0, "l_dec");
  auto bad_kind = ResolvePolicy(Make(static_cast<PolicyKind>(42)), 576);
  EXPECT_FALSE(bad_kind.ok());
  PolicyParams nan_sparsity = Make(PolicyKind::kDiagonal);
  nan_sparsity.sparsity = std::nan("");
  ExpectRejected(nan_sparsity, 576, "sparsity");
}

}  // namespace
}  // namespace argen::sparse
