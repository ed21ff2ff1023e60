// Parallel decoding (parallel_window, engine/model/parallel_schedule.h) on the
// CPU backend with the tiny Janus-shaped checkpoint (an 8 x 8 grid, no row
// breaks, so rows start with a provisional query):
// * a window-s run of the generic engine equals an independent reference
//   loop (engine/model/tests/parallel_reference.h: the rules written again,
//   one query per backend call): the same tokens, made in the same steps;
// * no query reads an unwritten slot: with every slot of the rows poisoned
//   with NaN before the prefill, the run stays finite (a read would make the
//   logits NaN, which fails the step);
// * a window of a whole row is today's order: the same tokens as window 0;
// * the same three for the sparse policies that plan out of order (diagonal
//   90%, the server's main one, and streaming_llm; docs/policies.md): the
//   engine equals the reference loop, poisoned slots stay unread, a whole-row
//   window is window 0's image;
// * windows the engine cannot run are refused naming parallel_window, and
//   out-of-order plans are refused for the policies without a definition;
// * Lumina-mGPT's sequence (new lines: no stand-ins) equals the reference too;
// * so do LlamaGen c2i's 2-D RoPE grid (5 x 5 codes behind a class id: each
//   query's row and column rotations from its true raster index) and Anole's
//   32 x 32 grid (Meta's layout), dense and diagonal, with the tiny
//   checkpoints of their published layouts.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gemm.h"
#include "engine/model/create_engine.h"
#include "engine/model/tests/parallel_reference.h"
#include "engine/request_rules.h"
#include "gtest/gtest.h"
#include "tests/support/lumina_sizes.h"

namespace argen::cpu {
namespace {

std::string TinyDir() {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/goldens/tiny/tiny-gqa-sharded";
}

model::PromptEncoder ByteEncoder() {
  return [](const model::PromptText& text) -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
    std::vector<int32_t> cond = {1}, uncond = {1};
    for (unsigned char c : text.caption) {
      cond.push_back(5 + c);
      uncond.push_back(0);
    }
    cond.push_back(2);
    uncond.push_back(2);
    return std::make_pair(cond, uncond);
  };
}

class CpuParallelDecodingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Row-invariant GEMMs: a query computes the same bits alone or batched
    // (the reference runs one query per call, the engine a step's at once).
    SetRowInvariantGemms(true);
    engine::EngineOptions options;
    options.model_dir = TinyDir();
    options.threads = 2;
    absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options, ByteEncoder());
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
  }
  void TearDown() override { SetRowInvariantGemms(false); }

  static engine::GenerationRequest Sparse(engine::GenerationRequest r, sparse::PolicyKind kind, double sparsity) {
    r.policy.kind = kind;
    r.policy.sparsity = sparsity;
    return r;
  }

  engine::GenerationRequest Request(int32_t window, uint64_t seed = 7, int32_t images = 1) {
    engine::GenerationRequest r;
    r.prompt = "a red bird";
    r.num_images = images;
    r.sampling.seed = seed;
    r.parallel_window = window;
    return r;
  }

  using EngineRun = model::testing::EngineRun;
  EngineRun Run(const engine::GenerationRequest& r) {
    absl::StatusOr<engine::PreparedRequest> p = engine_->Prepare(r);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {};
    absl::StatusOr<EngineRun> run = model::testing::RunEngineRequest(*engine_, *p);
    EXPECT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(engine_->KvBytesInUse(), 0);
    return run.ok() ? *std::move(run) : EngineRun{};
  }

  model::testing::ReferenceSetup Setup(const engine::GenerationRequest& r) {
    absl::StatusOr<engine::PreparedRequest> p = engine_->Prepare(r);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? model::testing::SetupOf(*engine_, *p) : model::testing::ReferenceSetup{};
  }

  std::unique_ptr<model::GenericEngine> engine_;
};

TEST_F(CpuParallelDecodingTest, WindowRunsEqualAnIndependentReferenceLoop) {
  for (int32_t window : {1, 2, 3, 5}) {
    const engine::GenerationRequest r = Request(window);
    const EngineRun got = Run(r);
    absl::StatusOr<model::testing::ReferenceImage> want =
        model::testing::RunParallelReference(engine_->backend(), engine_->kv(), Setup(r));
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got.tokens.size(), 1u);
    EXPECT_EQ(got.tokens[0], want->tokens) << "window " << window;
    EXPECT_EQ(got.leading_runs, want->leading_runs) << "window " << window;
    EXPECT_EQ(got.steps, want->steps) << "window " << window;
    // Fewer steps than tokens: 2 W + (H - 2) s for s < W (ZipAR's count) on the 8 x 8 grid.
    EXPECT_EQ(got.steps, 2 * 8 + 6 * window) << "window " << window;
  }
}

