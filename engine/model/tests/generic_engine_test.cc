// The generic engine over the CPU backend on a tiny checkpoint: determinism
// under continuous batching (same seed -> same tokens and image bytes alone
// or batched with other requests joining at other steps), step semantics,
// KV accounting and freeing, policies end to end, request validation.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/backend_registry.h"
#include "engine/model/create_engine.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/ssd_heads.h"
#include "gtest/gtest.h"
#include "kernels/sparse/policy.h"

namespace argen::model {
namespace {

std::string TinyDir(const std::string& name) {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/goldens/tiny/" + name;
}

// Caption -> ids without tokenizer.json: engine behaviour does not depend on
// how the ids were made (tokenization has its own tests). Bytes shifted into
// the tiny text vocabulary between a BOS-like 1 and an EOS-like 2; the
// uncond row keeps the ends and pads the inside with 0, like the official script.
PromptEncoder ByteEncoder() {
  return [](const PromptText& text) -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
    const std::string& caption = text.caption;
    std::vector<int32_t> cond = {1}, uncond = {1};
    for (unsigned char c : caption) {
      cond.push_back(5 + c);
      uncond.push_back(0);
    }
    cond.push_back(2);
    uncond.push_back(2);
    return std::make_pair(cond, uncond);
  };
}

std::unique_ptr<GenericEngine> MakeEngine(const std::string& checkpoint = "tiny-gqa-sharded",
                                          int32_t max_batch_rows = 64, bool share_prompt_kv = true,
                                          bool across_requests = false) {
  engine::EngineOptions options;
  options.model_dir = TinyDir(checkpoint);
  options.max_batch_rows = max_batch_rows;
  options.share_prompt_kv = share_prompt_kv;
  options.share_prompt_kv_across_requests = across_requests;
  absl::StatusOr<std::unique_ptr<GenericEngine>> e = CreateGenericEngine(options, ByteEncoder());
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

engine::GenerationRequest Request(const std::string& prompt, uint64_t seed, int32_t images = 1) {
  engine::GenerationRequest r;
  r.prompt = prompt;
  r.num_images = images;
  r.sampling.seed = seed;
  return r;
}

struct Result {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<engine::RgbImage> images;
};

// Runs `requests` with request i added before step join_step[i]; returns each
// one's result. After every step the pool holds exactly the running
// requests' own KV and the prompts they share; `peak_kv` (if set) gets the
// most it held.
std::vector<Result> RunRequests(GenericEngine& engine, const std::vector<engine::GenerationRequest>& requests,
                                const std::vector<int32_t>& join_step, int64_t* peak_kv = nullptr) {
  std::map<int32_t, engine::GroupId> ids;
  std::map<engine::GroupId, int64_t> own_kv;  // of the running ones
  std::vector<Result> results(requests.size());
  size_t done = 0;
  if (peak_kv != nullptr) *peak_kv = 0;
  for (int32_t step = 0; done < requests.size(); ++step) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (join_step[i] != step) continue;
      absl::StatusOr<engine::PreparedRequest> p = engine.Prepare(requests[i]);
      EXPECT_TRUE(p.ok()) << p.status();
      EXPECT_TRUE(engine.CanAdd(*p));
      const int64_t before = engine.KvBytesInUse();
      absl::StatusOr<engine::GroupId> id = engine.Add(*p);
      EXPECT_TRUE(id.ok()) << id.status();
      EXPECT_LE(engine.KvBytesInUse() - before, p->kv_bytes) << "request " << i << " took more than its kv_bytes";
      EXPECT_GE(engine.KvBytesInUse() - before, p->own_kv_bytes);
      ids[static_cast<int32_t>(i)] = *id;
      own_kv[*id] = p->own_kv_bytes;
    }
    if (peak_kv != nullptr) *peak_kv = std::max(*peak_kv, engine.KvBytesInUse());
    absl::StatusOr<engine::StepReport> report = engine.Step();
    EXPECT_TRUE(report.ok()) << report.status();
    if (!report.ok()) return results;
    for (engine::GroupId finished : report->finished) {
      for (auto [i, id] : ids) {
        if (id != finished) continue;
        absl::StatusOr<engine::GroupState> state = engine.State(id);
        EXPECT_TRUE(state.ok());
        results[i].tokens = state->tokens;
        absl::StatusOr<std::vector<engine::RgbImage>> images = engine.DecodeImages(state->tokens);
        EXPECT_TRUE(images.ok()) << images.status();
        results[i].images = *images;
        engine.Remove(id);
        own_kv.erase(id);
        ++done;
      }
    }
    int64_t running_own = 0;
    for (auto [id, bytes] : own_kv) running_own += bytes;
    EXPECT_EQ(engine.KvBytesInUse(), running_own + engine.SharedKvBytes()) << "step " << step;
    EXPECT_LT(step, 1000) << "generation does not finish";
    if (step >= 1000) break;
  }
  return results;
}

