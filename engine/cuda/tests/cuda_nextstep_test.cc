// NextStep-1 on the CUDA backend (tests/goldens/tiny/tiny-nextstep, images 0
// and 1 of seed 5, CFG 3, both in every step as the engine runs them)
// against the CPU backend, the reference.
//
// Why teacher forcing decides and free running does not: each drawn token
// is fed back as the next step's input, and nextstep_feedback_test measures
// on the CPU how this random-weight model amplifies that: a 1e-3 error in
// token 0 alone grows 190x (image 0) and 1570x (image 1) within the 9
// tokens, and the decoder's matrices rounded to bf16 (no head error at all)
// move image 1's tokens 4-6 by 0.60, 1.06, 1.71 (the device engine run of
// issue 31: 0.574, 1.06, 1.66). So a correct device run decorrelates from
// the CPU's within the image; the free-running comparison is printed as
// information and bounded at token 0 only (no feedback yet).
//
// TeacherForcedStepsMatchTheCpu (the decisive case): every backend is fed
// the CPU run's tokens as given vectors, so token t's error is step t's
// alone (prefill draws token 0, step t - 1 token t). Printed per image, one
// column per token:
//   head  the device head alone (DeviceFlowHead) on the conditions the CPU
//         head was handed: the head's bf16 error (cuda_flow_head_test: <= 2.1%);
//   tf    the CUDA backend with graphs (the engine's path), teacher forced;
//   tf vs head  the same against the device head on the CPU's conditions:
//         what the device decoder's conditions change (same head, same noise);
//   eager the same with graphs off, against tf (token 1 is drawn eagerly by
//         both; a value baked in at capture, a stale pointer or a wrong
//         replay shows from token 2, the first step a graph runs, as an
//         O(0.1) error; identical launches give ~0);
//   share image 1 reading image 0's prompt KV (the engine's layout) against
//         its own prompt rows (another prefill row count: bf16-level only);
//   cpu16 the CPU with the decoder's matrices and fed-back tokens rounded to
//         bf16, teacher forced: what bf16 weights alone explain (CPU: <= 0.041).
// How to read it: tf near head + cpu16 (a few 1e-2) at every token means the
// device path is right and the free-running divergence is amplification. tf
// jumping well above them from some token on while head stays small locates
// a decoder / vector-input / kept-place / noise-key / position / CFG-pairing
// defect at that step; head large is the head's; eager nonzero is graph
// capture; share large is prompt sharing.
//
// KeptAndHostFedVectorsAndGraphsDrawTheSameTokens: after a warm-up run (the
// decode graph made), the kept vector (kMadeVector) against the same run's
// draws given back by the host (the same bits, launches and GEMM shapes:
// equal to 1e-5 although free running), the kept run's tokens given 1 (1e-5)
// and 3 a step (other GEMM row counts: 3e-2) teacher forced; the first
// run's eager and captured steps and an eager run are printed against the
// graph replays.
//
// TheEngines...: the engine (backend "cuda", the VAE on the CPU) against the
// CPU engine: token 0 within the teacher-forced bound; every token's error,
// the by-hand run of the same plans and the decoded images' difference
// printed as information. Needs a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_flow_head.h"
#include "engine/cuda/gemm.h"
#include "engine/families/nextstep/tests/nextstep_token_runs.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/create_engine.h"
#include "engine/model/step_plan.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"
#include "engine/token_vectors.h"
#include "kernels/sampling.h"

namespace argen::cuda {
namespace {

using nextstep::token_runs::Feed;
using nextstep::token_runs::ImageTokens;
using nextstep::token_runs::ProbeHead;
using nextstep::token_runs::TinyNextStep;
using nextstep::token_runs::TokenErrors;

// The device head alone on identical conditions (cuda_flow_head_test's bound).
constexpr double kHeadTolerance = 5e-2;
// A teacher-forced token: the head's own error (<= 5e-2) plus what the
// decoder's bf16 weights, GEMM inputs and KV do through the conditions
// (nextstep_feedback_test, teacher forced: bf16 matrices and inputs <= 0.041,
// conditions off by 3e-3 <= 0.023). No feedback: nothing grows along the
// image, so a defect from some step on stands out against 0.1.
constexpr double kTeacherForcedTolerance = 0.1;
// Two device runs whose GEMMs see other row counts (k tokens a step vs one,
// image 1's prompt KV its own or image 0's), teacher forced.
constexpr double kShapeTolerance = 3e-2;
// Identical launches (graphs vs eager; kept vs host-given bits).
constexpr double kSameLaunchTolerance = 1e-5;
constexpr float kCfg = 3.0f;
constexpr uint64_t kSeed = 5;
constexpr int32_t kImages = 2;
const char kCaption[] = "a photo of a red circle";

std::string Dir() {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/goldens/tiny/tiny-nextstep";
}

std::string Row(const std::vector<double>& e) {
  std::string s;
  for (double x : e) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), " %9.3g", x);
    s += buf;
  }
  return s;
}

