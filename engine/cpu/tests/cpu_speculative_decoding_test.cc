// Speculative decoding (speculative_window, engine/model/speculative.h) on
// the CPU backend with the tiny Janus-shaped checkpoint (an 8 x 8 grid):
// * a window-w run of the generic engine (which re-feeds rejected drafts'
//   indices: StepPlan::rewinds) equals a reference loop that never rewinds:
//   every pass on fresh rows, the made tokens fed one per call and the pass's
//   queries one per call, verified by the same rule. So a rewritten index
//   computes exactly what a fresh one does (no stale K/V is ever read);
// * a window of 1 is sequential decoding exactly (the same tokens, 64 steps);
// * the same (seed, window) gives the same image; the metrics add up;
// * bad windows, sparse policies and parallel_window with it are refused
//   naming speculative_window; rewinding plans are checked like any other.
// (The acceptance rule's exactness: engine/model/tests/speculative_test.cc.)
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gemm.h"
#include "engine/model/create_engine.h"
#include "engine/model/speculative.h"
#include "gtest/gtest.h"

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

class CpuSpeculativeDecodingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Row-invariant GEMMs: a query computes the same bits alone or batched.
    SetRowInvariantGemms(true);
    engine::EngineOptions options;
    options.model_dir = TinyDir();
    options.threads = 2;
    absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options, ByteEncoder());
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
  }
  void TearDown() override { SetRowInvariantGemms(false); }

  engine::GenerationRequest Request(int32_t window, uint64_t seed = 7, int32_t images = 1) {
    engine::GenerationRequest r;
    r.prompt = "a red bird";
    r.num_images = images;
    r.sampling.seed = seed;
    r.sampling.cfg_weight = 2.0f;
    r.speculative_window = window;
    return r;
  }

  struct EngineRun {
    std::vector<std::vector<int32_t>> tokens;
    int32_t steps = 0;
    int64_t proposed = 0, accepted = 0;
  };
  EngineRun Run(const engine::GenerationRequest& r) {
    EngineRun run;
    absl::StatusOr<engine::PreparedRequest> p = engine_->Prepare(r);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return run;
    engine::RequestPtr request = engine::MakeRequest(*p);
    absl::StatusOr<engine::GroupId> id = engine_->Add(request);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return run;
    int32_t last_done = 0;
    for (int i = 0; i < 1000 && !request->progress.finished; ++i) {
      absl::StatusOr<engine::StepReport> s = engine_->Step();
      EXPECT_TRUE(s.ok()) << s.status();
      if (!s.ok()) break;
      const engine::RequestProgress& progress = request->progress;
      EXPECT_GT(progress.tokens_done, last_done);  // every step makes a token of every image
      last_done = progress.tokens_done;
      for (const std::vector<int32_t>& t : progress.tokens) EXPECT_EQ(static_cast<int32_t>(t.size()), last_done);
    }
    EXPECT_TRUE(request->progress.finished);
    run.tokens = request->progress.tokens;
    run.steps = request->progress.steps;
    run.proposed = request->progress.drafts_proposed;
    run.accepted = request->progress.drafts_accepted;
    engine_->Remove(*id);
    EXPECT_EQ(engine_->KvBytesInUse(), 0);
    return run;
  }

  // The reference: one image, no rewinds. Returns its tokens and passes.
  absl::StatusOr<std::pair<std::vector<int32_t>, int32_t>> Reference(const engine::GenerationRequest& r) {
    absl::StatusOr<engine::PreparedRequest> p = engine_->Prepare(r);
    if (!p.ok()) return p.status();
    model::Backend& backend = engine_->backend();
    const int32_t vocab = backend.spec().logits();
    const int32_t offset = backend.spec().input.sampled_offset;
    const engine::SamplingParams& sp = r.sampling;
    const model::SamplingSpec spec{sp.temperature, sp.top_k, sp.top_p, sp.cfg_weight, sp.seed, 0};
    const std::vector<model::SamplingSpec> sampling = {spec};
    model::SpeculativeImage image(p->policy.l_dec, r.speculative_window, vocab, offset, {}, spec);
    model::HostSampler sampler(vocab);
    std::vector<float> pass_logits, one(2 * static_cast<size_t>(vocab));
    bool started = false;
    while (!started || !image.done()) {
      std::vector<model::RowId> rows;
      for (const std::vector<int32_t>* ids : {&p->cond_ids, &p->uncond_ids}) {
        absl::StatusOr<model::RowId> row = engine_->kv().AllocateRow(static_cast<int32_t>(ids->size()), p->policy);
        if (!row.ok()) return row.status();
        rows.push_back(*row);
      }
      std::vector<int32_t> tokens = p->cond_ids, sampled(1);
      tokens.insert(tokens.end(), p->uncond_ids.begin(), p->uncond_ids.end());
      const std::vector<int32_t> offsets = {0, static_cast<int32_t>(p->cond_ids.size()),
                                            static_cast<int32_t>(tokens.size())};
      if (absl::Status s = backend.Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr}); !s.ok()) return s;
      if (!started) {
        image.Start(offset + sampled[0]);
        started = true;
      }
      // The made tokens before the pass, then the pass's queries, one call each.
      const auto feed = [&](int32_t input, int32_t index, float* logits) -> absl::Status {
        const std::vector<int32_t> inputs = {input}, steps = {index};
        return backend.Decode({rows, inputs, steps, sampling}, {sampled, logits});
      };
      for (int32_t t = 0; t < image.first_index(); ++t) {
        if (absl::Status s = feed(image.tokens()[t], t, one.data()); !s.ok()) return s;
      }
      pass_logits.assign(2 * static_cast<size_t>(image.queries()) * vocab, 0.0f);
      for (int32_t j = 0; j < image.queries(); ++j) {
        if (absl::Status s = feed(image.input(j), image.first_index() + j, pass_logits.data() + 2 * j * vocab);
            !s.ok()) {
          return s;
        }
      }
      for (model::RowId row : rows) engine_->kv().FreeRow(row);
      image.Verify(pass_logits.data(), sampler);
    }
    return std::make_pair(image.tokens(), image.passes() + 1);  // + the prefill
  }

  std::unique_ptr<model::GenericEngine> engine_;
};