TEST(GenericEngineTest, SameSeedSameImageAloneOrBatched) {
  const engine::GenerationRequest a = Request("a red cube on a table", 7, 2);
  std::unique_ptr<GenericEngine> alone_engine = MakeEngine();
  ASSERT_NE(alone_engine, nullptr);
  const std::vector<Result> alone = RunRequests(*alone_engine, {a}, {0});
  ASSERT_EQ(alone[0].tokens.size(), 2u);
  ASSERT_EQ(alone[0].tokens[0].size(), 64u);
  EXPECT_NE(alone[0].tokens[0], alone[0].tokens[1]) << "the two images must use different streams";

  // Batched: other prompts, seeds, image counts and policies, joining before,
  // with and after it.
  engine::GenerationRequest b = Request("two birds", 3, 1);
  engine::GenerationRequest c = Request("a very long caption about a quiet harbour at dawn", 99, 3);
  c.policy.kind = sparse::PolicyKind::kDiagonal;
  c.policy.sparsity = 0.5;
  engine::GenerationRequest d = Request("x", 7, 1);  // same seed as a, other prompt
  std::unique_ptr<GenericEngine> batched_engine = MakeEngine();
  ASSERT_NE(batched_engine, nullptr);
  const std::vector<Result> batched = RunRequests(*batched_engine, {b, c, a, d}, {0, 3, 5, 5});
  EXPECT_EQ(batched[2].tokens, alone[0].tokens);
  ASSERT_EQ(batched[2].images.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(batched[2].images[i].rgb, alone[0].images[i].rgb) << "image " << i;
    EXPECT_EQ(batched[2].images[i].width, 32);
  }
  EXPECT_NE(batched[3].tokens[0], alone[0].tokens[0]) << "another prompt, same seed";
  EXPECT_EQ(batched[1].tokens.size(), 3u);
  EXPECT_EQ(batched_engine->KvBytesInUse(), 0);
  EXPECT_EQ(batched_engine->RunningRows(), 0);
}

TEST(GenericEngineTest, SmallBatchLimitSplitsStepsWithoutChangingTokens) {
  const engine::GenerationRequest a = Request("a red cube on a table", 11, 1);
  const engine::GenerationRequest b = Request("green hills", 12, 2);
  std::unique_ptr<GenericEngine> wide = MakeEngine("tiny-mha", 64);
  std::unique_ptr<GenericEngine> narrow = MakeEngine("tiny-mha", 4);  // one group per call
  ASSERT_NE(wide, nullptr);
  ASSERT_NE(narrow, nullptr);
  const std::vector<Result> w = RunRequests(*wide, {a, b}, {0, 1});
  const std::vector<Result> n = RunRequests(*narrow, {a, b}, {0, 1});
  EXPECT_EQ(w[0].tokens, n[0].tokens);
  EXPECT_EQ(w[1].tokens, n[1].tokens);
}

