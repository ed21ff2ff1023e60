// Issue #16 defects 2, 3 and 5 over loopback:
//  2. a Generate request whose string fields hold invalid UTF-8 gets
//     INVALID_ARGUMENT naming the field (it was INTERNAL with no message,
//     uncounted: protobuf refused it before the service ran), and is counted;
//  3. an oversized prompt is refused by its byte count before tokenizing;
//  5. a second server on a taken port (gRPC or metrics) refuses to start
//     unless allow_port_sharing is set.
#include <gtest/gtest.h>

#include <chrono>

#include "client/generate_call.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "scheduler/tests/fake_engine.h"
#include "server/prompt_limits.h"
#include "tests/serving/serving_test_util.h"

namespace argen::reliability_test {
namespace {

using scheduler::testing::FakeEngine;
using scheduler::testing::FakeEngineOptions;
using serving_test::HttpGet;
using serving_test::LoopbackConfig;
using serving_test::StartServer;
using serving_test::TestServer;

struct RawResult {
  grpc::Status status;
  int events = 0;
};

// Sends `bytes` as the serialized request of /argen.v1.ArGen/Generate.
RawResult RawGenerate(TestServer& t, const std::string& bytes) {
  auto channel = client::MakeChannel(t.address, 64 << 20);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  const grpc::internal::RpcMethod method("/argen.v1.ArGen/Generate", grpc::internal::RpcMethod::SERVER_STREAMING);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel.get(), method, &context, request));
  RawResult out;
  grpc::ByteBuffer event;
  while (reader->Read(&event)) ++out.events;
  out.status = reader->Finish();
  return out;
}

absl::StatusOr<TestServer> StartFake(server::ServerConfig config, FakeEngineOptions options = {}) {
  return StartServer(config, std::make_unique<FakeEngine>(options));
}

std::string Serialized(const v1::GenerateRequest& r) {
  std::string out;
  r.SerializeToString(&out);
  return out;
}

TEST(HostileRequestsTest, InvalidUtf8InAStringFieldIsInvalidArgumentNamingIt) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.metrics_port = 0;
  ASSERT_STARTED(t, StartFake(c));
  // The probe's bytes: prompt "a \xff\xfe\xc3(", num_images 1.
  RawResult r = RawGenerate(t, std::string("\x0a\x06\x61\x20\xff\xfe\xc3\x28\x18\x01", 10));
  EXPECT_EQ(r.status.error_code(), grpc::INVALID_ARGUMENT) << r.status.error_message();
  EXPECT_EQ(r.status.error_message(), "prompt: not valid UTF-8 (byte 2)");
  EXPECT_EQ(r.events, 0);

  // Nested and later fields are named too: policy.name (field 8.1), request_id (9).
  v1::GenerateRequest with_policy;
  with_policy.set_prompt("ok");
  std::string wire = Serialized(with_policy) + std::string("\x42\x04\x0a\x02\xc0\x80", 6);  // overlong NUL
  r = RawGenerate(t, wire);
  EXPECT_EQ(r.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "policy.name: not valid UTF-8 (byte 0)");
  wire = Serialized(with_policy) + std::string("\x4a\x03\x61\xed\xa0", 5);  // truncated surrogate
  r = RawGenerate(t, wire);
  EXPECT_EQ(r.status.error_message(), "request_id: not valid UTF-8 (byte 1)");

  // Bytes that are not a protobuf message at all.
  r = RawGenerate(t, std::string("\xff\xff\xff\xff", 4));
  EXPECT_EQ(r.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("request: not a valid argen.v1.GenerateRequest"), std::string::npos)
      << r.status.error_message();

  // A valid request through the same raw path still runs (the proto is unchanged on the wire).
  v1::GenerateRequest good;
  good.set_prompt("fine \xc3\xa9");  // "fine é"
  good.set_num_images(1);
  r = RawGenerate(t, Serialized(good));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_GE(r.events, 4);  // accepted, started, progress..., image, metrics

  const std::string metrics = HttpGet(t.server->metrics_port(), "/metrics");
  EXPECT_NE(metrics.find("argen_requests_total{policy=\"invalid\",status=\"INVALID_ARGUMENT\"} 4"), std::string::npos)
      << metrics;
}

TEST(HostileRequestsTest, PromptOverTheByteBoundIsRefusedBeforeTokenizing) {
  FakeEngineOptions o;
  o.max_prompt_tokens = 64;
  server::ServerConfig c = LoopbackConfig("fake");
  c.metrics_port = 0;
  ASSERT_STARTED(t, StartFake(c, o));
  const int64_t limit = 64 * server::kPromptBytesPerToken;
  v1::GenerateRequest r;
  r.set_prompt(std::string(limit + 1, 'x'));
  client::GenerateResult result = client::CallGenerate(*t.stub, r, 20);
  EXPECT_EQ(result.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(result.status.error_message(), "prompt: " + std::to_string(limit + 1) + " bytes, over the limit of " +
                                               std::to_string(limit) + " bytes (max_prompt_bytes)");
  // At the bound the prompt reaches the engine, which counts its tokens.
  r.set_prompt(std::string(limit, 'x'));
  result = client::CallGenerate(*t.stub, r, 20);
  EXPECT_EQ(result.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(result.status.error_message().find("bytes, over the limit"), std::string::npos)
      << result.status.error_message();

  // max_prompt_bytes overrides the derived bound.
  server::ServerConfig small = c;
  small.max_prompt_bytes = 10;
  ASSERT_STARTED(t2, StartFake(small, o));
  r.set_prompt("eleven char");
  result = client::CallGenerate(*t2.stub, r, 20);
  EXPECT_EQ(result.status.error_message(), "prompt: 11 bytes, over the limit of 10 bytes (max_prompt_bytes)");
  r.set_prompt("ten chars!");
  EXPECT_TRUE(client::CallGenerate(*t2.stub, r, 20).status.ok());
}

TEST(HostileRequestsTest, ASecondServerOnATakenPortRefusesToStart) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.metrics_port = 0;
  ASSERT_STARTED(first, StartFake(c));

  server::ServerConfig same_grpc = c;
  same_grpc.port = first.server->port();
  absl::StatusOr<TestServer> second = StartFake(same_grpc);
  ASSERT_FALSE(second.ok()) << "a second server started on gRPC port " << same_grpc.port;
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("port: cannot listen"), std::string::npos) << second.status();

  server::ServerConfig same_metrics = c;
  same_metrics.metrics_port = first.server->metrics_port();
  second = StartFake(same_metrics);
  ASSERT_FALSE(second.ok()) << "a second server started on metrics port " << same_metrics.metrics_port;
  EXPECT_NE(second.status().message().find("metrics_port"), std::string::npos) << second.status();

  // The first one still serves.
  v1::GenerateRequest r;
  r.set_prompt("still here");
  EXPECT_TRUE(client::CallGenerate(*first.stub, r, 20).status.ok());
}

TEST(HostileRequestsTest, PortSharingIsAllowedWhenBothAskForIt) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.metrics_port = 0;
  c.allow_port_sharing = true;
  ASSERT_STARTED(first, StartFake(c));
  server::ServerConfig shared = c;
  shared.port = first.server->port();
  shared.metrics_port = first.server->metrics_port();
  ASSERT_STARTED(second, StartFake(shared));
  EXPECT_EQ(second.server->port(), first.server->port());
  EXPECT_EQ(second.server->metrics_port(), first.server->metrics_port());
}

}  // namespace
}  // namespace argen::reliability_test
