// Issue #16 hardening 3 on the CPU: weights with NaN/Inf are refused at load
// naming the tensor; NaN/Inf logits fail the step instead of being sampled;
// the fault injection hook (ARGEN_FAULT_INJECTION, testing only) fails a step
// and the server recovers; a fatal device error fails everything, refuses
// new work, turns health NOT_SERVING and ends argen_server with exit code 3.
#include <signal.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "client/generate_call.h"
#include "engine/device_errors.h"
#include "engine/engine.h"
#include "engine/model/fault_guard.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "scheduler/tests/fake_engine.h"
#include "tests/reliability/checkpoint_patch.h"
#include "tests/reliability/process_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::reliability_test {
namespace {

using serving_test::LoopbackConfig;
using serving_test::SourceDir;
using serving_test::StartServer;
using serving_test::WaitFor;

std::string TinyDir() { return SourceDir() + "/tests/goldens/tiny/tiny-mha"; }

// The tiny checkpoint with `tensor` rewritten by `value`, in a fresh directory.
std::string BrokenCopy(const std::string& label, const std::string& tensor,
                       const std::function<float(int64_t, float)>& value) {
  const std::string dir = ::testing::TempDir() + "/argen_broken_" + label;
  EXPECT_TRUE(CopyCheckpoint(TinyDir(), dir).ok());
  EXPECT_TRUE(PatchTensor(dir + "/model.safetensors", tensor, value).ok()) << tensor;
  return dir;
}

absl::StatusOr<std::unique_ptr<engine::Engine>> Tiny(const std::string& dir) {
  engine::EngineOptions o;
  o.model_dir = dir;
  o.backend = "cpu";
  o.threads = 1;
  o.kv_budget_bytes = int64_t{256} << 20;
  return engine::CreateEngine(o);
}

v1::GenerateRequest Request(const std::string& prompt = "a red circle", int images = 1) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.set_num_images(images);
  r.set_seed(5);
  return r;
}

// Sets ARGEN_FAULT_INJECTION for the scope.
class ScopedFaults {
 public:
  explicit ScopedFaults(const char* value) { setenv(model::kFaultInjectionEnv, value, 1); }
  ~ScopedFaults() { unsetenv(model::kFaultInjectionEnv); }
};

TEST(FaultsTest, NonFiniteWeightsAreRefusedAtLoadNamingTheTensor) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* tensor;
    std::function<float(int64_t, float)> value;
    const char* expect;
  };
  const std::vector<Case> cases = {
      // The probe's checkpoint: the image head's bias all NaN.
      {"gen_head.vision_head.bias", [=](int64_t, float) { return nan; },
       "64 of 64 values are NaN or Inf (first at index 0)"},
      {"language_model.model.layers.1.mlp.down_proj.weight", [=](int64_t i, float v) { return i == 17 ? inf : v; },
       "values are NaN or Inf (first at index 17)"},
      {"gen_vision_model.decoder.conv_out.bias", [=](int64_t i, float v) { return i == 1 ? -inf : v; }, "1 of"},
  };
  for (const Case& c : cases) {
    const std::string dir = BrokenCopy("load", c.tensor, c.value);
    absl::StatusOr<std::unique_ptr<engine::Engine>> e = Tiny(dir);
    ASSERT_FALSE(e.ok()) << c.tensor << " loaded with NaN/Inf";
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(std::string("tensor '") + c.tensor + "'"), std::string::npos) << e.status();
    EXPECT_NE(e.status().message().find(c.expect), std::string::npos) << e.status();
  }
  // The clean checkpoint loads.
  EXPECT_TRUE(Tiny(TinyDir()).ok());
}

