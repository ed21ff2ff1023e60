// The gRPC API over loopback against the deterministic FakeEngine (timing
// under the test's control): status codes and messages for every bad input,
// queue full, never-fits, message size, cancellation, deadlines, draining,
// health, reflection-independent metrics over HTTP.
#include <gtest/gtest.h>

#include <thread>

#include "client/generate_call.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "scheduler/tests/fake_engine.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

using scheduler::testing::FakeEngine;
using scheduler::testing::FakeEngineOptions;

// A raw encoder keeps these tests about the API, not about PNG.
// The server's limits are the engine's: the fake takes them from the config.
absl::StatusOr<TestServer> StartFake(server::ServerConfig config, FakeEngineOptions options = {}) {
  options.kv_budget_bytes = config.kv_budget_bytes;
  options.max_batch_rows = config.max_batch_rows;
  options.max_images_per_request = config.max_images_per_request;
  return StartServer(config, std::make_unique<FakeEngine>(options));
}

int64_t FakeKvNeed(const std::string& prompt, int images, FakeEngineOptions o = {}) {
  engine::GenerationRequest r;
  r.prompt = prompt;
  r.num_images = images;
  o.kv_budget_bytes = int64_t{1} << 50;  // the need, whatever the budget
  return FakeEngine(o).Prepare(r).value().kv_bytes;
}

v1::GenerateRequest Request(const std::string& prompt, int images = 1) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.set_num_images(images);
  r.mutable_policy()->set_name("dense");
  return r;
}

client::GenerateResult Call(TestServer& t, const v1::GenerateRequest& r, double timeout = 30) {
  return client::CallGenerate(*t.stub, r, timeout);
}

TEST(ServingApiTest, EachBadInputGetsItsCodeAndNamesTheField) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  struct Case {
    const char* field;
    std::function<void(v1::GenerateRequest&)> mutate;
  };
  const std::vector<Case> cases = {
      {"prompt", [](v1::GenerateRequest& r) { r.set_prompt(""); }},
      {"num_images", [](v1::GenerateRequest& r) { r.set_num_images(-4); }},
      {"temperature", [](v1::GenerateRequest& r) { r.set_temperature(-1); }},
      {"top_p", [](v1::GenerateRequest& r) { r.set_top_p(2); }},
      {"top_k", [](v1::GenerateRequest& r) { r.set_top_k(-1); }},
      {"cfg_weight", [](v1::GenerateRequest& r) { r.set_cfg_weight(1000); }},
      {"policy.name", [](v1::GenerateRequest& r) { r.mutable_policy()->set_name("nope"); }},
      {"policy.sparsity",
       [](v1::GenerateRequest& r) {
         r.mutable_policy()->set_name("diagonal");
         r.mutable_policy()->set_sparsity(-0.5);
       }},
      {"request_id", [](v1::GenerateRequest& r) { r.set_request_id(std::string(200, 'x')); }},
      // The engine's own check (prompt longer than the model allows).
      {"prompt", [](v1::GenerateRequest& r) { r.set_prompt(std::string(500, 'p')); }},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest r = Request("a cat");
    c.mutate(r);
    client::GenerateResult result = Call(t, r);
    EXPECT_EQ(result.status.error_code(), grpc::INVALID_ARGUMENT) << c.field;
    EXPECT_NE(result.status.error_message().find(c.field), std::string::npos)
        << "want '" << c.field << "' in: " << result.status.error_message();
  }
  // The server kept working.
  client::GenerateResult ok = Call(t, Request("fine"));
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.images.size(), 1u);
}

TEST(ServingApiTest, NeverFitsIsFailedPreconditionSayingWhy) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.kv_budget_bytes = FakeKvNeed("big", 4) - 1;
  ASSERT_STARTED(t, StartFake(c));
  client::GenerateResult r = Call(t, Request("big", 4));
  EXPECT_EQ(r.status.error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_NE(r.status.error_message().find(std::to_string(FakeKvNeed("big", 4))), std::string::npos)
      << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("kv_budget_bytes"), std::string::npos);
  EXPECT_TRUE(Call(t, Request("big", 1)).status.ok());
}

TEST(ServingApiTest, QueueFullIsResourceExhausted) {
  FakeEngineOptions o;
  o.token_grid = 8;  // 64 steps of 3 ms per request
  o.step_time = absl::Milliseconds(3);
  server::ServerConfig c = LoopbackConfig("fake");
  c.kv_budget_bytes = FakeKvNeed("a", 1, o);  // one at a time
  c.queue_limit = 1;
  ASSERT_STARTED(t, StartFake(c, o));
  // One running, one queued; the third finds the queue full.
  std::vector<client::GenerateResult> first(2);
  std::thread a([&] { first[0] = Call(t, Request("a")); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().running_rows > 0; }));
  std::thread b([&] { first[1] = Call(t, Request("b")); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().queue_depth > 0; }));
  client::GenerateResult third = Call(t, Request("c"));
  EXPECT_EQ(third.status.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(third.status.error_message().find("queue"), std::string::npos);
  a.join();
  b.join();
  EXPECT_TRUE(first[0].status.ok());
  EXPECT_TRUE(first[1].status.ok());
  EXPECT_EQ(first[1].accepted.queue_position(), 0);
}

TEST(ServingApiTest, OversizedMessageIsRejectedByTheTransport) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.max_message_bytes = 8192;
  ASSERT_STARTED(t, StartFake(c));
  client::GenerateResult r = Call(t, Request(std::string(20000, 'x')));
  EXPECT_EQ(r.status.error_code(), grpc::RESOURCE_EXHAUSTED) << r.status.error_message();
  EXPECT_TRUE(Call(t, Request("small")).status.ok());
}

