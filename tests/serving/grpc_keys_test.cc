// API keys and priorities on the gRPC API (the same RequestGate as HTTP):
// UNAUTHENTICATED without or with a wrong key, PERMISSION_DENIED for a key
// without the right or above its priority cap, RESOURCE_EXHAUSTED at the
// key's limit; the key's name in messages, never the key.
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "client/generate_call.h"
#include "grpcpp/client_context.h"
#include "scheduler/tests/fake_engine.h"
#include "server/auth.h"
#include "tests/serving/http_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

using scheduler::testing::FakeEngine;
using scheduler::testing::FakeEngineOptions;

grpc::Status Generate(TestServer& t, const std::string& key, v1::Priority priority = v1::PRIORITY_UNSPECIFIED) {
  grpc::ClientContext context;
  if (!key.empty()) context.AddMetadata("authorization", "Bearer " + key);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GenerateRequest r;
  r.set_prompt("a cat");
  r.set_priority(priority);
  auto reader = t.stub->Generate(&context, r);
  v1::GenerateEvent e;
  while (reader->Read(&e)) {
  }
  return reader->Finish();
}

TEST(GrpcKeysTest, KeysRightsPriorityCapsAndLimits) {
  TempDir dir;
  server::ServerConfig c = LoopbackConfig("fake");
  c.api_keys_file = dir.Write(
      "keys", absl::StrCat("gen ", server::Sha256Hex("gen-key"), " max_priority=high max_concurrent_requests=1\n",
                           "viewer ", server::Sha256Hex("view-key"), " rights=info\n", "batch ",
                           server::Sha256Hex("batch-key"), " max_priority=low\n"));
  FakeEngineOptions eo;
  eo.token_grid = 8;
  eo.step_time = absl::Milliseconds(3);
  ASSERT_STARTED(t, StartServer(c, std::make_unique<FakeEngine>(eo)));

  EXPECT_EQ(Generate(t, "").error_code(), grpc::UNAUTHENTICATED);
  grpc::Status wrong = Generate(t, "gen-kex");
  EXPECT_EQ(wrong.error_code(), grpc::UNAUTHENTICATED);
  EXPECT_EQ(wrong.error_message().find("gen-kex"), std::string::npos);
  grpc::Status viewer = Generate(t, "view-key");
  EXPECT_EQ(viewer.error_code(), grpc::PERMISSION_DENIED);
  EXPECT_NE(viewer.error_message().find("'viewer'"), std::string::npos) << viewer.error_message();
  EXPECT_EQ(viewer.error_message().find("view-key"), std::string::npos);
  grpc::Status batch_high = Generate(t, "batch-key", v1::PRIORITY_NORMAL);
  EXPECT_EQ(batch_high.error_code(), grpc::PERMISSION_DENIED);
  EXPECT_EQ(batch_high.error_message(), "priority: API key 'batch' may ask for at most low, not normal");
  EXPECT_TRUE(Generate(t, "batch-key").ok());  // unset: its cap, low
  EXPECT_TRUE(Generate(t, "gen-key", v1::PRIORITY_HIGH).ok());
  EXPECT_EQ(Generate(t, "gen-key", static_cast<v1::Priority>(7)).error_code(), grpc::INVALID_ARGUMENT);

  // GetModelInfo needs a key with the info right.
  {
    grpc::ClientContext context;
    v1::ModelInfo info;
    EXPECT_EQ(t.stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).error_code(), grpc::UNAUTHENTICATED);
    grpc::ClientContext with_key;
    with_key.AddMetadata("authorization", "Bearer view-key");
    EXPECT_TRUE(t.stub->GetModelInfo(&with_key, v1::GetModelInfoRequest(), &info).ok());
    EXPECT_EQ(info.max_previews(), 7);  // the fake's 8 token rows
  }

  // One request at a time for gen.
  grpc::Status first;
  std::thread a([&] { first = Generate(t, "gen-key"); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().active_requests == 1; }));
  grpc::Status second = Generate(t, "gen-key");
  EXPECT_EQ(second.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(second.error_message().find("max_concurrent_requests"), std::string::npos);
  a.join();
  EXPECT_TRUE(first.ok()) << first.error_message();
}

}  // namespace
}  // namespace argen::serving_test