TEST_F(CpuSpeculativeDecodingTest, WindowRunsEqualAReferenceThatNeverRewinds) {
  for (int32_t window : {2, 4, 7}) {
    const engine::GenerationRequest r = Request(window);
    const EngineRun got = Run(r);
    absl::StatusOr<std::pair<std::vector<int32_t>, int32_t>> want = Reference(r);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got.tokens.size(), 1u);
    EXPECT_EQ(got.tokens[0], want->first) << "window " << window;
    EXPECT_EQ(got.steps, want->second) << "window " << window;
    EXPECT_LE(got.steps, 64) << "window " << window;
    EXPECT_GT(got.proposed, 0);
    EXPECT_LE(got.accepted, got.proposed);
  }
}

TEST_F(CpuSpeculativeDecodingTest, WindowOneIsSequentialDecoding) {
  const EngineRun sequential = Run(Request(0));
  const EngineRun one = Run(Request(1));
  EXPECT_EQ(one.tokens, sequential.tokens);
  EXPECT_EQ(sequential.steps, 64);
  EXPECT_EQ(one.steps, 64);
  EXPECT_EQ(one.proposed, 0);
}

TEST_F(CpuSpeculativeDecodingTest, SameSeedAndWindowSameImagesAndGreedyConverges) {
  const EngineRun a = Run(Request(4, 11, 2));
  const EngineRun b = Run(Request(4, 11, 2));
  ASSERT_EQ(a.tokens.size(), 2u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_NE(a.tokens[0], a.tokens[1]);
  // Greedy: Jacobi decoding's fixed point, the sequential argmax chain, in fewer steps.
  engine::GenerationRequest greedy = Request(8);
  greedy.sampling.temperature = 0.0f;
  engine::GenerationRequest greedy_sequential = greedy;
  greedy_sequential.speculative_window = 0;
  const EngineRun g = Run(greedy);
  EXPECT_EQ(g.tokens, Run(greedy_sequential).tokens);
  EXPECT_LT(g.steps, 64);
  EXPECT_GT(g.accepted, 0);
}

TEST_F(CpuSpeculativeDecodingTest, BadWindowsAreRefusedNamingTheField) {
  for (int32_t window : {-1, 33}) {
    absl::StatusOr<engine::PreparedRequest> p = engine_->Prepare(Request(window));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << window;
    EXPECT_EQ(p.status().message().rfind("speculative_window: must be in [0, 32]", 0), 0u) << p.status();
  }
  engine::GenerationRequest sparse = Request(4);
  sparse.policy.kind = sparse::PolicyKind::kDiagonal;
  sparse.policy.sparsity = 0.5;
  absl::StatusOr<engine::PreparedRequest> p = engine_->Prepare(sparse);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message().rfind("speculative_window: speculative decoding needs the dense policy", 0), 0u)
      << p.status();
  engine::GenerationRequest both = Request(4);
  both.parallel_window = 2;
  p = engine_->Prepare(both);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message().rfind("speculative_window: speculative decoding does not combine", 0), 0u)
      << p.status();
}

