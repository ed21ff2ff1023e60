// Issue #16 defect 4 and hardening 2 over loopback: deadlines are never
// counted as cancels; a client that stops reading cannot hold a stream
// thread or buffered events without bound; the gRPC connection limits and
// keepalive (config section `connections`) take effect; idle connections
// cannot starve a /metrics scrape.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "client/generate_call.h"
#include "grpcpp/client_context.h"
#include "scheduler/tests/fake_engine.h"
#include "tests/reliability/raw_http2_client.h"
#include "tests/serving/serving_test_util.h"

namespace argen::reliability_test {
namespace {

using scheduler::testing::FakeEngine;
using scheduler::testing::FakeEngineOptions;
using serving_test::HttpGet;
using serving_test::LoopbackConfig;
using serving_test::WaitFor;

// A server over a FakeEngine (images from `encoder`: none means 8x8 raw RGB).
struct Running {
  std::unique_ptr<server::ArgenServer> server;
  FakeEngine* engine = nullptr;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ArGen::Stub> stub;
};

absl::StatusOr<Running> Start(server::ServerConfig config, FakeEngineOptions options = {},
                              scheduler::ImageEncoder encoder = nullptr) {
  if (!encoder) {
    encoder = [](const engine::RgbImage& rgb) -> absl::StatusOr<std::string> {
      return std::string(rgb.rgb.begin(), rgb.rgb.end());
    };
  }
  config.metrics_port = 0;
  Running r;
  auto engine = std::make_unique<FakeEngine>(options);
  r.engine = engine.get();
  absl::StatusOr<std::unique_ptr<server::ArgenServer>> s =
      server::ArgenServer::Start(config, std::move(engine), std::move(encoder));
  if (!s.ok()) return s.status();
  r.server = *std::move(s);
  r.channel = client::MakeChannel("127.0.0.1:" + std::to_string(r.server->port()), 64 << 20);
  r.stub = v1::ArGen::NewStub(r.channel);
  return r;
}

#define ASSERT_RUNNING(var, expr)                    \
  absl::StatusOr<Running> var##_or_ = (expr);        \
  ASSERT_TRUE(var##_or_.ok()) << var##_or_.status(); \
  Running var = *std::move(var##_or_)

// argen_requests_total for (policy, status); 0 when the series is absent.
int64_t RequestsTotal(Running& r, const std::string& policy, const std::string& status) {
  const std::string metrics = HttpGet(r.server->metrics_port(), "/metrics");
  const std::regex series("argen_requests_total\\{policy=\"" + policy + "\",status=\"" + status + "\"\\} ([0-9.e+]+)");
  std::smatch m;
  return std::regex_search(metrics, m, series) ? static_cast<int64_t>(std::stod(m[1])) : 0;
}

v1::GenerateRequest Request(int images = 1) {
  v1::GenerateRequest r;
  r.set_prompt("a hostile client");
  r.set_num_images(images);
  r.mutable_policy()->set_name("dense");
  return r;
}

std::string Serialized(const v1::GenerateRequest& r) {
  std::string out;
  r.SerializeToString(&out);
  return out;
}

bool Idle(Running& r) { return r.server->scheduler().snapshot().active_requests == 0 && r.engine->KvBytesInUse() == 0; }

TEST(HostileClientsTest, AnExpiredDeadlineIsNeverCountedAsCancelled) {
  FakeEngineOptions o;
  o.token_grid = 32;  // 1024 steps of 2 ms: every deadline below expires mid-decode
  o.step_time = absl::Milliseconds(2);
  ASSERT_RUNNING(r, Start(LoopbackConfig("fake"), o));
  // gRPC sends a deadline as a timeout rounded up (to 10 ms between 1 and
  // 10 s), so the server's copy is up to 10 ms later than the client's; the
  // client cancels at its own deadline, inside that gap. Requests of
  // 1.001-1.008 s all land in it: each one was CANCELLED ~half of the time.
  constexpr int kRequests = 8;
  std::vector<std::thread> callers;
  std::atomic<int> deadline_exceeded{0};
  for (int i = 0; i < kRequests; ++i) {
    callers.emplace_back([&, i] {
      client::GenerateResult result = client::CallGenerate(*r.stub, Request(), 1.001 + 0.001 * i);
      if (result.status.error_code() == grpc::DEADLINE_EXCEEDED) ++deadline_exceeded;
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(deadline_exceeded.load(), kRequests);
  ASSERT_TRUE(WaitFor([&] { return Idle(r); }));
  EXPECT_EQ(RequestsTotal(r, "dense", "DEADLINE_EXCEEDED"), kRequests);
  EXPECT_EQ(RequestsTotal(r, "dense", "CANCELLED"), 0);

  // A real cancel, long before the deadline, is still CANCELLED.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = r.stub->Generate(&context, Request());
  v1::GenerateEvent e;
  ASSERT_TRUE(reader->Read(&e));
  context.TryCancel();
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::CANCELLED);
  ASSERT_TRUE(WaitFor([&] { return Idle(r); }));
  EXPECT_EQ(RequestsTotal(r, "dense", "CANCELLED"), 1);
}

// 1 MiB per image: a client that does not read fills the 64 KiB HTTP/2 window at once.
absl::StatusOr<std::string> BigImage(const engine::RgbImage&) { return std::string(1 << 20, 'p'); }

// argen_streams_stalled_total.
int64_t StreamsStalled(Running& r) {
  const std::string metrics = HttpGet(r.server->metrics_port(), "/metrics");
  std::smatch m;
  return std::regex_search(metrics, m, std::regex("\nargen_streams_stalled_total ([0-9.e+]+)"))
             ? static_cast<int64_t>(std::stod(m[1]))
             : -1;
}

TEST(HostileClientsTest, AClientThatStopsReadingIsCancelledAfterTheStallTimeout) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.stream_stall_timeout_s = 1;
  c.image_workers = 2;
  FakeEngineOptions o;
  o.step_time = absl::Milliseconds(1);
  // A request's images are decoded in one call, then encoded and sent one by
  // one: 1 s an image, so its images are ready at 1.1, 2.1, 3.1 and 4.1 s; the
  // socket buffers take the first one or two, the stall comes a second after
  // the write that blocks, before its last image.
  o.decode_time = absl::Milliseconds(100);
  auto slow_big_image = [](const engine::RgbImage& rgb) {
    absl::SleepFor(absl::Seconds(1));
    return BigImage(rgb);
  };
  ASSERT_RUNNING(r, Start(c, o, slow_big_image));
  EXPECT_EQ(StreamsStalled(r), 0);
  std::unique_ptr<RawHttp2Client> stalled = RawHttp2Client::Connect(r.server->port());
  ASSERT_NE(stalled, nullptr);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(stalled->StartCall("/argen.v1.ArGen/Generate", Serialized(Request(4))));

  // Meanwhile everyone else is served: the decode loop never waits on a stream.
  ASSERT_TRUE(WaitFor([&] { return r.engine->steps() > 0; }));
  client::GenerateResult other = client::CallGenerate(*r.stub, Request(1), 10);
  EXPECT_TRUE(other.status.ok()) << other.status.error_message();
  EXPECT_EQ(other.images.size(), 1u);

  ASSERT_TRUE(WaitFor([&] { return StreamsStalled(r) == 1; }, absl::Seconds(10)))
      << "the stalled stream was never reset: " << HttpGet(r.server->metrics_port(), "/metrics");
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(900));  // not before the timeout
  EXPECT_LT(took, absl::Seconds(5));
  // Its request ended there (before its last images), counted with the reason.
  EXPECT_TRUE(WaitFor([&] { return RequestsTotal(r, "dense", "RESOURCE_EXHAUSTED") == 1; }));
  EXPECT_EQ(RequestsTotal(r, "dense", "OK"), 1);  // the other one
  EXPECT_TRUE(WaitFor([&] { return Idle(r); }));
  EXPECT_LE(stalled->bytes_received(), 0);  // it never read: the kernel holds what came
  // What it finally reads ends with the reset, not with 4 MiB of images.
  stalled->ReadUntilClosed(absl::Milliseconds(300));
  EXPECT_LE(stalled->bytes_received(), 128 << 10);
}

TEST(HostileClientsTest, AStalledStreamOfAFinishedRequestStillFreesItsThread) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.stream_stall_timeout_s = 0.5;
  c.connections.max_threads = 16;
  ASSERT_RUNNING(r, Start(c, {}, BigImage));
  // More stalled streams than the server has threads: each is reset after
  // its timeout, so the server keeps answering.
  std::vector<std::unique_ptr<RawHttp2Client>> stalled;
  for (int i = 0; i < 24; ++i) {
    stalled.push_back(RawHttp2Client::Connect(r.server->port()));
    ASSERT_NE(stalled.back(), nullptr);
    ASSERT_TRUE(stalled.back()->StartCall("/argen.v1.ArGen/Generate", Serialized(Request(2))));
  }
  EXPECT_TRUE(WaitFor([&] { return StreamsStalled(r) >= 8; }, absl::Seconds(20))) << StreamsStalled(r);
  EXPECT_TRUE(WaitFor([&] { return client::CallGenerate(*r.stub, Request(1), 5).status.ok(); }, absl::Seconds(20)));
  EXPECT_TRUE(WaitFor([&] { return Idle(r); }));
}

TEST(HostileClientsTest, TheStreamBufferBoundsWhatWaitsForASlowClient) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.stream_stall_timeout_s = 600;  // only the byte bound acts here
  c.stream_buffer_bytes = 3 << 20;
  ASSERT_RUNNING(r, Start(c, {}, BigImage));
  std::unique_ptr<RawHttp2Client> slow = RawHttp2Client::Connect(r.server->port());
  ASSERT_NE(slow, nullptr);
  ASSERT_TRUE(slow->StartCall("/argen.v1.ArGen/Generate", Serialized(Request(8))));
  // 8 MiB of images for a client whose window took 64 KiB: past 3 MiB the
  // request ends, and what waited is freed, long before the stall timeout.
  ASSERT_TRUE(WaitFor([&] { return RequestsTotal(r, "dense", "RESOURCE_EXHAUSTED") == 1; }, absl::Seconds(10)));
  EXPECT_TRUE(WaitFor([&] { return Idle(r); }));
  EXPECT_EQ(RequestsTotal(r, "dense", "OK"), 0);
  slow.reset();  // the blocked write fails once the connection is gone
  // A client that reads gets a request whose images fit the bound.
  client::GenerateResult ok = client::CallGenerate(*r.stub, Request(2), 20);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.images.size(), 2u);
}

TEST(HostileClientsTest, MaxConcurrentStreamsLimitsStreamsPerConnection) {
  FakeEngineOptions o;
  o.token_grid = 12;  // 144 steps of 2 ms
  o.step_time = absl::Milliseconds(2);
  for (int limit : {2, 0}) {
    server::ServerConfig c = LoopbackConfig("fake");
    c.connections.max_concurrent_streams = limit;
    c.max_batch_rows = 64;
    ASSERT_RUNNING(r, Start(c, o));
    std::vector<std::thread> callers;
    std::atomic<int> ok{0};
    for (int i = 0; i < 4; ++i) {
      callers.emplace_back([&] { ok += client::CallGenerate(*r.stub, Request(), 30).status.ok() ? 1 : 0; });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(ok.load(), 4) << "limit " << limit;
    if (limit == 2) {
      EXPECT_LE(r.engine->max_groups_in_step(), 2);  // one connection, at most 2 streams at once
    } else {
      EXPECT_GE(r.engine->max_groups_in_step(), 3);  // control: no limit
    }
  }
}

TEST(HostileClientsTest, StreamsBeyondMaxThreadsAreRefusedNotQueuedForever) {
  FakeEngineOptions o;
  o.token_grid = 12;  // 144 steps of 2 ms: the first streams hold their threads a while
  o.step_time = absl::Milliseconds(2);
  server::ServerConfig c = LoopbackConfig("fake");
  c.connections.max_threads = 6;
  ASSERT_RUNNING(r, Start(c, o));
  constexpr int kStreams = 24;
  std::vector<std::thread> callers;
  std::atomic<int> ok{0}, exhausted{0}, other{0};
  for (int i = 0; i < kStreams; ++i) {
    callers.emplace_back([&] {
      const grpc::StatusCode code = client::CallGenerate(*r.stub, Request(), 30).status.error_code();
      (code == grpc::OK ? ok : code == grpc::RESOURCE_EXHAUSTED ? exhausted : other)++;
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(exhausted.load(), 0) << "every stream got a thread: the quota did not act";
  EXPECT_EQ(other.load(), 0);
  EXPECT_TRUE(WaitFor([&] { return Idle(r); }));
  EXPECT_TRUE(client::CallGenerate(*r.stub, Request(), 30).status.ok());  // and it serves on
}

TEST(HostileClientsTest, IdleConnectionsAreClosedAfterMaxConnectionIdle) {
  for (double idle_s : {0.3, 0.0}) {
    server::ServerConfig c = LoopbackConfig("fake");
    c.connections.max_connection_idle_s = idle_s;
    ASSERT_RUNNING(r, Start(c));
    EXPECT_TRUE(client::CallGenerate(*r.stub, Request(), 10).status.ok());
    EXPECT_EQ(r.channel->GetState(false), GRPC_CHANNEL_READY);
    absl::SleepFor(absl::Milliseconds(1500));
    // The server's GOAWAY sends the client channel back to IDLE.
    EXPECT_EQ(r.channel->GetState(false), idle_s > 0 ? GRPC_CHANNEL_IDLE : GRPC_CHANNEL_READY)
        << "max_connection_idle_s " << idle_s;
  }
}

TEST(HostileClientsTest, MaxConnectionAgeLetsStreamsFinishWithinTheGrace) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.connections.max_connection_age_s = 0.2;
  c.connections.max_connection_age_grace_s = 10;
  FakeEngineOptions o;
  o.token_grid = 16;  // ~0.5 s per request, past the age
  o.step_time = absl::Milliseconds(2);
  ASSERT_RUNNING(r, Start(c, o));
  client::GenerateResult result = client::CallGenerate(*r.stub, Request(), 10);
  EXPECT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_TRUE(WaitFor([&] { return r.channel->GetState(false) != GRPC_CHANNEL_READY; }, absl::Seconds(3)))
      << "no GOAWAY after max_connection_age_s";
  // Clients reconnect transparently.
  EXPECT_TRUE(client::CallGenerate(*r.stub, Request(), 10).status.ok());
}

TEST(HostileClientsTest, KeepaliveClosesTheConnectionOfADeadPeer) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.connections.keepalive_time_s = 0.3;
  c.connections.keepalive_timeout_s = 0.3;
  FakeEngineOptions o;
  o.token_grid = 48;  // 2304 steps of 2 ms: the call outlives the peer
  o.step_time = absl::Milliseconds(2);
  ASSERT_RUNNING(r, Start(c, o));
  std::unique_ptr<RawHttp2Client> dead = RawHttp2Client::Connect(r.server->port());
  ASSERT_NE(dead, nullptr);
  v1::GenerateRequest req = Request();
  req.set_progress_interval_ms(1);
  ASSERT_TRUE(dead->StartCall("/argen.v1.ArGen/Generate", Serialized(req)));
  const absl::Time start = absl::Now();
  // It reads but never answers a PING.
  EXPECT_TRUE(dead->ReadUntilClosed(absl::Seconds(4))) << "the server kept a dead peer's connection";
  EXPECT_GE(dead->pings_received(), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_TRUE(WaitFor([&] { return Idle(r); }));  // its request ended, KV freed
  EXPECT_EQ(RequestsTotal(r, "dense", "CANCELLED"), 1);
}

TEST(HostileClientsTest, IdleConnectionsCannotStarveAMetricsScrape) {
  ASSERT_RUNNING(r, Start(LoopbackConfig("fake")));
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(r.server->metrics_port()));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    idle.push_back(fd);
  }
  absl::SleepFor(absl::Milliseconds(100));  // the server has seen them all
  const absl::Time start = absl::Now();
  const std::string body = HttpGet(r.server->metrics_port(), "/metrics");
  const absl::Duration took = absl::Now() - start;
  EXPECT_NE(body.find("argen_"), std::string::npos) << "no scrape answer";
  EXPECT_LT(took, absl::Seconds(2)) << "the scrape waited behind idle connections";
  for (int fd : idle) close(fd);
}

}  // namespace
}  // namespace argen::reliability_test