// Diagonal at 90% (N_att 6, N_r 32 on the 64-token grid: the window wraps and
// the skip set fills while rows are in flight) and streaming_llm at 75%.
TEST_F(CpuParallelDecodingTest, SparseWindowRunsEqualTheReferenceLoop) {
  for (const auto& [kind, sparsity] :
       {std::pair{sparse::PolicyKind::kDiagonal, 0.9}, std::pair{sparse::PolicyKind::kStreamingLlm, 0.75}}) {
    for (int32_t window : {2, 4}) {
      const engine::GenerationRequest r = Sparse(Request(window), kind, sparsity);
      const EngineRun got = Run(r);
      absl::StatusOr<model::testing::ReferenceImage> want =
          model::testing::RunParallelReference(engine_->backend(), engine_->kv(), Setup(r));
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_EQ(got.tokens.size(), 1u);
      EXPECT_EQ(got.tokens[0], want->tokens) << sparse::PolicyName(kind) << " window " << window;
      EXPECT_EQ(got.leading_runs, want->leading_runs) << "window " << window;
      EXPECT_EQ(got.steps, 2 * 8 + 6 * window) << "window " << window;
    }
  }
  // The context differs from the dense run's, so the tokens do.
  EXPECT_NE(Run(Sparse(Request(2), sparse::PolicyKind::kDiagonal, 0.9)).tokens, Run(Request(2)).tokens);
}

TEST_F(CpuParallelDecodingTest, SparseQueriesReadNoUnwrittenOrEvictedSlot) {
  CpuBackend& cpu = static_cast<CpuBackend&>(engine_->backend());
  for (const auto& [kind, sparsity] :
       {std::pair{sparse::PolicyKind::kDiagonal, 0.9}, std::pair{sparse::PolicyKind::kStreamingLlm, 0.75}}) {
    model::testing::ReferenceSetup s = Setup(Sparse(Request(2), kind, sparsity));
    int32_t poisoned = 0;
    s.on_placed = [&](model::RowId id) {
      KvRow& row = const_cast<KvRow&>(*cpu.InspectRow(id));
      std::fill(row.k.begin(), row.k.end(), std::numeric_limits<float>::quiet_NaN());
      std::fill(row.v.begin(), row.v.end(), std::numeric_limits<float>::quiet_NaN());
      ++poisoned;
    };
    absl::StatusOr<model::testing::ReferenceImage> got = model::testing::RunParallelReference(cpu, engine_->kv(), s);
    ASSERT_TRUE(got.ok()) << sparse::PolicyName(kind) << ": " << got.status();  // NaN logits would fail a step
    EXPECT_EQ(poisoned, 2);
    for (int32_t t : got->tokens) EXPECT_GE(t, 0);
  }
}

TEST_F(CpuParallelDecodingTest, ASparseWholeRowWindowIsTodaysOrder) {
  const EngineRun sequential = Run(Sparse(Request(0), sparse::PolicyKind::kDiagonal, 0.9));
  const EngineRun whole_row = Run(Sparse(Request(8), sparse::PolicyKind::kDiagonal, 0.9));
  EXPECT_EQ(whole_row.tokens, sequential.tokens);
  EXPECT_EQ(whole_row.steps, 64);
}

TEST_F(CpuParallelDecodingTest, ImagesOfARequestAndTheirSeedsAreIndependentOfTheWindowRun) {
  // Two images of one request decode as two lone requests with their image index's stream.
  const EngineRun both = Run(Request(2, 11, 2));
  ASSERT_EQ(both.tokens.size(), 2u);
  const EngineRun again = Run(Request(2, 11, 2));
  EXPECT_EQ(both.tokens, again.tokens);  // the same (seed, window): the same image every time
  EXPECT_NE(both.tokens[0], both.tokens[1]);
  const EngineRun other_window = Run(Request(3, 11, 2));
  EXPECT_NE(both.tokens, other_window.tokens);  // a window changes the context, so the tokens
}

