// Issue #16 hardening 3 on the device (label gpu; bench/gpu/lab.sh gpu-tests or soak):
// device OOM at load names the budget; NaN/Inf weights are refused; a CUDA
// error inside a step (injected: ARGEN_FAULT_INJECTION, testing only) fails
// that step's requests with INTERNAL and the server recovers with correct
// images; NaN logits on the device fail the request; a lost CUDA context
// ends argen_server with exit code 3.
#include <stdlib.h>

#include <gtest/gtest.h>

#include <cmath>

#include "client/generate_call.h"
#include "engine/engine.h"
#include "engine/model/fault_guard.h"
#include "tests/reliability/checkpoint_patch.h"
#include "tests/reliability/process_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::reliability_test {
namespace {

using serving_test::LoopbackConfig;
using serving_test::SourceDir;
using serving_test::StartServer;

std::string TinyDir() { return SourceDir() + "/tests/goldens/tiny/tiny-mha"; }

absl::StatusOr<std::unique_ptr<engine::Engine>> TinyCuda(const std::string& dir, int64_t kv_budget) {
  engine::EngineOptions o;
  o.model_dir = dir;
  o.backend = "cuda";
  o.vq_backend = "cuda";
  // The tests compare PNG bytes across engine instances: the bf16 VQ path times
  // cuDNN's algorithm candidates at Create, so two engines may pick different
  // ones and differ in the last bits; the fp32 path's cuBLAS choice is fixed.
  o.vq_precision = "fp32";
  o.kv_budget_bytes = kv_budget;
  o.max_batch_rows = 16;
  return engine::CreateEngine(o);
}

v1::GenerateRequest Request(uint64_t seed) {
  v1::GenerateRequest r;
  r.set_prompt("a red circle above a blue square");
  r.set_seed(seed);
  r.mutable_policy()->set_name("dense");
  return r;
}

class ScopedFaults {
 public:
  explicit ScopedFaults(const char* value) { setenv(model::kFaultInjectionEnv, value, 1); }
  ~ScopedFaults() { unsetenv(model::kFaultInjectionEnv); }
};

// The PNG a fault-free CUDA engine makes for `seed`.
std::string ReferencePng(uint64_t seed) {
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = TinyCuda(TinyDir(), int64_t{256} << 20);
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return "";
  absl::StatusOr<serving_test::TestServer> t = StartServer(LoopbackConfig(TinyDir()), *std::move(e));
  EXPECT_TRUE(t.ok());
  if (!t.ok()) return "";
  client::GenerateResult r = client::CallGenerate(*t->stub, Request(seed), 60);
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  return r.images.empty() ? "" : r.images[0].png();
}

TEST(GpuFaultsTest, AKvBudgetBeyondTheDeviceIsRefusedNamingTheBudget) {
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = TinyCuda(TinyDir(), int64_t{4} << 40);  // 4 TiB
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kResourceExhausted) << e.status();
  EXPECT_NE(e.status().message().find("kv_budget_bytes 4096.00 GiB"), std::string::npos) << e.status();
  EXPECT_NE(e.status().message().find("free"), std::string::npos) << e.status();
  // The device is still usable afterwards.
  EXPECT_TRUE(TinyCuda(TinyDir(), int64_t{256} << 20).ok());
}

TEST(GpuFaultsTest, NonFiniteWeightsAreRefusedOnCudaToo) {
  const std::string dir = ::testing::TempDir() + "/argen_gpu_nan";
  ASSERT_TRUE(CopyCheckpoint(TinyDir(), dir).ok());
  ASSERT_TRUE(PatchTensor(dir + "/model.safetensors", "gen_head.vision_head.bias", [](int64_t, float) {
                return std::nanf("");
              }).ok());
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = TinyCuda(dir, int64_t{256} << 20);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("gen_head.vision_head.bias"), std::string::npos) << e.status();
}

// `fault` on the CUDA backend: the request in the failing step ends with
// INTERNAL containing `message`; the next one gets the fault-free image.
void FaultFailsOneRequestThenRecovers(const char* fault, const std::string& message) {
  const std::string expected = ReferencePng(11);
  ASSERT_FALSE(expected.empty());
  ScopedFaults faults(fault);
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = TinyCuda(TinyDir(), int64_t{256} << 20);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_STARTED(t, StartServer(LoopbackConfig(TinyDir()), *std::move(e)));
  client::GenerateResult failed = client::CallGenerate(*t.stub, Request(11), 60);
  EXPECT_EQ(failed.status.error_code(), grpc::INTERNAL) << failed.status.error_message();
  EXPECT_NE(failed.status.error_message().find(message), std::string::npos) << failed.status.error_message();
  EXPECT_TRUE(failed.images.empty());
  for (int i = 0; i < 3; ++i) {
    client::GenerateResult ok = client::CallGenerate(*t.stub, Request(11), 60);
    ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
    ASSERT_EQ(ok.images.size(), 1u);
    EXPECT_EQ(ok.images[0].png(), expected) << "a wrong image after the fault (request " << i << ")";
  }
}

TEST(GpuFaultsTest, ACudaErrorInAPrefillFailsThatStepAndTheServerRecovers) {
  // The CUDA runtime's own words for the bad launch vary by version ("invalid
  // argument" on CUDA 13, "invalid configuration argument" before): match ours.
  FaultFailsOneRequestThenRecovers("step_error@1", "cuda: fault injection: step_error: ");
}

TEST(GpuFaultsTest, ACudaErrorInAGraphDecodeStepFailsThatStepAndTheServerRecovers) {
  FaultFailsOneRequestThenRecovers("step_error@30", "cuda: fault injection: step_error: ");  // graphs replay by then
}

TEST(GpuFaultsTest, NanLogitsOnTheDeviceFailTheRequest) {
  FaultFailsOneRequestThenRecovers("nan_logits@40", "output-stage logits are NaN or Inf");
}

TEST(GpuFaultsTest, NanLogitsInAPrefillFailTheRequest) {
  FaultFailsOneRequestThenRecovers("nan_logits@1", "output-stage logits are NaN or Inf");
}

// Last: a process of its own, since its context is lost for good.
TEST(GpuFaultsTest, ALostCudaContextEndsArgenServerWithExitCodeThree) {
  ScopedFaults faults("device_lost@6");
  ServerProcess p = SpawnProcess(
      TinyServerArgs({"--backend=cuda", "--vq_backend=cuda", "--kv_budget_bytes=256MiB", "--max_batch_rows=16"}),
      ::testing::TempDir() + "/argen_gpu_device_lost.log");
  unsetenv(model::kFaultInjectionEnv);
  ASSERT_TRUE(WaitServing(p, 120)) << ReadFile(p.log_path);
  auto stub = v1::ArGen::NewStub(client::MakeChannel("127.0.0.1:" + std::to_string(p.port), 64 << 20));
  client::GenerateResult r = client::CallGenerate(*stub, Request(3), 60);
  EXPECT_EQ(r.status.error_code(), grpc::INTERNAL) << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("unusable"), std::string::npos) << r.status.error_message();
  EXPECT_EQ(WaitExit(p.pid, 120), 3) << ReadFile(p.log_path);
  EXPECT_NE(ReadFile(p.log_path).find("exiting with code 3"), std::string::npos) << ReadFile(p.log_path);
}

}  // namespace
}  // namespace argen::reliability_test