TEST(GenericEngineTest, PromptSharingChangesNoTokenOnlyTheKv) {
  std::unique_ptr<GenericEngine> shared = MakeEngine("tiny-gqa-sharded", 64, true);
  std::unique_ptr<GenericEngine> copies = MakeEngine("tiny-gqa-sharded", 64, false);
  ASSERT_NE(shared, nullptr);
  ASSERT_NE(copies, nullptr);
  // Requests of 3 and 1 images joining at different steps, a sparse one among them.
  engine::GenerationRequest sparse_request = Request("a red fox", 5, 3);
  sparse_request.policy.kind = sparse::PolicyKind::kDiagonal;
  sparse_request.policy.sparsity = 0.75;
  const std::vector<engine::GenerationRequest> requests = {Request("kv sharing", 3, 3), sparse_request,
                                                           Request("one", 9, 1)};
  const std::vector<Result> a = RunRequests(*shared, requests, {0, 2, 5});
  const std::vector<Result> b = RunRequests(*copies, requests, {0, 2, 5});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
    ASSERT_EQ(a[i].images.size(), b[i].images.size());
    for (size_t k = 0; k < a[i].images.size(); ++k) EXPECT_EQ(a[i].images[k].rgb, b[i].images[k].rgb);
  }
  EXPECT_EQ(shared->KvBytesInUse(), 0);
  // Admission counts the shared bytes once; one image has nothing to share.
  for (const engine::GenerationRequest& r : requests) {
    absl::StatusOr<engine::PreparedRequest> ps = shared->Prepare(r), pc = copies->Prepare(r);
    ASSERT_TRUE(ps.ok() && pc.ok());
    if (r.num_images == 1) {
      EXPECT_EQ(ps->kv_bytes, pc->kv_bytes);
    } else {
      EXPECT_LT(ps->kv_bytes, pc->kv_bytes);
    }
    absl::StatusOr<engine::GroupId> id = shared->Add(*ps);
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(shared->KvBytesInUse(), ps->kv_bytes);
    shared->Remove(*id);
    EXPECT_EQ(shared->KvBytesInUse(), 0);
  }
}

// Requests with the same guidance prompt (captions of one length), the same
// caption, other policies and KV formats, joining at different steps, read
// shared prompt rows; a narrow batch cap fills prompts in calls of their own.
TEST(GenericEngineTest, SharingAcrossRequestsChangesNoTokenOnlyTheKv) {
  std::unique_ptr<GenericEngine> across = MakeEngine("tiny-gqa-sharded", 64, true, true);
  std::unique_ptr<GenericEngine> narrow = MakeEngine("tiny-gqa-sharded", 4, true, true);
  std::unique_ptr<GenericEngine> within = MakeEngine("tiny-gqa-sharded", 64, true, false);
  ASSERT_NE(across, nullptr);
  ASSERT_NE(narrow, nullptr);
  ASSERT_NE(within, nullptr);
  engine::GenerationRequest sparse_request = Request("a red fox", 5, 1);  // the first one's caption
  sparse_request.policy.kind = sparse::PolicyKind::kDiagonal;
  sparse_request.policy.sparsity = 0.75;
  engine::GenerationRequest fp8_request = Request("a big owl", 6, 1);  // another format: its own prompt rows
  fp8_request.policy.kv_format = sparse::KvFormat::kFp8E4m3;
  const std::vector<engine::GenerationRequest> requests = {
      Request("a red fox", 3, 1), Request("blue bird", 4, 2), sparse_request, fp8_request, Request("a big owl", 8, 1),
      Request("green", 9, 1),     Request("a red fox", 10, 1)};
  const std::vector<int32_t> joins = {0, 0, 3, 3, 5, 6, 70};  // the last joins after the first finished
  int64_t peak_across = 0, peak_narrow = 0, peak_within = 0;
  const std::vector<Result> a = RunRequests(*across, requests, joins, &peak_across);
  const std::vector<Result> n = RunRequests(*narrow, requests, joins, &peak_narrow);
  const std::vector<Result> w = RunRequests(*within, requests, joins, &peak_within);
  ASSERT_EQ(a.size(), requests.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, w[i].tokens) << "request " << i;
    EXPECT_EQ(n[i].tokens, w[i].tokens) << "request " << i;
    ASSERT_EQ(a[i].images.size(), w[i].images.size());
    for (size_t k = 0; k < a[i].images.size(); ++k) EXPECT_EQ(a[i].images[k].rgb, w[i].images[k].rgb);
  }
  EXPECT_LT(peak_across, peak_within) << "six requests share one guidance prompt";
  EXPECT_EQ(across->KvBytesInUse(), 0);
  EXPECT_EQ(across->SharedKvBytes(), 0);
  EXPECT_EQ(narrow->KvBytesInUse(), 0);

  // Admission: a request whose prompts are resident takes its own rows only.
  absl::StatusOr<engine::PreparedRequest> first = across->Prepare(Request("a red fox", 1, 1));
  absl::StatusOr<engine::PreparedRequest> same = across->Prepare(Request("a red fox", 2, 1));
  absl::StatusOr<engine::PreparedRequest> other = across->Prepare(Request("a tan fox", 2, 1));
  ASSERT_TRUE(first.ok() && same.ok() && other.ok());
  EXPECT_LT(first->own_kv_bytes, first->kv_bytes);
  absl::StatusOr<engine::GroupId> g1 = across->Add(*first);
  ASSERT_TRUE(g1.ok());
  EXPECT_EQ(across->KvBytesInUse(), first->kv_bytes);
  const int64_t shared_two = across->SharedKvBytes();
  absl::StatusOr<engine::GroupId> g2 = across->Add(*same);
  ASSERT_TRUE(g2.ok());
  EXPECT_EQ(across->KvBytesInUse(), first->kv_bytes + same->own_kv_bytes) << "both prompts were resident";
  absl::StatusOr<engine::GroupId> g3 = across->Add(*other);
  ASSERT_TRUE(g3.ok());
  EXPECT_GT(across->SharedKvBytes(), shared_two) << "its caption is new, its guidance prompt is not";
  EXPECT_LT(across->SharedKvBytes(), 2 * shared_two);
  across->Remove(*g1);
  EXPECT_EQ(across->SharedKvBytes(), across->KvBytesInUse() - same->own_kv_bytes - other->own_kv_bytes)
      << "the prompts stay while the second request reads them";
  across->Remove(*g2);
  across->Remove(*g3);
  EXPECT_EQ(across->KvBytesInUse(), 0);
  EXPECT_EQ(across->SharedKvBytes(), 0);
}