TEST_F(CpuParallelDecodingTest, NoQueryReadsAnUnwrittenSlot) {
  // Every K/V value of both rows is NaN until a query writes it.
  CpuBackend& cpu = static_cast<CpuBackend&>(engine_->backend());
  model::testing::ReferenceSetup s = Setup(Request(2));
  std::vector<model::RowId> poisoned;
  s.on_placed = [&](model::RowId id) {
    KvRow& row = const_cast<KvRow&>(*cpu.InspectRow(id));
    std::fill(row.k.begin(), row.k.end(), std::numeric_limits<float>::quiet_NaN());
    std::fill(row.v.begin(), row.v.end(), std::numeric_limits<float>::quiet_NaN());
    poisoned.push_back(id);
  };
  absl::StatusOr<model::testing::ReferenceImage> got = model::testing::RunParallelReference(cpu, engine_->kv(), s);
  ASSERT_TRUE(got.ok()) << got.status();  // NaN logits would fail a step
  ASSERT_EQ(poisoned.size(), 2u);
  for (int32_t t : got->tokens) EXPECT_GE(t, 0);
}

TEST_F(CpuParallelDecodingTest, AWholeRowWindowIsTodaysOrder) {
  const EngineRun sequential = Run(Request(0));
  const EngineRun whole_row = Run(Request(8));
  EXPECT_EQ(whole_row.tokens, sequential.tokens);
  EXPECT_EQ(sequential.steps, 64);
  EXPECT_EQ(whole_row.steps, 64);
}

TEST_F(CpuParallelDecodingTest, BadWindowsAreRefusedNamingTheField) {
  for (int32_t window : {-1, 9, 1 << 20}) {
    absl::StatusOr<engine::PreparedRequest> p = engine_->Prepare(Request(window));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << window;
    EXPECT_EQ(p.status().message().rfind("parallel_window: must be in [0, 8]", 0), 0u) << p.status();
  }
  // The policies without an out-of-order definition are refused naming the policy.
  for (sparse::PolicyKind kind :
       {sparse::PolicyKind::kH2O, sparse::PolicyKind::kTova, sparse::PolicyKind::kAlisa,
        sparse::PolicyKind::kGridWindow, sparse::PolicyKind::kDiagonalGrid, sparse::PolicyKind::kLineEvict}) {
    engine::GenerationRequest refused = Sparse(Request(2), kind, 0.5);
    absl::StatusOr<engine::PreparedRequest> p = engine_->Prepare(refused);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << sparse::PolicyName(kind);
    EXPECT_EQ(p.status().message().rfind("parallel_window: parallel decoding runs with the dense, sliding_window, "
                                         "streaming_llm, diagonal and diagonal_sink4 policies",
                                         0),
              0u)
        << p.status();
    EXPECT_NE(p.status().message().find("policy " + std::string(sparse::PolicyName(kind)) + " keeps"),
              std::string::npos)
        << p.status();
    refused.parallel_window = 0;
    EXPECT_TRUE(engine_->Prepare(refused).ok()) << sparse::PolicyName(kind);
  }
  for (sparse::PolicyKind kind : {sparse::PolicyKind::kSlidingWindow, sparse::PolicyKind::kStreamingLlm,
                                  sparse::PolicyKind::kDiagonal, sparse::PolicyKind::kDiagonalSink4}) {
    EXPECT_TRUE(engine_->Prepare(Sparse(Request(2), kind, 0.5)).ok()) << sparse::PolicyName(kind);
  }
}