// A rewinding plan (StepPlan::rewinds) may start an in-order row below its
// next step, never above it, and only where the plan says so and the policy
// can step back (dense); a refused plan changes nothing.
TEST_F(CpuSpeculativeDecodingTest, RewindingPlansAreChecked) {
  model::Backend& backend = engine_->backend();
  const auto rows_of = [&](const sparse::ResolvedPolicy& policy, const engine::PreparedRequest& p) {
    std::vector<model::RowId> rows;
    for (const std::vector<int32_t>* ids : {&p.cond_ids, &p.uncond_ids}) {
      rows.push_back(*engine_->kv().AllocateRow(static_cast<int32_t>(ids->size()), policy));
    }
    std::vector<int32_t> tokens = p.cond_ids, sampled(1);
    tokens.insert(tokens.end(), p.uncond_ids.begin(), p.uncond_ids.end());
    const std::vector<int32_t> offsets = {0, static_cast<int32_t>(p.cond_ids.size()),
                                          static_cast<int32_t>(tokens.size())};
    const std::vector<model::SamplingSpec> sampling = {model::SamplingSpec{}};
    EXPECT_TRUE(backend.Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr}).ok());
    return rows;
  };
  const auto forward = [&](const std::vector<model::RowId>& rows, int32_t first, int32_t n, bool rewind) {
    model::StepPlanBuilder b;
    if (rewind) b.AllowRewind();
    for (model::RowId r : rows) {
      b.AddRow(r);
      for (int32_t j = 0; j < n; ++j) b.AddQuery(model::QueryKind::kDecode, 10, first + j);
    }
    b.AddSampling(model::SamplingSpec{});
    std::vector<int32_t> sampled(n);
    return backend.Forward(b.Plan(), {sampled, nullptr});
  };
  const auto next_step = [&](const std::vector<model::RowId>& rows) {
    const int32_t a = static_cast<CpuBackend&>(backend).InspectRow(rows[0])->next_step;
    EXPECT_EQ(static_cast<CpuBackend&>(backend).InspectRow(rows[1])->next_step, a);
    return a;
  };
  const absl::StatusOr<engine::PreparedRequest> dense = engine_->Prepare(Request(0));
  ASSERT_TRUE(dense.ok()) << dense.status();
  const std::vector<model::RowId> rows = rows_of(dense->policy, *dense);
  ASSERT_TRUE(forward(rows, 0, 4, false).ok());
  EXPECT_EQ(next_step(rows), 4);
  absl::Status s = forward(rows, 1, 2, false);  // not without the plan's leave
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("decode index 1 but the row expects 4"), std::string::npos) << s;
  s = forward(rows, 5, 1, true);  // never above the next step
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(next_step(rows), 4);
  ASSERT_TRUE(forward(rows, 1, 2, true).ok());
  EXPECT_EQ(next_step(rows), 3);
  ASSERT_TRUE(forward(rows, 3, 2, true).ok());  // at the next step: an ordinary step
  EXPECT_EQ(next_step(rows), 5);
  for (model::RowId r : rows) engine_->kv().FreeRow(r);

  engine::GenerationRequest diagonal = Request(0);
  diagonal.policy.kind = sparse::PolicyKind::kDiagonal;
  diagonal.policy.sparsity = 0.5;
  const absl::StatusOr<engine::PreparedRequest> sparse_request = engine_->Prepare(diagonal);
  ASSERT_TRUE(sparse_request.ok()) << sparse_request.status();
  const std::vector<model::RowId> sparse_rows = rows_of(sparse_request->policy, *sparse_request);
  ASSERT_TRUE(forward(sparse_rows, 0, 4, false).ok());
  s = forward(sparse_rows, 1, 2, true);  // a ring cannot step back
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("rewinding"), std::string::npos) << s;
  EXPECT_EQ(next_step(sparse_rows), 4);
  for (model::RowId r : sparse_rows) engine_->kv().FreeRow(r);
}

}  // namespace
}  // namespace argen::cpu