TEST(GenericEngineTest, OneTokenPerStepAndKvAccounting) {
  std::unique_ptr<GenericEngine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().image_tokens, 64);
  EXPECT_EQ(engine->info().backend, "cpu");
  absl::StatusOr<engine::PreparedRequest> p = engine->Prepare(Request("kv", 1, 2));
  ASSERT_TRUE(p.ok()) << p.status();
  const int64_t len = static_cast<int64_t>(p->cond_ids.size());
  // Two images share one copy of each prompt's KV: 2 prompt regions, 4 decode regions.
  EXPECT_EQ(p->kv_bytes, (2 * len + 4 * 64) * engine->info().kv_bytes_per_token_row);
  EXPECT_EQ(engine->info().kv_bytes_per_token_row,
            2 * 2 * 2 * 16 * 4);  // K+V, layers, kv heads, head_dim, f32
  absl::StatusOr<engine::GroupId> id = engine->Add(*p);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(engine->KvBytesInUse(), p->kv_bytes);
  EXPECT_EQ(engine->RunningRows(), 4);

  absl::StatusOr<engine::StepReport> first = engine->Step();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->groups_prefilled, 1);
  EXPECT_EQ(first->rows_decoded, 0);
  for (int32_t step = 2; step <= 3; ++step) {
    absl::StatusOr<engine::StepReport> r = engine->Step();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->rows_decoded, 4);
    EXPECT_EQ(engine->State(*id)->tokens_done, step);
  }
  engine->Remove(*id);
  EXPECT_EQ(engine->KvBytesInUse(), 0);
  EXPECT_EQ(engine->RunningRows(), 0);
  EXPECT_FALSE(engine->State(*id).ok());

  // A finished group frees its KV at once, before Remove.
  id = engine->Add(*p);
  ASSERT_TRUE(id.ok());
  std::vector<engine::GroupId> finished;
  for (int32_t i = 0; i < 64; ++i) {
    absl::StatusOr<engine::StepReport> r = engine->Step();
    ASSERT_TRUE(r.ok());
    finished.insert(finished.end(), r->finished.begin(), r->finished.end());
    if (i < 63) {
      EXPECT_TRUE(r->finished.empty()) << i;
    }
  }
  EXPECT_EQ(finished, std::vector<engine::GroupId>{*id});
  EXPECT_TRUE(engine->State(*id)->finished);
  EXPECT_EQ(engine->KvBytesInUse(), 0);
  absl::StatusOr<engine::StepReport> idle = engine->Step();
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(idle->rows_decoded, 0);
}

