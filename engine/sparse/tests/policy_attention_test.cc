// Policies driven by the real CPU attention, as a backend runs them (GQA,
// weights averaged over each kv head's query heads), against the reference
// policies fed by a double-precision attention computed from the positions
// the reference attends. Checks that selection and eviction consume exactly
// the attention step's weights and that the gathered attention reads the
// right keys (the output is compared too).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/cpu/sparse_attention.h"
#include "engine/sparse/policy_params.h"
#include "engine/sparse/tests/policy_reference.h"
#include "gtest/gtest.h"
#include "kernels/sparse/policy.h"

namespace argen::sparse {
namespace {

constexpr int32_t kHeads = 4, kKvHeads = 2, kDim = 16, kPrompt = 5, kLdec = 60;

struct Case {
  PolicyKind kind;
  int32_t n_att, n_recent;
};

void RunCase(const Case& c, uint32_t seed) {
  PolicyParams params;
  params.kind = c.kind;
  params.n_att = c.n_att;
  params.n_recent = c.n_recent;
  // A 6 x 10 grid; ssd: kv head 0 semantic, 1 spatial (one layer).
  const HeadClasses classes{1, kKvHeads, {1, 0}};
  auto resolved = ResolvePolicy(params, GridGeometry{6, 0, kLdec}, &classes);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const ResolvedPolicy p = *resolved;
  const PolicyLayout l = LayoutFor(p);
  SCOPED_TRACE(::testing::Message() << PolicyName(p.kind));

  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random_vec = [&](int32_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = 2.0f * normal(rng);
    return v;
  };
  // Keys/values by position (prompt 0..kPrompt-1, decode kPrompt + t) per kv head.
  std::vector<std::vector<std::vector<float>>> k_pos(kKvHeads), v_pos(kKvHeads);
  for (int32_t g = 0; g < kKvHeads; ++g) {
    for (int32_t j = 0; j < kPrompt; ++j) {
      k_pos[g].push_back(random_vec(kDim));
      v_pos[g].push_back(random_vec(kDim));
    }
  }
  // The backend side: slot-layout KV, flat policy state, attention buffers.
  const int32_t positions = kPrompt + l.n_slots;
  std::vector<float> k(kKvHeads * positions * kDim), v(k.size());
  for (int32_t g = 0; g < kKvHeads; ++g) {
    for (int32_t j = 0; j < kPrompt; ++j) {
      std::copy(k_pos[g][j].begin(), k_pos[g][j].end(), k.begin() + (g * positions + j) * kDim);
      std::copy(v_pos[g][j].begin(), v_pos[g][j].end(), v.begin() + (g * positions + j) * kDim);
    }
  }
  std::vector<int32_t> ints(kKvHeads * l.ints_per_head);
  std::vector<float> floats(kKvHeads * std::max(1, l.floats_per_head));
  auto state = [&](int32_t g) {
    return PolicyState{ints.data() + g * l.ints_per_head, floats.data() + g * std::max(1, l.floats_per_head)};
  };
  for (int32_t g = 0; g < kKvHeads; ++g) InitState(p, l, state(g), g);
  std::vector<int32_t> attended(kKvHeads * l.max_attended), counts(kKvHeads);
  std::vector<float> out(kHeads * kDim), probs(kKvHeads * l.max_attended);
  cpu::DecodeAttentionShape shape{kHeads, kKvHeads, kDim, kPrompt, l.n_slots};
  std::vector<float> scratch(cpu::DecodeAttentionScratchFloats(shape, l.max_attended));

  std::vector<test_util::ReferencePolicy> refs;
  for (int32_t g = 0; g < kKvHeads; ++g) refs.emplace_back(p, SsdHeadIsSemantic(p, g));
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  for (int32_t t = 0; t < kLdec - 1; ++t) {
    SCOPED_TRACE(::testing::Message() << "t=" << t);
    const std::vector<float> q = random_vec(kHeads * kDim);
    for (int32_t g = 0; g < kKvHeads; ++g) {
      k_pos[g].push_back(random_vec(kDim));
      v_pos[g].push_back(random_vec(kDim));
      int32_t slot = -1;
      counts[g] = PlanStep(p, l, state(g), t, &slot, attended.data() + g * l.max_attended);
      ASSERT_GE(counts[g], 0);
      std::copy(k_pos[g].back().begin(), k_pos[g].back().end(), k.begin() + (g * positions + kPrompt + slot) * kDim);
      std::copy(v_pos[g].back().begin(), v_pos[g].back().end(), v.begin() + (g * positions + kPrompt + slot) * kDim);
    }
    cpu::DecodeAttentionIo io;
    io.q = q.data();
    io.k = k.data();
    io.v = v.data();
    io.attended = attended.data();
    io.counts = counts.data();
    io.attended_stride = l.max_attended;
    io.scale = static_cast<float>(scale);
    io.out = out.data();
    io.attended_probs = probs.data();
    io.scratch = scratch.data();
    cpu::DecodeAttention(shape, io);

    for (int32_t g = 0; g < kKvHeads; ++g) {
      // Reference: positions attended, double attention over them.
      const std::vector<int32_t> ref_pos = refs[g].Plan(t);
      std::vector<int32_t> got_pos;
      for (int32_t i = 0; i < counts[g]; ++i) {
        got_pos.push_back(SlotPosition(l, state(g), attended[g * l.max_attended + i]));
      }
      std::vector<int32_t> sorted = got_pos;
      std::sort(sorted.begin(), sorted.end());
      ASSERT_EQ(sorted, ref_pos);
      std::vector<double> mean(ref_pos.size(), 0.0);
      const int32_t group = kHeads / kKvHeads;
      for (int32_t h = g * group; h < (g + 1) * group; ++h) {
        std::vector<const std::vector<float>*> keys, values;
        for (int32_t j = 0; j < kPrompt; ++j) keys.push_back(&k_pos[g][j]), values.push_back(&v_pos[g][j]);
        for (int32_t pos : ref_pos)
          keys.push_back(&k_pos[g][kPrompt + pos]), values.push_back(&v_pos[g][kPrompt + pos]);
        std::vector<double> w(keys.size());
        double mx = -1e300, sum = 0;
        for (size_t j = 0; j < keys.size(); ++j) {
          double dot = 0;
          for (int32_t e = 0; e < kDim; ++e) dot += double{q[h * kDim + e]} * (*keys[j])[e];
          w[j] = dot * scale;
          mx = std::max(mx, w[j]);
        }
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int32_t e = 0; e < kDim; ++e) {
          double o = 0;
          for (size_t j = 0; j < keys.size(); ++j) o += w[j] / sum * (*values[j])[e];
          EXPECT_NEAR(out[h * kDim + e], o, 1e-4 + 1e-4 * std::abs(o));
        }
        for (size_t i = 0; i < ref_pos.size(); ++i) mean[i] += w[kPrompt + i] / sum / group;
      }
      // The backend's weights (list order) match the reference's (position order).
      for (int32_t i = 0; i < counts[g]; ++i) {
        const size_t r = std::lower_bound(ref_pos.begin(), ref_pos.end(), got_pos[i]) - ref_pos.begin();
        EXPECT_NEAR(probs[g * l.max_attended + i], mean[r], 1e-5);
      }
      std::vector<float> ref_probs(mean.begin(), mean.end());
      refs[g].Observe(t, ref_probs);
      if (ObserveNeeded(p, l, state(g), t)) {
        ObserveStep(p, l, state(g), t, attended.data() + g * l.max_attended, probs.data() + g * l.max_attended,
                    counts[g]);
      }
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(PolicyWithCpuAttention, SelectionUsesTheAttentionWeights) {
  const Case cases[] = {
      {PolicyKind::kDiagonal, 6, 20},     {PolicyKind::kDiagonalSink4, 9, 20}, {PolicyKind::kH2O, 10, 0},
      {PolicyKind::kTova, 10, 0},         {PolicyKind::kAlisa, 10, 0},         {PolicyKind::kStreamingLlm, 8, 0},
      {PolicyKind::kSlidingWindow, 7, 0}, {PolicyKind::kGridWindow, 8, 0},     {PolicyKind::kDiagonalGrid, 8, 16},
      {PolicyKind::kSsd, 10, 0},
  };
  uint32_t seed = 17;
  for (const Case& c : cases) RunCase(c, ++seed);
}

}  // namespace
}  // namespace argen::sparse