TEST(ServingApiTest, ClientCancelFreesKvAndEndsCancelled) {
  FakeEngineOptions o;
  o.token_grid = 16;  // 256 steps
  o.step_time = absl::Milliseconds(2);
  server::ServerConfig c = LoopbackConfig("fake");
  c.metrics_port = 0;
  ASSERT_STARTED(t, StartFake(c, o));
  grpc::ClientContext context;
  v1::GenerateRequest r = Request("cancel me", 2);
  r.set_progress_interval_ms(1);
  auto reader = t.stub->Generate(&context, r);
  v1::GenerateEvent e;
  int progress = 0;
  while (reader->Read(&e)) {
    if (e.has_progress() && ++progress == 3) break;
  }
  EXPECT_GT(t.engine->KvBytesInUse(), 0);
  const int64_t steps_at_cancel = t.engine->steps();
  context.TryCancel();
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::CANCELLED);
  // The scheduler removes the group at the next step boundary.
  EXPECT_TRUE(WaitFor([&] { return t.engine->KvBytesInUse() == 0; }));
  EXPECT_LT(t.engine->steps() - steps_at_cancel, 100);  // far before its 256 steps ended
  EXPECT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().active_requests == 0; }));
  const std::string metrics = HttpGet(t.server->metrics_port(), "/metrics");
  EXPECT_NE(metrics.find("argen_requests_total{policy=\"dense\",status=\"CANCELLED\"} 1"), std::string::npos)
      << metrics;
}

TEST(ServingApiTest, DeadlineEndsWithDeadlineExceeded) {
  FakeEngineOptions o;
  o.token_grid = 16;
  o.step_time = absl::Milliseconds(2);
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake"), o));
  client::GenerateResult r = Call(t, Request("slow"), 0.05);
  EXPECT_EQ(r.status.error_code(), grpc::DEADLINE_EXCEEDED);
  EXPECT_TRUE(WaitFor([&] { return t.engine->KvBytesInUse() == 0; }));
}

TEST(ServingApiTest, ShutdownDrainsRunningAndRefusesNew) {
  FakeEngineOptions o;
  o.token_grid = 12;  // 144 steps of 2 ms per request: none ends before all are accepted
  o.step_time = absl::Milliseconds(2);
  server::ServerConfig c = LoopbackConfig("fake");
  c.kv_budget_bytes = FakeKvNeed("r0", 1, o);  // one runs, the others queue
  ASSERT_STARTED(t, StartFake(c, o));
  std::vector<client::GenerateResult> results(3);
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] { results[i] = Call(t, Request("r" + std::to_string(i))); });
  }
  // All three accepted (one running, two queued) before the shutdown starts.
  ASSERT_TRUE(WaitFor([&] {
    const scheduler::SchedulerSnapshot s = t.server->scheduler().snapshot();
    return s.active_requests == 3 && s.running_rows > 0;
  }));
  bool drained = false;
  std::thread stopper([&] { drained = t.server->Shutdown(); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().draining; }));
  // While draining: new requests UNAVAILABLE, health NOT_SERVING.
  client::GenerateResult refused = Call(t, Request("late"));
  EXPECT_EQ(refused.status.error_code(), grpc::UNAVAILABLE);
  auto health = grpc::health::v1::Health::NewStub(client::MakeChannel(t.address, 1 << 20));
  grpc::ClientContext hc;
  grpc::health::v1::HealthCheckResponse hr;
  grpc::Status hs = health->Check(&hc, grpc::health::v1::HealthCheckRequest(), &hr);
  if (hs.ok()) {
    EXPECT_EQ(hr.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  }
  stopper.join();
  for (auto& th : clients) th.join();
  EXPECT_TRUE(drained);
  for (const auto& r : results) {
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.images.size(), 1u);
    EXPECT_TRUE(r.has_metrics);
  }
}

TEST(ServingApiTest, HealthAndModelInfo) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  auto health = grpc::health::v1::Health::NewStub(client::MakeChannel(t.address, 1 << 20));
  for (const char* service : {"", "argen.v1.ArGen"}) {
    grpc::ClientContext hc;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse hr;
    ASSERT_TRUE(health->Check(&hc, req, &hr).ok()) << service;
    EXPECT_EQ(hr.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  grpc::ClientContext ic;
  v1::ModelInfo info;
  ASSERT_TRUE(t.stub->GetModelInfo(&ic, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.model(), "fake");
  EXPECT_EQ(info.image_tokens(), 16);
  EXPECT_EQ(info.token_grid(), 4);
  EXPECT_EQ(info.policies_size(), 12);  // sparse::kAllPolicyKinds
  EXPECT_EQ(info.kv_budget_bytes(), LoopbackConfig("x").kv_budget_bytes);
}

// Server reflection, spoken through the generic stub with a hand-encoded
// ServerReflectionRequest{list_services: "*"} (field 7), so the test does not
// need the reflection protos (which the server library already registers).
TEST(ServingApiTest, ReflectionListsTheServices) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  grpc::GenericStub generic(client::MakeChannel(t.address, 1 << 20));
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = generic.PrepareCall(&context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](intptr_t expected) {
    EXPECT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), expected);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(step(1));
  grpc::Slice request_bytes(std::string("\x3a\x01*", 3));
  grpc::ByteBuffer request(&request_bytes, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  ASSERT_TRUE(step(2));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  ASSERT_TRUE(step(3));
  call->WritesDone(reinterpret_cast<void*>(4));
  step(4);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_NE(bytes.find("argen.v1.ArGen"), std::string::npos);
  EXPECT_NE(bytes.find("grpc.health.v1.Health"), std::string::npos);
}

}  // namespace
}  // namespace argen::serving_test