double Worst(const std::vector<std::vector<double>>& e) {
  double w = 0;
  for (const std::vector<double>& r : e) {
    for (double x : r) w = std::max(w, std::isfinite(x) ? x : INFINITY);
  }
  return w;
}

class CudaNextStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TinyNextStep> m = TinyNextStep::Load(Dir(), kCaption);
    ASSERT_TRUE(m.ok()) << m.status();
    m_ = *std::move(m);
    sampling_.cfg_weight = kCfg;
    sampling_.seed = kSeed;
  }

  model::BackendOptions Options(std::shared_ptr<const model::TokenHead> head) const {
    model::BackendOptions options;
    options.max_batch_rows = 8;
    options.max_prompt_tokens = 256;  // the tiny checkpoint's prompt is 165 tokens
    options.kv_budget_bytes = int64_t{64} << 20;
    options.threads = 2;
    options.token_head = std::move(head);
    return options;
  }
  std::unique_ptr<model::Backend> Cuda() {
    absl::StatusOr<std::unique_ptr<model::Backend>> b =
        model::CreateCudaBackend(m_.spec, model::CheckpointWeights(m_.checkpoint), Options(m_.head));
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  std::unique_ptr<model::Backend> Cpu(std::shared_ptr<const model::TokenHead> head, bool bf16_weights = false) {
    std::shared_ptr<const model::WeightSource> w = model::CheckpointWeights(m_.checkpoint);
    if (bf16_weights) w = std::make_shared<nextstep::token_runs::Bf16MatrixWeights>(w);
    absl::StatusOr<std::unique_ptr<model::Backend>> b = model::CreateCpuBackend(m_.spec, w, Options(std::move(head)));
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  ImageTokens Run(model::Backend* be, const Feed& feed) {
    if (be == nullptr) return {};
    absl::StatusOr<ImageTokens> t = nextstep::token_runs::RunImages(*be, m_, kImages, sampling_, feed);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : ImageTokens{};
  }
  static Feed Forced(const ImageTokens& tokens, int32_t per_step = 1, bool share = false) {
    Feed f;
    f.kind = Feed::Kind::kForced;
    f.forced = &tokens;
    f.per_step = per_step;
    f.share_prompts = share;
    return f;
  }

  // The device head alone on the recorded conditions: per image, token t
  // drawn from (image, t)'s cond and uncond rows, every image in one launch a token.
  ImageTokens DeviceHeadTokens(const ProbeHead& probe) {
    absl::StatusOr<std::unique_ptr<DeviceFlowHead>> made = DeviceFlowHead::Create(*m_.head->flow_matching());
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return {};
    DeviceFlowHead& head = **made;
    cudaStream_t stream = nullptr;
    EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    Gemm gemm;
    EXPECT_TRUE(gemm.Init(stream).ok());
    const int32_t C = head.cond_dim(), D = head.token_dim(), T = m_.image_tokens();
    absl::StatusOr<DeviceBuffer> c = DeviceBuffer::Allocate(sizeof(float) * 2 * kImages * C, "conditions");
    absl::StatusOr<DeviceBuffer> s = DeviceBuffer::Allocate(sizeof(kernels::PairSampling) * kImages, "sampling");
    absl::StatusOr<DeviceBuffer> out = DeviceBuffer::Allocate(sizeof(float) * kImages * D, "tokens");
    absl::StatusOr<DeviceBuffer> flag = DeviceBuffer::Allocate(sizeof(int32_t), "flag");
    EXPECT_TRUE(c.ok() && s.ok() && out.ok() && flag.ok());
    ImageTokens tokens(kImages, std::vector<float>(static_cast<size_t>(T) * D));
    for (int32_t t = 0; t < T && c.ok() && s.ok() && out.ok() && flag.ok(); ++t) {
      std::vector<float> rows;
      std::vector<kernels::PairSampling> ps(kImages);
      for (int32_t i = 0; i < kImages; ++i) {
        auto it = probe.conditions().find({i, t});
        EXPECT_NE(it, probe.conditions().end()) << "no conditions recorded for image " << i << " token " << t;
        if (it == probe.conditions().end()) return {};
        rows.insert(rows.end(), it->second.begin(), it->second.end());  // cond then uncond: rows 2i, 2i + 1
        ps[i].cfg_weight = kCfg;
        ps[i].seed = kSeed;
        ps[i].image_index = i;
        ps[i].step = t;
      }
      EXPECT_EQ(cudaMemcpy(c->as(), rows.data(), sizeof(float) * rows.size(), cudaMemcpyHostToDevice), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(s->as(), ps.data(), s->bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      EXPECT_EQ(cudaMemset(flag->as(), 0, sizeof(int32_t)), cudaSuccess);
      absl::Status st = head.EnqueueSample(gemm, stream, c->as<float>(), s->as<kernels::PairSampling>(), kImages,
                                           out->as<float>(), nullptr, nullptr, flag->as<int32_t>());
      EXPECT_TRUE(st.ok()) << st;
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      std::vector<float> drawn(static_cast<size_t>(kImages) * D);
      EXPECT_EQ(cudaMemcpy(drawn.data(), out->as(), out->bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
      for (int32_t i = 0; i < kImages; ++i) {
        std::copy_n(drawn.begin() + i * D, D, tokens[i].begin() + static_cast<size_t>(t) * D);
      }
    }
    gemm.Reset();
    cudaStreamDestroy(stream);
    return tokens;
  }

  TinyNextStep m_;
  model::SamplingSpec sampling_;
};

TEST_F(CudaNextStepTest, TeacherForcedStepsMatchTheCpu) {
  const int32_t D = m_.token_dim();
  // The CPU reference, free running, its conditions recorded.
  auto probe = std::make_shared<ProbeHead>(m_.head, ProbeHead::Perturbation{});
  std::unique_ptr<model::Backend> cpu = Cpu(probe);
  const ImageTokens ref = Run(cpu.get(), {});
  ASSERT_EQ(ref.size(), static_cast<size_t>(kImages));
  const ImageTokens head = DeviceHeadTokens(*probe);
  ASSERT_EQ(head.size(), ref.size());

  std::unique_ptr<model::Backend> gpu = Cuda();
  ASSERT_NE(gpu, nullptr);
  auto* cuda = dynamic_cast<CudaBackend*>(gpu.get());
  ASSERT_NE(cuda, nullptr) << "the backend is wrapped (fault plan set)";
  const ImageTokens tf = Run(gpu.get(), Forced(ref));
  cuda->SetGraphs(false);
  const ImageTokens eager = Run(gpu.get(), Forced(ref));
  cuda->SetGraphs(true);
  const ImageTokens shared = Run(gpu.get(), Forced(ref, 1, /*share=*/true));
  std::unique_ptr<model::Backend> cpu16 = Cpu(m_.head, /*bf16_weights=*/true);
  Feed forced16 = Forced(ref);
  forced16.round_to_bf16 = true;
  const ImageTokens emulated = Run(cpu16.get(), forced16);
  for (const ImageTokens* run : {&tf, &eager, &shared, &emulated}) ASSERT_EQ(run->size(), ref.size());

  const auto e_head = TokenErrors(head, ref, D), e_tf = TokenErrors(tf, ref, D), e_eager = TokenErrors(eager, tf, D),
             e_share = TokenErrors(shared, tf, D), e_cpu16 = TokenErrors(emulated, ref, D),
             e_cond = TokenErrors(tf, head, D);
  std::cout << "teacher forced, relative error of token t (columns t = 0 .. " << m_.image_tokens() - 1 << "):\n";
  for (int32_t i = 0; i < kImages; ++i) {
    std::cout << "image " << i << "\n"
              << "  head  (device head, cpu conditions) vs cpu:" << Row(e_head[i]) << "\n"
              << "  tf    (cuda backend, graphs)        vs cpu:" << Row(e_tf[i]) << "\n"
              << "  tf vs head (the conditions' part)         :" << Row(e_cond[i]) << "\n"
              << "  eager (cuda backend, no graphs)   vs tf  :" << Row(e_eager[i]) << "\n"
              << "  share (image 1 reads image 0's prompt) vs tf:" << Row(e_share[i]) << "\n"
              << "  cpu16 (cpu, bf16 matrices + inputs) vs cpu:" << Row(e_cpu16[i]) << "\n";
  }
  std::cout << "worst: head " << Worst(e_head) << " (bound " << kHeadTolerance << "), tf " << Worst(e_tf) << " (bound "
            << kTeacherForcedTolerance << "), eager " << Worst(e_eager) << " (bound " << kSameLaunchTolerance
            << "), share " << Worst(e_share) << " (bound " << kShapeTolerance << "), cpu16 " << Worst(e_cpu16) << "\n";
  for (int32_t i = 0; i < kImages; ++i) {
    for (size_t t = 0; t < e_tf[i].size(); ++t) {
      EXPECT_LE(e_head[i][t], kHeadTolerance) << "device head, image " << i << " token " << t;
      EXPECT_LE(e_tf[i][t], kTeacherForcedTolerance) << "teacher forced, image " << i << " token " << t;
      EXPECT_LE(e_eager[i][t], kSameLaunchTolerance) << "graphs vs eager, image " << i << " token " << t;
      EXPECT_LE(e_share[i][t], kShapeTolerance) << "shared prompt, image " << i << " token " << t;
    }
  }
}

TEST_F(CudaNextStepTest, KeptAndHostFedVectorsAndGraphsDrawTheSameTokens) {
  const int32_t D = m_.token_dim();
  std::unique_ptr<model::Backend> gpu = Cuda();
  ASSERT_NE(gpu, nullptr);
  auto* cuda = dynamic_cast<CudaBackend*>(gpu.get());
  ASSERT_NE(cuda, nullptr) << "the backend is wrapped (fault plan set)";
  // A first run makes the decode graph (eager, then captured), so the runs
  // compared free running below replay it at every step: the same launches
  // bit for bit, whose tokens must be equal though the feedback amplifies
  // any difference (nextstep_feedback_test).
  const ImageTokens first = Run(gpu.get(), {});
  const ImageTokens kept = Run(gpu.get(), {});
  ASSERT_EQ(kept.size(), static_cast<size_t>(kImages));
  Feed own;
  own.kind = Feed::Kind::kOwn;
  const ImageTokens host = Run(gpu.get(), own);
  cuda->SetGraphs(false);
  const ImageTokens eager = Run(gpu.get(), {});
  cuda->SetGraphs(true);
  ASSERT_EQ(host.size(), kept.size());
  const auto e_host = TokenErrors(host, kept, D), e_first = TokenErrors(first, kept, D),
             e_eager = TokenErrors(eager, kept, D);
  for (int32_t i = 0; i < kImages; ++i) {
    std::cout << "image " << i << " host-fed vs kept (graphs):        " << Row(e_host[i]) << "\n"
              << "image " << i << " first run (eager, capture) vs kept:" << Row(e_first[i]) << "\n"
              << "image " << i << " eager vs graphs, free running:   " << Row(e_eager[i])
              << " (information: teacher forced in TeacherForcedStepsMatchTheCpu)\n";
  }
  EXPECT_LE(Worst(e_host), kSameLaunchTolerance) << "kept vectors vs the same bits given by the host";
  // Token t + 1 drawn after feeding the kept run's tokens 0..t, k a step: the kept run's token t + 1.
  for (int32_t k : {1, 3}) {
    const auto e = TokenErrors(Run(gpu.get(), Forced(kept, k)), kept, D);
    for (int32_t i = 0; i < kImages; ++i) {
      std::cout << "image " << i << " kept tokens given " << k << " a step vs kept:" << Row(e[i]) << "\n";
    }
    EXPECT_LE(Worst(e), k == 1 ? kSameLaunchTolerance : kShapeTolerance) << "k " << k;
  }
}

TEST_F(CudaNextStepTest, AKeptVectorNeverMadeIsRefused) {
  std::unique_ptr<model::Backend> be = Cuda();
  ASSERT_NE(be, nullptr);
  kv::KvManager kv(*be);
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, 9);
  ASSERT_TRUE(dense.ok());
  model::RowId rows[2];
  for (model::RowId& r : rows) r = *kv.AllocateRow(static_cast<int32_t>(m_.prompt.cond.size()), *dense);
  model::StepPlanBuilder builder;
  for (int i = 0; i < 2; ++i) {
    builder.AddRow(rows[i]);
    builder.AddPromptQueries(m_.prompt.cond, 0, static_cast<int32_t>(m_.prompt.cond.size()));
  }
  builder.AddSampling({});
  std::vector<int32_t> sampled(1);
  ASSERT_TRUE(be->Forward(builder.Plan(), {sampled, nullptr}).ok());
  // Token 1 is made by the query at index 0, not before: feeding it in the
  // same step (the indices the row expects, 0 then 1) is refused, the row untouched.
  builder.Clear();
  for (int i = 0; i < 2; ++i) {
    builder.AddRow(rows[i]);
    builder.AddMadeVectorQuery(0);
    builder.AddMadeVectorQuery(1);
  }
  builder.AddSampling({});
  sampled.resize(2);
  absl::Status s = be->Forward(builder.Plan(), {sampled, nullptr});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("token 1's vector has not been made"), std::string::npos) << s;
  EXPECT_EQ(be->FindLiveRow(rows[0])->next_step, 0);
  for (model::RowId r : rows) kv.FreeRow(r);
}

// ---- The engine ----

std::unique_ptr<model::GenericEngine> MakeEngine(const std::string& backend) {
  engine::EngineOptions options;
  options.model_dir = Dir();
  options.backend = backend;
  options.vq_backend = "cpu";  // NextStep's VAE runs on the CPU here
  options.threads = 2;
  options.max_batch_rows = 8;
  options.kv_budget_bytes = int64_t{64} << 20;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  EXPECT_TRUE(e.ok()) << backend << ": " << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

std::vector<std::vector<int32_t>> RunToEnd(model::GenericEngine& e) {
  engine::GenerationRequest r;
  r.prompt = kCaption;
  r.num_images = kImages;
  r.sampling.cfg_weight = kCfg;
  r.sampling.seed = kSeed;
  absl::StatusOr<engine::PreparedRequest> p = e.Prepare(r);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  absl::StatusOr<engine::GroupId> id = e.Add(*p);
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return {};
  for (int32_t step = 0; step < e.info().image_tokens; ++step) {
    absl::StatusOr<engine::StepReport> rep = e.Step();
    EXPECT_TRUE(rep.ok()) << rep.status();
    if (!rep.ok()) return {};
  }
  absl::StatusOr<engine::GroupState> s = e.State(*id);
  EXPECT_TRUE(s.ok() && s->finished);
  e.Remove(*id);
  return s.ok() ? s->tokens : std::vector<std::vector<int32_t>>{};
}

ImageTokens Floats(const std::vector<std::vector<int32_t>>& words) {
  ImageTokens out;
  for (const std::vector<int32_t>& w : words) out.push_back(engine::TokenVectorFloats(w));
  return out;
}

TEST_F(CudaNextStepTest, TheEnginesTokenZeroMatchesTheCpuAndItsFreeRunningTokensArePrinted) {
  const int32_t D = m_.token_dim();
  std::unique_ptr<model::GenericEngine> cpu = MakeEngine("cpu"), gpu = MakeEngine("cuda");
  ASSERT_TRUE(cpu && gpu);
  const std::vector<std::vector<int32_t>> want_words = RunToEnd(*cpu), got_words = RunToEnd(*gpu);
  const ImageTokens want = Floats(want_words), got = Floats(got_words);
  ASSERT_EQ(got.size(), static_cast<size_t>(kImages));
  ASSERT_EQ(want.size(), static_cast<size_t>(kImages));
  // The same plans by hand on a fresh device backend: the engine adds nothing.
  std::unique_ptr<model::Backend> be = Cuda();
  Feed engine_layout;
  engine_layout.share_prompts = true;
  const auto e_hand = TokenErrors(got, Run(be.get(), engine_layout), D);
  const auto e = TokenErrors(got, want, D);
  for (int32_t i = 0; i < kImages; ++i) {
    std::cout << "image " << i << " engine cuda vs by-hand cuda (kept, shared prompt):" << Row(e_hand[i]) << "\n"
              << "image " << i << " engine cuda vs engine cpu, free running (information):" << Row(e[i]) << "\n";
    // Token 0 has no feedback yet: a teacher-forced step.
    ASSERT_FALSE(e[i].empty());
    EXPECT_LE(e[i][0], kTeacherForcedTolerance) << "image " << i << " token 0";
  }
  // The same launches in the same order on a fresh backend each: expected
  // equal; printed, not asserted (the engine sizes its backend itself, and a
  // last-bit difference would grow; nextstep_engine_test holds the CPU's
  // engine to its by-hand run bit for bit).
  std::cout << "worst engine vs by-hand: " << Worst(e_hand) << "\n";
  // The same VAE (the CPU's) decodes both runs' tokens; information only.
  absl::StatusOr<std::vector<engine::RgbImage>> a = cpu->DecodeImages(want_words), b = cpu->DecodeImages(got_words);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t image = 0; image < static_cast<size_t>(kImages); ++image) {
    const std::vector<uint8_t>& x = (*a)[image].rgb;
    const std::vector<uint8_t>& y = (*b)[image].rgb;
    ASSERT_EQ(x.size(), y.size());
    double sum = 0;
    int worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const int d = std::abs(int{x[i]} - int{y[i]});
      sum += d;
      worst = std::max(worst, d);
    }
    std::cout << "image " << image << ": mean |cuda - cpu| " << sum / static_cast<double>(x.size()) << " levels, worst "
              << worst << " (free running; information)\n";
  }
}

}  // namespace
}  // namespace argen::cuda