TEST_F(CpuParallelDecodingTest, OutOfOrderPlansAreCheckedAndChangeNothing) {
  model::Backend& backend = engine_->backend();
  const model::testing::ReferenceSetup s = Setup(Request(2));
  std::vector<model::RowId> rows;
  for (const std::vector<int32_t>* ids : {&s.cond, &s.uncond}) {
    rows.push_back(*engine_->kv().AllocateRow(static_cast<int32_t>(ids->size()), s.policy));
  }
  {
    std::vector<int32_t> tokens = s.cond, sampled(1);
    tokens.insert(tokens.end(), s.uncond.begin(), s.uncond.end());
    const std::vector<int32_t> offsets = {0, static_cast<int32_t>(s.cond.size()), static_cast<int32_t>(tokens.size())};
    const std::vector<model::SamplingSpec> sampling = {s.sampling};
    ASSERT_TRUE(backend.Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr}).ok());
  }
  const auto forward = [&](std::vector<model::Query> queries, bool allow) {
    model::StepPlanBuilder b;
    if (allow) b.AllowOutOfOrder();
    for (model::RowId r : rows) {
      b.AddRow(r);
      for (const model::Query& q : queries) b.AddQuery(q.kind, q.input, q.index, q.provisional);
    }
    b.AddSampling(s.sampling);
    std::vector<int32_t> sampled(queries.size());
    return backend.Forward(b.Plan(), {sampled, nullptr});
  };
  constexpr model::QueryKind kD = model::QueryKind::kDecode;
  const auto expect_refused = [&](const absl::Status& st, const std::string& what) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(what), std::string::npos) << st;
    for (model::RowId r : rows) {
      const model::RowState& row = *static_cast<CpuBackend&>(backend).InspectRow(r);
      EXPECT_EQ(row.next_step, 0);
      EXPECT_TRUE(row.written.empty());
    }
  };
  // Out of order only where the plan says so.
  expect_refused(forward({{kD, 10, 3}}, false), "decode index 3 but the row expects 0");
  expect_refused(forward({{kD, 10, 0, true}}, false), "decode index 0 (provisional) but the row expects 0");
  expect_refused(forward({{kD, 10, 3}, {kD, 10, 2}}, true), "above the step's previous query");
  expect_refused(forward({{kD, 10, 64}}, true), "must be in [0, l_dec 64)");
  ASSERT_TRUE(forward({{kD, 10, 0}, {kD, 10, 5}, {kD, 10, 9, true}}, true).ok());
  for (model::RowId r : rows) {
    const model::RowState& row = *static_cast<CpuBackend&>(backend).InspectRow(r);
    EXPECT_EQ(row.next_step, 1);
    EXPECT_TRUE(row.Written(5));
    EXPECT_FALSE(row.Written(9));  // provisional: not written
  }
  const absl::Status again = forward({{kD, 10, 5}}, true);
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(again.message().find("not yet written"), std::string::npos) << again;
  for (model::RowId r : rows) engine_->kv().FreeRow(r);
}

TEST_F(CpuParallelDecodingTest, PoliciesWithoutADefinitionRefuseOutOfOrderPlans) {
  sparse::PolicyParams params;
  params.kind = sparse::PolicyKind::kH2O;
  params.sparsity = 0.5;
  const sparse::ResolvedPolicy policy = *sparse::ResolvePolicy(params, sparse::SquareGrid(64));
  model::testing::ReferenceSetup sliding = Setup(Request(2));
  sliding.policy = policy;
  // Row 0 and row 1 run in order; row 2's provisional start is the first out-of-order query.
  absl::StatusOr<model::testing::ReferenceImage> run =
      model::testing::RunParallelReference(engine_->backend(), engine_->kv(), sliding);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(run.status().message().find("need a plan that allows them and a policy that plans them"), std::string::npos)
      << run.status();
}

