// argen_bench --project-bounded's arithmetic (decode_projection.h) on the
// published Emu3-Gen shape: diagonal 95% at five rows runs the S steps asked
// for, dense and too short an S do not project, and the projected decode is
// the measured steps plus the rest at the steady step.
#include "bench/gpu/decode_projection.h"

#include <string>

#include "absl/status/statusor.h"
#include "bench/gpu/janus_shapes.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"

namespace argen::bench {
namespace {

sparse::ResolvedPolicy Resolve(const BenchModel& m, sparse::PolicyKind kind) {
  sparse::PolicyParams p;
  p.kind = kind;
  if (kind != sparse::PolicyKind::kDense) {
    p.sparsity = 0.95;
    p.n_recent = 455;
  }
  absl::StatusOr<sparse::ResolvedPolicy> r = sparse::ResolvePolicy(p, m.grid);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : sparse::ResolvedPolicy{};
}

TEST(DecodeProjectionTest, BoundedPoliciesRunTheStepsAskedForAndDenseRunsWhole) {
  absl::StatusOr<BenchModel> emu3 = BenchModelFor("emu3");
  ASSERT_TRUE(emu3.ok()) << emu3.status();
  const sparse::ResolvedPolicy diagonal = Resolve(*emu3, sparse::PolicyKind::kDiagonal);
  const sparse::ResolvedPolicy dense = Resolve(*emu3, sparse::PolicyKind::kDense);
  ASSERT_LT(diagonal.n_slots, diagonal.l_dec);
  std::string why;
  EXPECT_EQ(DecodeStepsToRun(diagonal, 0, &why), diagonal.l_dec - 1);
  EXPECT_EQ(DecodeStepsToRun(diagonal, 1500, &why), 1500);
  EXPECT_EQ(DecodeStepsToRun(diagonal, diagonal.l_dec + 10, &why), diagonal.l_dec - 1);  // more than all: all
  EXPECT_EQ(DecodeStepsToRun(dense, 1500, &why), dense.l_dec - 1);
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(DecodeStepsToRun(diagonal, diagonal.n_slots + kSteadySteps - 1, &why), 0);
  EXPECT_NE(why.find("steady steps"), std::string::npos) << why;
}

TEST(DecodeProjectionTest, TheRestIsAtTheSteadyStep) {
  // 1,500 steps measured in 60 s, a 40 ms steady step, 8,189 tokens: 6,688 more steps.
  EXPECT_DOUBLE_EQ(ProjectedDecodeSeconds(60.0, 40.0, 8189, 1500), 60.0 + 6688 * 0.040);
  EXPECT_DOUBLE_EQ(ProjectedDecodeSeconds(12.5, 3.0, 100, 99), 12.5);  // nothing left
}

}  // namespace
}  // namespace argen::bench
