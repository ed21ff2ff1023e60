// Every sparse policy planned and observed on the device produces exactly the
// CPU's write slots, attended lists and state, step after step, when both see
// the same attention probabilities (kernels/sparse/policy.h run on both sides),
// planned in one launch or by PlanScope (a layer and a row range at a time) alike.
#include "kernels/policy_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "engine/sparse/policy_params.h"

namespace argen::kernels {
namespace {

template <typename T>
struct Dev {
  T* p = nullptr;
  explicit Dev(size_t n) { cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)); }
  ~Dev() { cudaFree(p); }
  void Put(const std::vector<T>& h) { cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> Get(size_t n) const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

struct KindCase {
  sparse::PolicyKind kind;
  double sparsity;
  bool row_breaks = false;  // Lumina-mGPT's layout: rows of 8 codes + a row break (L_dec 80)
};

// The grid of these tests: 9 x 9 tokens, so L_dec 81 (a square: the grid
// policies need one), and ssd's classification of its heads (every other
// head semantic), the same on both sides.
constexpr int kGridLdec = 81;
sparse::HeadClasses TestClasses(int layers, int kv_heads) {
  sparse::HeadClasses h;
  h.layers = layers;
  h.kv_heads = kv_heads;
  for (int i = 0; i < layers * kv_heads; ++i) h.semantic.push_back(i % 2 == 0 ? 1 : 0);
  return h;
}

// The scopes of PlanWholeOrScoped's scoped steps: rows [0, 2) and the rest, a layer at a time.
const std::vector<PlanScope> kTestScopes = {{0, 2, 0}, {2, -1, 0}};

// Plans a step for every row and layer: in one launch, or (scoped) by
// PlanScope, each of kTestScopes of each layer apart, as a pass sorted by rank
// does. A scoped step first clears the slots and counts: stale entries would
// hide a scope that plans nothing.
void PlanWholeOrScoped(bool scoped, const RowPlan* plans, int rows, int layers, int kvh, int32_t* ints, float* floats,
                       const PlanBuffers& buf) {
  if (!scoped) {
    ASSERT_EQ(PlanDecodeStep(plans, rows, layers, kvh, ints, floats, buf, 0), cudaSuccess);
    return;
  }
  const size_t entries = static_cast<size_t>(layers) * rows * kvh;
  ASSERT_EQ(cudaMemset(buf.write_slots, 0xff, entries * sizeof(int32_t)), cudaSuccess);
  ASSERT_EQ(cudaMemset(buf.counts, 0xff, entries * sizeof(int32_t)), cudaSuccess);
  for (int l = 0; l < layers; ++l) {
    for (PlanScope sc : kTestScopes) {
      sc.layer = l;
      ASSERT_EQ(PlanDecodeStep(plans, rows, layers, kvh, ints, floats, buf, 0, sc), cudaSuccess);
    }
  }
}

class PolicyKernelsTest : public ::testing::TestWithParam<KindCase> {};

TEST_P(PolicyKernelsTest, DeviceMatchesHostStepByStep) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  ASSERT_GT(devices, 0);
  // 9 rows of 8 codes, each but the last closed by a row break: 80 decode tokens.
  const sparse::GridGeometry grid =
      GetParam().row_breaks ? sparse::GridGeometry{8, 1, 9 * 8 + 8} : sparse::SquareGrid(kGridLdec);
  const int l_dec = grid.l_dec, rows = 3, layers = 2, kvh = 3, heads = layers * kvh;
  sparse::PolicyParams params;
  params.kind = GetParam().kind;
  params.sparsity = GetParam().sparsity;
  const sparse::HeadClasses classes = TestClasses(layers, kvh);
  absl::StatusOr<sparse::ResolvedPolicy> policy = sparse::ResolvePolicy(params, grid, &classes);
  ASSERT_TRUE(policy.ok()) << policy.status();
  const sparse::PolicyLayout layout = sparse::LayoutFor(*policy);
  const int stride = layout.max_attended;

  std::vector<int32_t> ints(static_cast<size_t>(rows) * heads * layout.ints_per_head);
  std::vector<float> floats(static_cast<size_t>(rows) * heads * std::max(layout.floats_per_head, 0));
  Dev<int32_t> d_ints(ints.size());
  Dev<float> d_floats(floats.size());
  std::vector<RowPlan> plans(rows);
  for (int r = 0; r < rows; ++r) {
    plans[r].policy = *policy;
    plans[r].layout = layout;
    plans[r].ints_offset = int64_t{r} * heads * layout.ints_per_head;
    plans[r].floats_offset = int64_t{r} * heads * layout.floats_per_head;
    plans[r].sparse = 1;
    ASSERT_EQ(InitPolicyState(*policy, layout, heads, d_ints.p + plans[r].ints_offset,
                              d_floats.p + plans[r].floats_offset, 0),
              cudaSuccess);
    for (int h = 0; h < heads; ++h) {
      sparse::InitState(*policy, layout,
                        {ints.data() + plans[r].ints_offset + int64_t{h} * layout.ints_per_head,
                         floats.data() + plans[r].floats_offset + int64_t{h} * layout.floats_per_head},
                        h);
    }
  }
  const size_t per_layer = static_cast<size_t>(rows) * kvh;
  Dev<int32_t> d_slots(layers * per_layer), d_counts(layers * per_layer), d_att(layers * per_layer * stride);
  Dev<float> d_probs(per_layer * stride);
  Dev<RowPlan> d_plans(rows);
  PlanBuffers buf{d_slots.p, d_counts.p, d_att.p, stride};
  std::mt19937 rng(static_cast<uint32_t>(params.kind) * 31 + 5);
  std::uniform_real_distribution<float> uni(0.001f, 1.0f);
  std::vector<int32_t> att(stride);

  for (int t = 0; t < l_dec; ++t) {
    for (auto& p : plans) p.step = t;
    d_plans.Put(plans);
    const bool scoped = t % 2 == 1;
    ASSERT_NO_FATAL_FAILURE(PlanWholeOrScoped(scoped, d_plans.p, rows, layers, kvh, d_ints.p, d_floats.p, buf));
    const auto slots = d_slots.Get(layers * per_layer);
    const auto counts = d_counts.Get(layers * per_layer);
    const auto attended = d_att.Get(layers * per_layer * stride);
    std::vector<std::vector<float>> layer_probs(layers, std::vector<float>(per_layer * stride, 0.f));
    for (int l = 0; l < layers; ++l)
      for (int r = 0; r < rows; ++r)
        for (int g = 0; g < kvh; ++g) {
          const int h = l * kvh + g;
          sparse::PolicyState s{ints.data() + plans[r].ints_offset + int64_t{h} * layout.ints_per_head,
                                floats.data() + plans[r].floats_offset + int64_t{h} * layout.floats_per_head};
          int32_t slot = -1;
          const int32_t n = sparse::PlanStep(*policy, layout, s, t, &slot, att.data());
          const size_t at = (static_cast<size_t>(l) * rows + r) * kvh + g;
          ASSERT_GE(n, 0);
          ASSERT_EQ(counts[at], n) << "t " << t << " layer " << l << " row " << r << " head " << g;
          ASSERT_EQ(slots[at], slot) << "t " << t;
          for (int i = 0; i < n; ++i) ASSERT_EQ(attended[at * stride + i], att[i]) << "t " << t << " entry " << i;
          // The same probabilities for both sides (the attention's output in real use).
          float* probs = layer_probs[l].data() + (static_cast<size_t>(r) * kvh + g) * stride;
          float total = 0.f;
          for (int i = 0; i < n; ++i) total += (probs[i] = uni(rng));
          for (int i = 0; i < n; ++i) probs[i] /= total * 1.25f;  // the prompt holds the rest
          if (sparse::ObserveNeeded(*policy, layout, s, t))
            sparse::ObserveStep(*policy, layout, s, t, att.data(), probs, n);
        }
    for (int l = 0; l < layers; ++l) {
      d_probs.Put(layer_probs[l]);
      ASSERT_EQ(ObserveDecodeStep(d_plans.p, rows, layers, kvh, l, d_ints.p, d_floats.p, buf, d_probs.p, stride, 0),
                cudaSuccess);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(d_ints.Get(ints.size()), ints) << "int state differs after step " << t;
    ASSERT_EQ(d_floats.Get(floats.size()), floats) << "float state differs after step " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Policies, PolicyKernelsTest,
    ::testing::Values(KindCase{sparse::PolicyKind::kDense, 0.0}, KindCase{sparse::PolicyKind::kSlidingWindow, 0.8},
                      KindCase{sparse::PolicyKind::kStreamingLlm, 0.85}, KindCase{sparse::PolicyKind::kH2O, 0.8},
                      KindCase{sparse::PolicyKind::kTova, 0.9}, KindCase{sparse::PolicyKind::kAlisa, 0.8},
                      KindCase{sparse::PolicyKind::kDiagonal, 0.9}, KindCase{sparse::PolicyKind::kDiagonalSink4, 0.85},
                      KindCase{sparse::PolicyKind::kGridWindow, 0.85},
                      KindCase{sparse::PolicyKind::kDiagonalGrid, 0.85}, KindCase{sparse::PolicyKind::kSsd, 0.8},
                      KindCase{sparse::PolicyKind::kLineEvict, 0.7}),
    [](const ::testing::TestParamInfo<KindCase>& info) { return std::string(sparse::PolicyName(info.param.kind)); });

// The same, on a grid with row breaks (Lumina-mGPT's): every policy.
INSTANTIATE_TEST_SUITE_P(
    RowBreakGrid, PolicyKernelsTest,
    ::testing::Values(
        KindCase{sparse::PolicyKind::kDense, 0.0, true}, KindCase{sparse::PolicyKind::kSlidingWindow, 0.8, true},
        KindCase{sparse::PolicyKind::kStreamingLlm, 0.85, true}, KindCase{sparse::PolicyKind::kH2O, 0.8, true},
        KindCase{sparse::PolicyKind::kTova, 0.9, true}, KindCase{sparse::PolicyKind::kAlisa, 0.8, true},
        KindCase{sparse::PolicyKind::kDiagonal, 0.9, true}, KindCase{sparse::PolicyKind::kDiagonalSink4, 0.85, true},
        KindCase{sparse::PolicyKind::kGridWindow, 0.85, true}, KindCase{sparse::PolicyKind::kDiagonalGrid, 0.85, true},
        KindCase{sparse::PolicyKind::kSsd, 0.8, true}, KindCase{sparse::PolicyKind::kLineEvict, 0.7, true}),
    [](const ::testing::TestParamInfo<KindCase>& info) { return std::string(sparse::PolicyName(info.param.kind)); });

// The fused diagonal observe: the attention kernel's argmin (entries from
// sparse::DiagonalSelectionFirst; here computed on the host with the same
// sparse::ArgminFrom the kernel test checks the kernel against) applied once a
// step by ApplyDiagonalSelections gives exactly the state of the host's
// ObserveStep, step after step, with many exact ties; the warp-parallel plan
// writes the host's lists; rows of other policies in the same batch (a
// sliding window row, a dense row) are left alone by the apply. Every other
// step plans and applies by PlanScope (a layer and a row range at a time, as
// a pass sorted by rank does) into the same buffers, with the same result.
class FusedArgminTest : public ::testing::TestWithParam<KindCase> {};

TEST_P(FusedArgminTest, ApplyFromArgminMatchesHostObserve) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  ASSERT_GT(devices, 0);
  const int l_dec = 121, layers = 3, kvh = 4, heads = layers * kvh;  // an 11 x 11 grid
  sparse::PolicyParams main_params, window_params, ssd_params;
  main_params.kind = GetParam().kind;
  main_params.sparsity = GetParam().sparsity;
  window_params.kind = sparse::PolicyKind::kSlidingWindow;
  window_params.sparsity = 0.9;
  ssd_params.kind = sparse::PolicyKind::kSsd;  // a score row in the batch: its argmin entry is ignored
  ssd_params.sparsity = 0.8;
  std::vector<sparse::ResolvedPolicy> policies;
  const sparse::HeadClasses classes = TestClasses(layers, kvh);
  for (const auto& params : {main_params, main_params, window_params, sparse::PolicyParams{}, ssd_params}) {
    absl::StatusOr<sparse::ResolvedPolicy> p = sparse::ResolvePolicy(params, sparse::SquareGrid(l_dec), &classes);
    ASSERT_TRUE(p.ok()) << p.status();
    policies.push_back(*p);
  }
  const int rows = static_cast<int>(policies.size());
  std::vector<RowPlan> plans(rows);
  int64_t n_ints = 0, n_floats = 0;
  int stride = 1;
  for (int r = 0; r < rows; ++r) {
    plans[r].policy = policies[r];
    plans[r].layout = sparse::LayoutFor(policies[r]);
    plans[r].ints_offset = n_ints;
    plans[r].floats_offset = n_floats;
    plans[r].sparse = policies[r].kind != sparse::PolicyKind::kDense;
    n_ints += int64_t{heads} * plans[r].layout.ints_per_head;
    n_floats += int64_t{heads} * plans[r].layout.floats_per_head;
    stride = std::max(stride, plans[r].layout.max_attended);
  }
  std::vector<int32_t> ints(n_ints);
  std::vector<float> floats(std::max<int64_t>(n_floats, 1));
  Dev<int32_t> d_ints(ints.size());
  Dev<float> d_floats(floats.size());
  for (int r = 0; r < rows; ++r) {
    if (!plans[r].sparse) continue;
    ASSERT_EQ(InitPolicyState(plans[r].policy, plans[r].layout, heads, d_ints.p + plans[r].ints_offset,
                              d_floats.p + plans[r].floats_offset, 0),
              cudaSuccess);
    for (int h = 0; h < heads; ++h)
      sparse::InitState(plans[r].policy, plans[r].layout,
                        {ints.data() + plans[r].ints_offset + int64_t{h} * plans[r].layout.ints_per_head,
                         floats.data() + plans[r].floats_offset + int64_t{h} * plans[r].layout.floats_per_head},
                        h);
  }
  const size_t per_layer = static_cast<size_t>(rows) * kvh;
  Dev<int32_t> d_slots(layers * per_layer), d_counts(layers * per_layer), d_att(layers * per_layer * stride),
      d_argmin(layers * per_layer);
  Dev<RowPlan> d_plans(rows);
  PlanBuffers buf{d_slots.p, d_counts.p, d_att.p, stride};
  uint32_t seed = static_cast<uint32_t>(main_params.kind) * 977 + 3;
  std::vector<int32_t> att(stride);
  int selections = 0;
  for (int t = 0; t < l_dec; ++t) {
    for (auto& p : plans) p.step = t;
    d_plans.Put(plans);
    const bool scoped = t % 2 == 1;
    ASSERT_NO_FATAL_FAILURE(PlanWholeOrScoped(scoped, d_plans.p, rows, layers, kvh, d_ints.p, d_floats.p, buf));
    const auto slots = d_slots.Get(layers * per_layer);
    const auto counts = d_counts.Get(layers * per_layer);
    const auto attended = d_att.Get(layers * per_layer * stride);
    std::vector<int32_t> argmin(layers * per_layer, 0);  // non-diagonal rows: an entry that must be ignored
    for (int l = 0; l < layers; ++l)
      for (int r = 0; r < rows; ++r) {
        if (!plans[r].sparse) continue;
        const sparse::ResolvedPolicy& p = plans[r].policy;
        const sparse::PolicyLayout& layout = plans[r].layout;
        for (int g = 0; g < kvh; ++g) {
          const int h = l * kvh + g;
          sparse::PolicyState s{ints.data() + plans[r].ints_offset + int64_t{h} * layout.ints_per_head,
                                floats.data() + plans[r].floats_offset + int64_t{h} * layout.floats_per_head};
          int32_t slot = -1;
          const int32_t n = sparse::PlanStep(p, layout, s, t, &slot, att.data());
          const size_t at = (static_cast<size_t>(l) * rows + r) * kvh + g;
          ASSERT_GE(n, 0);
          ASSERT_EQ(counts[at], n) << "t " << t << " layer " << l << " row " << r << " head " << g;
          ASSERT_EQ(slots[at], slot) << "t " << t;
          for (int i = 0; i < n; ++i) ASSERT_EQ(attended[at * stride + i], att[i]) << "t " << t << " entry " << i;
          std::vector<float> probs(n);
          for (auto& x : probs) {  // four levels: exact ties everywhere
            seed = seed * 1664525u + 1013904223u;
            x = 0.0625f * static_cast<float>((seed >> 24) % 4 + 1);
          }
          if (sparse::SelectsByArgmin(p.kind)) {
            argmin[at] = sparse::ArgminFrom(probs.data(), sparse::DiagonalSelectionFirst(p), n);
            if (sparse::ObserveNeeded(p, layout, s, t)) {
              ++selections;
              sparse::ObserveStep(p, layout, s, t, att.data(), probs.data(), n);
            }
          }
        }
      }
    d_argmin.Put(argmin);
    if (scoped) {
      for (int l = layers - 1; l >= 0; --l) {  // layers are independent: any order
        for (PlanScope sc : kTestScopes) {
          sc.layer = l;
          ASSERT_EQ(ApplyDiagonalSelections(d_plans.p, rows, layers, kvh, d_ints.p, d_floats.p, buf, d_argmin.p, 0, sc),
                    cudaSuccess);
        }
      }
    } else {
      ASSERT_EQ(ApplyDiagonalSelections(d_plans.p, rows, layers, kvh, d_ints.p, d_floats.p, buf, d_argmin.p, 0),
                cudaSuccess);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(d_ints.Get(ints.size()), ints) << "int state differs after step " << t << (scoped ? " (scoped)" : "");
  }
  EXPECT_GT(selections, 0);
  // Scopes outside the step are refused.
  EXPECT_EQ(PlanDecodeStep(d_plans.p, rows, layers, kvh, d_ints.p, d_floats.p, buf, 0, PlanScope{rows - 1, 2, 0}),
            cudaErrorInvalidValue);
  EXPECT_EQ(ApplyDiagonalSelections(d_plans.p, rows, layers, kvh, d_ints.p, d_floats.p, buf, d_argmin.p, 0,
                                    PlanScope{0, -1, layers}),
            cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(Diagonal, FusedArgminTest,
                         ::testing::Values(KindCase{sparse::PolicyKind::kDiagonal, 0.95},
                                           KindCase{sparse::PolicyKind::kDiagonal, 0.8},
                                           KindCase{sparse::PolicyKind::kDiagonalSink4, 0.9},
                                           KindCase{sparse::PolicyKind::kDiagonalSink4, 0.7},
                                           KindCase{sparse::PolicyKind::kDiagonalGrid, 0.9},
                                           KindCase{sparse::PolicyKind::kDiagonalGrid, 0.75}),
                         [](const ::testing::TestParamInfo<KindCase>& info) {
                           return std::string(sparse::PolicyName(info.param.kind)) + "_" +
                                  std::to_string(static_cast<int>(info.param.sparsity * 100 + 0.5));
                         });

// Parallel decoding (sparse::PlanQuery out of order): image rows of a 9 x 9
// grid in flight, row r starting once row r - 1 has 3 tokens with a
// provisional query at r * 9 - 1; each query planned on the device (the warp's
// compacted candidate list) gives the host's write slot, list and state, and a
// diagonal selection applied from the host's argmin (ApplyDiagonalSelections
// with the list) the host's ObserveStep state.
TEST(PolicyKernelsOutOfOrderTest, DeviceMatchesHostAlongAParallelSchedule) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  ASSERT_GT(devices, 0);
  constexpr int kWidth = 9, kWindow = 3;
  std::vector<std::vector<std::pair<int32_t, bool>>> steps;  // (index, provisional), increasing
  {
    std::vector<int32_t> made(kGridLdec / kWidth, 0);
    std::vector<uint8_t> started(made.size(), 0);
    started[0] = 1;
    for (bool more = true; more;) {
      std::vector<std::pair<int32_t, bool>> step;
      for (size_t r = 0; r < made.size(); ++r) {
        if (!started[r] && made[r - 1] >= kWindow) {
          started[r] = 1;
          step.push_back({static_cast<int32_t>(r) * kWidth - 1, true});
        }
        if (started[r] && made[r] < kWidth) step.push_back({static_cast<int32_t>(r) * kWidth + made[r]++, false});
      }
      std::sort(step.begin(), step.end());
      more = !step.empty();
      if (more) steps.push_back(std::move(step));
    }
  }
  for (const KindCase& c :
       {KindCase{sparse::PolicyKind::kDiagonal, 0.9}, KindCase{sparse::PolicyKind::kDiagonal, 0.75},
        KindCase{sparse::PolicyKind::kDiagonalSink4, 0.8}, KindCase{sparse::PolicyKind::kStreamingLlm, 0.85},
        KindCase{sparse::PolicyKind::kSlidingWindow, 0.9}}) {
    const int layers = 2, kvh = 3, heads = layers * kvh;
    sparse::PolicyParams params;
    params.kind = c.kind;
    params.sparsity = c.sparsity;
    absl::StatusOr<sparse::ResolvedPolicy> policy = sparse::ResolvePolicy(params, sparse::SquareGrid(kGridLdec));
    ASSERT_TRUE(policy.ok()) << policy.status();
    const sparse::PolicyLayout layout = sparse::LayoutFor(*policy);
    const int stride = layout.max_attended;
    std::vector<int32_t> ints(static_cast<size_t>(heads) * layout.ints_per_head);
    std::vector<float> floats(static_cast<size_t>(heads) * std::max(layout.floats_per_head, 1));
    Dev<int32_t> d_ints(ints.size());
    Dev<float> d_floats(floats.size());
    RowPlan plan;
    plan.policy = *policy;
    plan.layout = layout;
    plan.sparse = 1;
    plan.out_of_order = 1;
    ASSERT_EQ(InitPolicyState(*policy, layout, heads, d_ints.p, d_floats.p, 0), cudaSuccess);
    for (int h = 0; h < heads; ++h) {
      sparse::InitState(
          *policy, layout,
          {ints.data() + int64_t{h} * layout.ints_per_head, floats.data() + int64_t{h} * layout.floats_per_head}, h);
    }
    Dev<int32_t> d_slots(heads), d_counts(heads), d_att(static_cast<size_t>(heads) * stride), d_argmin(heads);
    Dev<RowPlan> d_plan(1);
    PlanBuffers buf{d_slots.p, d_counts.p, d_att.p, stride};
    std::mt19937 rng(static_cast<uint32_t>(c.kind) * 17 + 3);
    std::uniform_int_distribution<int> level(1, 6);  // coarse weights: many exact ties
    std::vector<int32_t> att(stride), argmin(heads, -1);
    for (const auto& step : steps) {
      for (auto [t, provisional] : step) {
        plan.step = t;
        plan.writes = provisional ? 0 : 1;
        d_plan.Put({plan});
        ASSERT_EQ(PlanDecodeStep(d_plan.p, 1, layers, kvh, d_ints.p, d_floats.p, buf, 0), cudaSuccess);
        const auto slots = d_slots.Get(heads);
        const auto counts = d_counts.Get(heads);
        const auto attended = d_att.Get(static_cast<size_t>(heads) * stride);
        for (int h = 0; h < heads; ++h) {  // layer-major, one row: at == h
          sparse::PolicyState s{ints.data() + int64_t{h} * layout.ints_per_head,
                                floats.data() + int64_t{h} * layout.floats_per_head};
          int32_t slot = -1;
          const int32_t n = sparse::PlanQuery(*policy, layout, s, t, false, !provisional, &slot, att.data());
          ASSERT_GE(n, 0) << sparse::PolicyName(c.kind) << " t " << t;
          ASSERT_EQ(counts[h], n) << sparse::PolicyName(c.kind) << " t " << t << " head " << h;
          ASSERT_EQ(slots[h], slot) << "t " << t;
          for (int i = 0; i < n; ++i) ASSERT_EQ(attended[h * stride + i], att[i]) << "t " << t << " entry " << i;
          std::vector<float> probs(n);
          for (int i = 0; i < n; ++i) probs[i] = static_cast<float>(level(rng)) / 8.0f;
          argmin[h] = sparse::ArgminFrom(probs.data(), sparse::OutOfOrderSinkEntries(*policy, att.data(), n), n);
          if (sparse::ObserveNeeded(*policy, layout, s, t))
            sparse::ObserveStep(*policy, layout, s, t, att.data(), probs.data(), n);
        }
        d_argmin.Put(argmin);
        ASSERT_EQ(ApplyDiagonalSelections(d_plan.p, 1, layers, kvh, d_ints.p, d_floats.p, buf, d_argmin.p, 0),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_EQ(d_ints.Get(ints.size()), ints) << sparse::PolicyName(c.kind) << ": state differs after t " << t;
      }
    }
  }
}

}  // namespace
}  // namespace argen::kernels