// Lumina-mGPT's sequence (the shipped small model at 128 x 64: 4 rows of 8
// codes, a forced new line after each but the last): row r+1 starts once
// row r has `window` codes (its first input, the new line, is forced: no
// stand-in), the new lines sit at every row end, and the run equals the
// reference loop token for token and step for step, in (H - 1) s + W steps
// instead of L_dec.
TEST(CpuParallelLuminaTest, ParallelWindowEqualsTheReferenceLoop) {
  constexpr int32_t kW = 8, kH = 4, kNewLine = 1035;  // <reserved08799> in the small model's vocabulary
  SetRowInvariantGemms(true);
  test_support::RemovedDir temp{std::filesystem::temp_directory_path() /
                                ("parallel_lumina_" + std::to_string(::getpid()))};
  engine::EngineOptions options;
  options.model_dir = test_support::LuminaModelWithSizes(temp.path, {{kW * 16, kH * 16}}).string();
  options.threads = 2;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> made = model::CreateGenericEngine(options);
  ASSERT_TRUE(made.ok()) << made.status();
  model::GenericEngine& e = **made;
  const int32_t l_dec = e.info().image_tokens;
  ASSERT_EQ(l_dec, kH * (kW + 1) - 1);
  for (int32_t window : {1, 3}) {
    engine::GenerationRequest r;
    r.prompt = "a red circle";
    r.sampling.seed = 7;
    r.sampling.top_k = 0;
    r.parallel_window = window;
    absl::StatusOr<engine::PreparedRequest> p = e.Prepare(r);
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<model::testing::EngineRun> run = model::testing::RunEngineRequest(e, *p);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->tokens.size(), 1u);
    const std::vector<int32_t>& tokens = run->tokens[0];
    ASSERT_EQ(static_cast<int32_t>(tokens.size()), l_dec);
    for (int32_t t = kW; t < l_dec; t += kW + 1) EXPECT_EQ(tokens[t], kNewLine) << t;
    EXPECT_EQ(run->steps, (kH - 1) * window + kW) << window;

    model::testing::ReferenceSetup setup = model::testing::SetupOf(e, *p);  // period kW + 1: the new lines
    ASSERT_EQ(setup.period, kW + 1);
    setup.forced.assign(l_dec, -1);
    for (int32_t t = kW; t < l_dec; t += kW + 1) setup.forced[t] = kNewLine;
    absl::StatusOr<model::testing::ReferenceImage> want =
        model::testing::RunParallelReference(e.backend(), e.kv(), setup);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(tokens, want->tokens) << window;
    EXPECT_EQ(run->leading_runs, want->leading_runs) << window;
    EXPECT_EQ(run->steps, want->steps) << window;
  }
  SetRowInvariantGemms(false);
}

// The wave-3 code families' grids: the engine's window runs equal the
// reference loop (tokens, leading runs, steps: 2 W + (H - 2) s), dense and
// diagonal. LlamaGen c2i's tiny model: 5 x 5 codes, a class prompt; Anole's:
// 32 x 32 codes, window 8 (304 steps instead of 1,024), diagonal 95% at N_r
// 160 (five rows: the ring wraps while rows are in flight).
TEST(CpuParallelFamiliesTest, LlamaGenAndAnoleWindowsEqualTheReferenceLoop) {
  struct Case {
    std::string tiny_model;
    int32_t width, height, window;
    bool class_conditional;
  };
  SetRowInvariantGemms(true);
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  for (const Case& m : {Case{"tiny-llamagen-c2i", 5, 5, 2, true}, Case{"tiny-anole-meta", 32, 32, 8, false}}) {
    engine::EngineOptions options;
    options.model_dir = std::string(src ? src : ".") + "/tests/goldens/tiny/" + m.tiny_model;
    options.threads = 2;
    absl::StatusOr<std::unique_ptr<model::GenericEngine>> made = model::CreateGenericEngine(options);
    ASSERT_TRUE(made.ok()) << made.status();
    model::GenericEngine& e = **made;
    for (const bool diagonal : {false, true}) {
      SCOPED_TRACE(testing::Message() << m.tiny_model << (diagonal ? ", diagonal" : ", dense"));
      engine::GenerationRequest r;
      if (m.class_conditional) {
        r.class_id = 3;
      } else {
        r.prompt = "a red cube";
      }
      r.sampling = e.info().default_sampling;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = 11;
      r.parallel_window = m.window;
      if (diagonal) {
        r.policy.kind = sparse::PolicyKind::kDiagonal;
        r.policy.sparsity = 0.95;
        r.policy.n_recent = std::min(160, m.width * m.height / 2);
      }
      absl::StatusOr<engine::PreparedRequest> p = e.Prepare(r);
      ASSERT_TRUE(p.ok()) << p.status();
      absl::StatusOr<model::testing::EngineRun> got = model::testing::RunEngineRequest(e, *p);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->tokens.size(), 1u);
      absl::StatusOr<model::testing::ReferenceImage> want =
          model::testing::RunParallelReference(e.backend(), e.kv(), model::testing::SetupOf(e, *p));
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ(got->tokens[0], want->tokens);
      EXPECT_EQ(got->leading_runs, want->leading_runs);
      EXPECT_EQ(got->steps, want->steps);
      EXPECT_EQ(got->steps, 2 * m.width + (m.height - 2) * m.window);
      EXPECT_EQ(e.KvBytesInUse(), 0);
    }
  }
  SetRowInvariantGemms(false);
}

}  // namespace
}  // namespace argen::cpu