TEST(GenericEngineTest, SparsePoliciesBoundKvAndZeroSparsityMatchesDense) {
  std::unique_ptr<GenericEngine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  engine::GenerationRequest dense = Request("policy", 5, 1);
  engine::GenerationRequest window = dense;
  window.policy.kind = sparse::PolicyKind::kSlidingWindow;  // sparsity 0: attends everything
  const std::vector<Result> r = RunRequests(*engine, {dense, window}, {0, 0});
  EXPECT_EQ(r[0].tokens, r[1].tokens);

  // Diagonal with N_att = N_r (the largest allowed) attends exactly a sliding window of N_r.
  engine::GenerationRequest diagonal = dense, window_nr = dense;
  diagonal.policy.kind = sparse::PolicyKind::kDiagonal;
  diagonal.policy.n_recent = 20;
  diagonal.policy.n_att = 20;
  window_nr.policy.kind = sparse::PolicyKind::kSlidingWindow;
  window_nr.policy.n_att = 20;
  const std::vector<Result> same = RunRequests(*engine, {diagonal, window_nr}, {0, 0});
  EXPECT_EQ(same[0].tokens, same[1].tokens);
  EXPECT_NE(same[1].tokens, r[0].tokens) << "a 20-token window must change the image";

  for (sparse::PolicyKind kind :
       {sparse::PolicyKind::kSlidingWindow, sparse::PolicyKind::kStreamingLlm, sparse::PolicyKind::kH2O,
        sparse::PolicyKind::kTova, sparse::PolicyKind::kAlisa, sparse::PolicyKind::kDiagonal,
        sparse::PolicyKind::kDiagonalSink4, sparse::PolicyKind::kGridWindow, sparse::PolicyKind::kDiagonalGrid}) {
    engine::GenerationRequest sparse_request = dense;
    sparse_request.policy.kind = kind;
    sparse_request.policy.sparsity = 0.75;
    absl::StatusOr<engine::PreparedRequest> p = engine->Prepare(sparse_request);
    ASSERT_TRUE(p.ok()) << sparse::PolicyName(kind) << ": " << p.status();
    absl::StatusOr<engine::PreparedRequest> pd = engine->Prepare(dense);
    EXPECT_LT(p->kv_bytes, pd->kv_bytes) << sparse::PolicyName(kind);
    const std::vector<Result> out = RunRequests(*engine, {sparse_request}, {0});
    EXPECT_EQ(out[0].tokens[0].size(), 64u) << sparse::PolicyName(kind);
  }
}