TEST(FaultsTest, TheServerRefusesToStartOnNonFiniteWeights) {
  const std::string dir =
      BrokenCopy("server", "gen_head.vision_head.bias", [](int64_t, float) { return std::nanf(""); });
  std::vector<std::string> args = TinyServerArgs();
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--model_dir") args[i + 1] = dir;
  }
  ServerProcess p = SpawnProcess(args, ::testing::TempDir() + "/argen_nan_server.log");
  EXPECT_EQ(WaitExit(p.pid, 60), 1);
  const std::string log = ReadFile(p.log_path);
  EXPECT_NE(log.find("gen_head.vision_head.bias"), std::string::npos) << log;
  EXPECT_NE(log.find("NaN or Inf"), std::string::npos) << log;
}

TEST(FaultsTest, NonFiniteLogitsFailTheRequestInsteadOfBeingSampled) {
  // Finite weights whose logits overflow f32 (no load check can see it):
  // the projector's output 3e38 times vision_head weights of 60000 (f16).
  const std::string dir =
      BrokenCopy("overflow", "gen_head.output_mlp_projector.bias", [](int64_t, float) { return 3e38f; });
  ASSERT_TRUE(PatchTensor(dir + "/model.safetensors", "gen_head.vision_head.weight", [](int64_t, float) {
                return 60000.0f;
              }).ok());
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = Tiny(dir);
  ASSERT_TRUE(e.ok()) << e.status();
  server::ServerConfig c = LoopbackConfig(dir);
  c.metrics_port = 0;
  ASSERT_STARTED(t, StartServer(c, *std::move(e)));
  client::GenerateResult r = client::CallGenerate(*t.stub, Request(), 30);
  EXPECT_EQ(r.status.error_code(), grpc::INTERNAL);
  EXPECT_NE(r.status.error_message().find("output-stage logits are NaN or Inf"), std::string::npos)
      << r.status.error_message();
  EXPECT_TRUE(r.images.empty());
  EXPECT_TRUE(WaitFor([&] { return t.engine->KvBytesInUse() == 0; }));
}

TEST(FaultsTest, AnInjectedStepErrorFailsThatStepAndTheServerRecovers) {
  absl::StatusOr<std::unique_ptr<engine::Engine>> reference = Tiny(TinyDir());
  ASSERT_TRUE(reference.ok());
  ScopedFaults faults("step_error@2");  // call 1: the prefill; call 2: its first decode step
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = Tiny(TinyDir());
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_STARTED(t, StartServer(LoopbackConfig(TinyDir()), *std::move(e)));
  client::GenerateResult failed = client::CallGenerate(*t.stub, Request(), 30);
  EXPECT_EQ(failed.status.error_code(), grpc::INTERNAL);
  EXPECT_NE(failed.status.error_message().find("engine step failed: fault injection: step_error at backend call 2"),
            std::string::npos)
      << failed.status.error_message();
  // The next request runs normally and makes the image a fault-free engine makes.
  client::GenerateResult ok = client::CallGenerate(*t.stub, Request(), 30);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  ASSERT_EQ(ok.images.size(), 1u);
  ASSERT_STARTED(ref, StartServer(LoopbackConfig(TinyDir()), *std::move(reference)));
  client::GenerateResult expected = client::CallGenerate(*ref.stub, Request(), 30);
  ASSERT_TRUE(expected.status.ok());
  EXPECT_EQ(ok.images[0].png(), expected.images[0].png());
}

TEST(FaultsTest, ABadFaultInjectionValueIsAnErrorNamingTheVariable) {
  ScopedFaults faults("step_error@soon");
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = Tiny(TinyDir());
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("ARGEN_FAULT_INJECTION"), std::string::npos) << e.status();
  EXPECT_TRUE(model::ParseFaultPlan("step_error@3, device_lost@7").ok());
  EXPECT_FALSE(model::ParseFaultPlan("device_lost@0").ok());
}

// A FakeEngine whose step `fatal_step` fails as a lost device would.
class LosingEngine : public scheduler::testing::FakeEngine {
 public:
  LosingEngine(scheduler::testing::FakeEngineOptions o, int64_t fatal_step) : FakeEngine(o), fatal_step_(fatal_step) {}
  absl::StatusOr<engine::StepReport> Step() override {
    if (++steps_ == fatal_step_)
      return engine::FatalDeviceError("cuda: step: an illegal memory access was encountered");
    return FakeEngine::Step();
  }