TEST(GenericEngineTest, InvalidRequestsNameTheField) {
  std::unique_ptr<GenericEngine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  auto expect_error = [&](engine::GenerationRequest r, const std::string& field) {
    absl::StatusOr<engine::PreparedRequest> p = engine->Prepare(r);
    ASSERT_FALSE(p.ok()) << field;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(p.status().message().find(field), std::string::npos) << p.status();
  };
  engine::GenerationRequest r = Request("ok", 1);
  auto with = [&](auto mutate) {
    engine::GenerationRequest copy = r;
    mutate(copy);
    return copy;
  };
  expect_error(with([](auto& x) { x.prompt.clear(); }), "prompt");
  expect_error(with([](auto& x) { x.num_images = 0; }), "num_images");
  expect_error(with([](auto& x) { x.num_images = 1000; }), "num_images");
  expect_error(with([](auto& x) { x.sampling.temperature = 100.5f; }), "temperature");
  expect_error(with([](auto& x) { x.sampling.temperature = -1.0f; }), "temperature");
  expect_error(with([](auto& x) { x.sampling.top_k = -1; }), "top_k");
  expect_error(with([](auto& x) { x.sampling.top_k = 65; }), "top_k");
  expect_error(with([](auto& x) { x.sampling.top_p = 0.0f; }), "top_p");
  expect_error(with([](auto& x) { x.sampling.top_p = 1.5f; }), "top_p");
  expect_error(with([](auto& x) { x.sampling.cfg_weight = std::numeric_limits<float>::infinity(); }), "cfg_weight");
  expect_error(with([](auto& x) { x.policy.sparsity = 1.0; }), "sparsity");
  expect_error(with([](auto& x) { x.prompt = std::string(600, 'a'); }), "max_prompt_tokens");
  EXPECT_EQ(engine->KvBytesInUse(), 0);

  // A tampered prepared request is rejected by Add.
  absl::StatusOr<engine::PreparedRequest> p = engine->Prepare(r);
  ASSERT_TRUE(p.ok());
  engine::PreparedRequest bad = *p;
  bad.uncond_ids.clear();  // (rows of unequal lengths are fine: Lumina's guidance row is shorter)
  EXPECT_FALSE(engine->Add(bad).ok());
  bad = *p;
  bad.cond_ids[1] = 512;  // tiny text vocabulary is 512
  absl::Status vocab_error = engine->Add(bad).status();
  EXPECT_NE(vocab_error.message().find("vocab_size"), std::string::npos) << vocab_error;
  bad = *p;
  bad.policy.l_dec = 10;
  EXPECT_FALSE(engine->Add(bad).ok());
  EXPECT_EQ(engine->KvBytesInUse(), 0);
}

// ssd's head classification comes from the model directory (ssd_heads.json):
// without one ssd is refused naming the file, one of the wrong shape stops
// the engine, a matching one classifies the policy's heads.
TEST(GenericEngineTest, SsdReadsTheModelsHeadClassification) {
  std::unique_ptr<GenericEngine> plain = MakeEngine("tiny-mha");
  ASSERT_NE(plain, nullptr);
  engine::GenerationRequest r = Request("ssd", 3, 1);
  r.policy.kind = sparse::PolicyKind::kSsd;
  r.policy.sparsity = 0.75;
  absl::StatusOr<engine::PreparedRequest> refused = plain->Prepare(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("ssd_heads.json"), std::string::npos) << refused.status();

  const engine::ModelInfo& info = plain->info();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("argen_ssd_engine_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::copy(TinyDir("tiny-mha"), dir, std::filesystem::copy_options::recursive);
  sparse::HeadClasses wrong{info.num_layers + 1, info.num_kv_heads, {}};
  wrong.semantic.assign(wrong.layers * wrong.kv_heads, 0);
  std::ofstream(dir / sparse::kSsdHeadsFile) << sparse::HeadClassesJson(wrong, {}, {});
  engine::EngineOptions options;
  options.model_dir = dir.string();
  absl::StatusOr<std::unique_ptr<GenericEngine>> bad = CreateGenericEngine(options, ByteEncoder());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ssd_heads.json"), std::string::npos) << bad.status();

  sparse::HeadClasses right{info.num_layers, info.num_kv_heads, {}};
  for (int32_t h = 0; h < right.layers * right.kv_heads; ++h) right.semantic.push_back(h % 2);
  std::ofstream(dir / sparse::kSsdHeadsFile) << sparse::HeadClassesJson(right, {}, {});
  absl::StatusOr<std::unique_ptr<GenericEngine>> good = CreateGenericEngine(options, ByteEncoder());
  ASSERT_TRUE(good.ok()) << good.status();
  absl::StatusOr<engine::PreparedRequest> p = (*good)->Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->policy.ssd_heads, right.layers * right.kv_heads);
  EXPECT_TRUE(sparse::SsdHeadIsSemantic(p->policy, 1));
  EXPECT_FALSE(sparse::SsdHeadIsSemantic(p->policy, 0));
  const std::vector<Result> out = RunRequests(**good, {r}, {0});
  EXPECT_EQ(out[0].tokens[0].size(), 64u);
  std::filesystem::remove_all(dir);
}

TEST(GenericEngineTest, FactoryErrorsNameTheCause) {
  engine::EngineOptions options;
  options.model_dir = TinyDir("does-not-exist");
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::CreateEngine(options);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("does-not-exist"), std::string::npos) << e.status();
  options.model_dir = TinyDir("tiny-mha");
  options.backend = "tpu";
  e = engine::CreateEngine(options);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("backend"), std::string::npos) << e.status();
}

}  // namespace
}  // namespace argen::model

namespace argen::model {
namespace {

TEST(CreateEngineTest, TokenizerPromptAndFullGeneration) {
  engine::EngineOptions options;
  options.model_dir = TinyDir("tiny-mha");
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::CreateEngine(options);
  ASSERT_TRUE(e.ok()) << e.status();
  engine::Engine& engine = **e;
  EXPECT_EQ(engine.info().name, "tiny-mha");
  EXPECT_EQ(engine.info().image_size, 32);
  EXPECT_EQ(engine.info().token_grid, 8);
  absl::StatusOr<engine::PreparedRequest> p = engine.Prepare(Request("a small red cube", 3));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->cond_ids.size(), p->uncond_ids.size());
  EXPECT_EQ(p->cond_ids.front(), p->uncond_ids.front());
  EXPECT_EQ(p->cond_ids.back(), p->uncond_ids.back());
  absl::StatusOr<engine::GroupId> id = engine.Add(*p);
  ASSERT_TRUE(id.ok());
  for (int32_t i = 0; i < 64; ++i) ASSERT_TRUE(engine.Step().ok());
  absl::StatusOr<engine::GroupState> state = engine.State(*id);
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->finished);
  absl::StatusOr<std::vector<engine::RgbImage>> images = engine.DecodeImages(state->tokens);
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ((*images)[0].rgb.size(), 32u * 32u * 3u);
}

}  // namespace
}  // namespace argen::model

namespace argen::model {
namespace {

TEST(GenericEngineKvBudgetTest, AddFailsCleanlyWhenThePoolIsFull) {
  std::unique_ptr<GenericEngine> probe = MakeEngine();
  ASSERT_NE(probe, nullptr);
  absl::StatusOr<engine::PreparedRequest> p = probe->Prepare(Request("budget", 1, 2));
  ASSERT_TRUE(p.ok());

  engine::EngineOptions options;
  options.model_dir = TinyDir("tiny-gqa-sharded");
  options.kv_budget_bytes = p->kv_bytes + p->kv_bytes / 2;  // one request fits, two do not
  absl::StatusOr<std::unique_ptr<GenericEngine>> e = CreateGenericEngine(options, ByteEncoder());
  ASSERT_TRUE(e.ok()) << e.status();
  GenericEngine& engine = **e;
  absl::StatusOr<engine::GroupId> first = engine.Add(*p);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<engine::GroupId> second = engine.Add(*p);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted) << second.status();
  EXPECT_EQ(engine.KvBytesInUse(), p->kv_bytes) << "a failed Add must release its partial rows";
  EXPECT_EQ(engine.RunningRows(), 4);
  engine.Remove(*first);
  EXPECT_TRUE(engine.Add(*p).ok());
}

}  // namespace
}  // namespace argen::model

namespace argen::model {
namespace {

TEST(GenericEngineThreadsTest, ParallelRowsGiveTheSameTokens) {
  const engine::GenerationRequest a = Request("a red cube on a table", 21, 2);
  engine::GenerationRequest b = Request("green hills", 22, 1);
  b.policy.kind = sparse::PolicyKind::kH2O;
  b.policy.sparsity = 0.5;
  std::unique_ptr<GenericEngine> serial = MakeEngine();
  engine::EngineOptions options;
  options.model_dir = TinyDir("tiny-gqa-sharded");
  options.threads = 3;
  absl::StatusOr<std::unique_ptr<GenericEngine>> parallel = CreateGenericEngine(options, ByteEncoder());
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  auto* cpu = dynamic_cast<cpu::CpuBackend*>(&(*parallel)->backend());
  ASSERT_NE(cpu, nullptr);
  cpu->set_min_parallel_work(0);
  const std::vector<Result> s = RunRequests(*serial, {a, b}, {0, 2});
  const std::vector<Result> p = RunRequests(**parallel, {a, b}, {0, 2});
  EXPECT_EQ(s[0].tokens, p[0].tokens);
  EXPECT_EQ(s[1].tokens, p[1].tokens);
}

}  // namespace
}  // namespace argen::model