 private:
  const int64_t fatal_step_;
  int64_t steps_ = 0;
};

TEST(FaultsTest, AFatalDeviceErrorFailsEverythingAndStopsTheServer) {
  scheduler::testing::FakeEngineOptions o;
  o.token_grid = 8;  // 64 steps of 2 ms
  o.step_time = absl::Milliseconds(2);
  o.max_batch_rows = 2;  // the engine's limit: one request runs, the next waits
  server::ServerConfig c = LoopbackConfig("fake");
  ASSERT_STARTED(t, StartServer(c, std::make_unique<LosingEngine>(o, 20)));
  std::atomic<int> handler_calls{0};
  t.server->SetFatalErrorHandler([&](const absl::Status& s) {
    EXPECT_TRUE(engine::IsFatalDeviceError(s) || s.code() == absl::StatusCode::kInternal);
    ++handler_calls;
  });
  client::GenerateResult running, queued;
  std::thread a([&] { running = client::CallGenerate(*t.stub, Request("first"), 30); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().running_rows == 2; }));
  std::thread b([&] { queued = client::CallGenerate(*t.stub, Request("second"), 30); });
  a.join();
  b.join();
  EXPECT_EQ(running.status.error_code(), grpc::INTERNAL);
  EXPECT_NE(running.status.error_message().find("the device is unusable"), std::string::npos)
      << running.status.error_message();
  EXPECT_EQ(queued.status.error_code(), grpc::UNAVAILABLE) << queued.status.error_message();
  client::GenerateResult later = client::CallGenerate(*t.stub, Request("third"), 30);
  EXPECT_EQ(later.status.error_code(), grpc::UNAVAILABLE);
  EXPECT_NE(later.status.error_message().find("stopping after a device error"), std::string::npos)
      << later.status.error_message();
  EXPECT_EQ(handler_calls.load(), 1);
  EXPECT_FALSE(t.server->fatal_error().ok());
  auto health = grpc::health::v1::Health::NewStub(client::MakeChannel(t.address, 1 << 20));
  grpc::ClientContext hc;
  grpc::health::v1::HealthCheckResponse hr;
  ASSERT_TRUE(health->Check(&hc, grpc::health::v1::HealthCheckRequest(), &hr).ok());
  EXPECT_EQ(hr.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(t.server->scheduler().snapshot().active_requests, 0);
}

TEST(FaultsTest, ALostDeviceEndsArgenServerWithExitCodeThree) {
  ScopedFaults faults("device_lost@4");  // inherited by the child
  ServerProcess p = SpawnProcess(TinyServerArgs(), ::testing::TempDir() + "/argen_device_lost.log");
  unsetenv(model::kFaultInjectionEnv);
  ASSERT_TRUE(WaitServing(p)) << ReadFile(p.log_path);
  auto stub = v1::ArGen::NewStub(client::MakeChannel("127.0.0.1:" + std::to_string(p.port), 64 << 20));
  client::GenerateResult r = client::CallGenerate(*stub, Request(), 30);
  EXPECT_EQ(r.status.error_code(), grpc::INTERNAL) << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("device_lost"), std::string::npos) << r.status.error_message();
  stub.reset();  // an idle open connection holds gRPC's shutdown for its 5 s grace
  EXPECT_EQ(WaitExit(p.pid, 60), 3) << ReadFile(p.log_path);
  const std::string log = ReadFile(p.log_path);
  EXPECT_NE(log.find("fault injection (ARGEN_FAULT_INJECTION): device_lost at call 4"), std::string::npos) << log;
  EXPECT_NE(log.find("exiting with code 3"), std::string::npos) << log;
}

}  // namespace
}  // namespace argen::reliability_test