namespace argen::model {
namespace {

// temperature 0 is greedy (#15): the tokens are the argmax path, so they do
// not depend on the seed, and they are the same alone or batched.
TEST(GenericEngineGreedyTest, TemperatureZeroIsAcceptedAndIgnoresTheSeed) {
  std::unique_ptr<GenericEngine> engine = MakeEngine("tiny-mha");
  ASSERT_NE(engine, nullptr);
  engine::GenerationRequest a = Request("a red cube", 1, 2);
  a.sampling.temperature = 0.0f;
  engine::GenerationRequest b = a;
  b.sampling.seed = 999;
  const std::vector<Result> out = RunRequests(*engine, {a, b}, {0, 3});
  ASSERT_EQ(out[0].tokens.size(), 2u);
  EXPECT_EQ(out[0].tokens, out[1].tokens) << "greedy tokens depend on the seed";
  EXPECT_EQ(out[0].tokens[0], out[0].tokens[1]) << "greedy tokens depend on the image stream";
  engine::GenerationRequest sampled = a;
  sampled.sampling.temperature = 1.0f;
  const std::vector<Result> s = RunRequests(*engine, {sampled}, {0});
  EXPECT_NE(s[0].tokens[0], out[0].tokens[0]) << "temperature 1 should sample, not take the argmax";
}

// A forced step records the forced id instead of the sample and feeds it
// back like any token (it writes KV and changes what follows).
TEST(GenericEngineForcedTokensTest, ForcedIdsAreRecordedAndFedBack) {
  std::unique_ptr<GenericEngine> plain = MakeEngine("tiny-mha");
  ASSERT_NE(plain, nullptr);
  const engine::GenerationRequest r = Request("a blue ball", 4, 1);
  const std::vector<Result> base = RunRequests(*plain, {r}, {0});
  ASSERT_EQ(base[0].tokens[0].size(), 64u);

  auto forced_engine = [&](int32_t step, int32_t id) {
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(TinyDir("tiny-mha"));
    EXPECT_TRUE(ckpt.ok());
    const ModelSpec& spec = plain->backend().spec();
    BackendOptions options;
    options.max_batch_rows = 64;
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        CreateCpuBackend(spec, CheckpointWeights(std::move(*ckpt)), options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    GenericEngineConfig config;
    config.info = plain->info();
    config.forced_tokens.assign(config.info.image_tokens, -1);
    config.forced_tokens[step] = id;
    return std::make_unique<GenericEngine>(
        *std::move(backend), ByteEncoder(),
        [](const std::vector<std::vector<int32_t>>&) -> absl::StatusOr<std::vector<engine::RgbImage>> {
          return std::vector<engine::RgbImage>{};
        },
        config);
  };
  // Forcing the token the sampler would have drawn changes nothing.
  const int32_t drawn = base[0].tokens[0][10];
  std::unique_ptr<GenericEngine> same = forced_engine(10, drawn);
  EXPECT_EQ(RunRequests(*same, {r}, {0})[0].tokens, base[0].tokens);
  // Forcing another id: recorded at that step, the same before it, different after.
  const int32_t other = (drawn + 7) % plain->info().image_vocab;
  std::unique_ptr<GenericEngine> forced = forced_engine(10, other);
  const std::vector<Result> out = RunRequests(*forced, {r}, {0});
  const std::vector<int32_t>& t = out[0].tokens[0];
  EXPECT_EQ(t[10], other);
  EXPECT_TRUE(std::equal(t.begin(), t.begin() + 10, base[0].tokens[0].begin()));
  EXPECT_NE(std::vector<int32_t>(t.begin() + 11, t.end()),
            std::vector<int32_t>(base[0].tokens[0].begin() + 11, base[0].tokens[0].end()))
      << "the forced token was not fed back";
  EXPECT_EQ(forced->KvBytesInUse(), 0);
}

}  // namespace
}  // namespace argen::model
