// The /metrics endpoint (server/prometheus_metrics.h MetricsEndpoint on
// server/http_server.h, cpp-httplib): Prometheus text and headers, other
// paths and garbage get error codes and leave it serving, silent or
// half-open clients hold a connection thread only until the keep-alive
// timeout, concurrent scrapes, startup errors name the config key, Stop() is
// prompt, and the optional API key check.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "server/prometheus_metrics.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

using server::MetricsEndpoint;

std::shared_ptr<prometheus::Registry> DemoRegistry() {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("demo_total").Help("A demo").Register(*registry).Add({{"k", "v"}}).Increment(3);
  return registry;
}

constexpr char kDemoText[] = "# HELP demo_total A demo\n# TYPE demo_total counter\ndemo_total{k=\"v\"} 3";

std::unique_ptr<MetricsEndpoint> StartOrDie(MetricsEndpoint::Authorize authorize = nullptr) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> e =
      MetricsEndpoint::Start("127.0.0.1", 0, DemoRegistry(), std::move(authorize));
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

std::string StatusLine(const std::string& response) { return response.substr(0, response.find("\r\n")); }

// A connected TCP socket to 127.0.0.1:port with a 10 s receive timeout.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval timeout{};
  timeout.tv_sec = 10;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

void ExpectServes(int port) {
  const std::string r = HttpExchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusLine(r), "HTTP/1.1 200 OK") << r;
  EXPECT_NE(r.find(kDemoText), std::string::npos) << r;
}

TEST(MetricsEndpointTest, ServesTheRegistryAsPrometheusText) {
  auto registry = DemoRegistry();
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> e = MetricsEndpoint::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(e.ok()) << e.status();
  const int port = (*e)->port();
  ASSERT_GT(port, 0);
  const std::string r = HttpExchange(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusLine(r), "HTTP/1.1 200 OK");
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Content-Length: "), std::string::npos) << r;
  EXPECT_NE(r.find(kDemoText), std::string::npos) << r;
  // HTTP/1.0 and a query string are /metrics too; HEAD has the headers only.
  EXPECT_NE(HttpGet(port, "/metrics").find(kDemoText), std::string::npos);
  EXPECT_EQ(StatusLine(HttpExchange(port, "GET /metrics?name[]=x HTTP/1.0\r\n\r\n")), "HTTP/1.1 200 OK");
  const std::string head = HttpExchange(port, "HEAD /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(StatusLine(head), "HTTP/1.1 200 OK");
  EXPECT_EQ(head.find("demo_total"), std::string::npos) << head;
  // Later changes show in later scrapes.
  prometheus::BuildCounter().Name("late_total").Help("Late").Register(*registry).Add({}).Increment();
  EXPECT_NE(HttpGet(port, "/metrics").find("late_total 1"), std::string::npos);
}

TEST(MetricsEndpointTest, OtherPathsAndGarbageGetErrorsAndItKeepsServing) {
  std::unique_ptr<MetricsEndpoint> e = StartOrDie();
  ASSERT_NE(e, nullptr);
  const int port = e->port();
  EXPECT_EQ(StatusLine(HttpExchange(port, "GET / HTTP/1.0\r\n\r\n")), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(StatusLine(HttpExchange(port, "GET /metricsx HTTP/1.0\r\n\r\n")), "HTTP/1.1 404 Not Found");
  // A known path with another method: 405 with Allow (#34; was 404).
  const std::string post = HttpExchange(port, "POST /metrics HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(StatusLine(post), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_NE(post.find("Allow: GET, HEAD, OPTIONS\r\n"), std::string::npos) << post;
  // Malformed requests (each costs the keep-alive second before the server closes).
  for (const std::string& garbage :
       {std::string("garbage\r\n\r\n"), std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15)}) {
    const std::string r = HttpExchange(port, garbage);
    EXPECT_EQ(StatusLine(r), "HTTP/1.1 400 Bad Request") << ::testing::PrintToString(garbage);
  }
  EXPECT_EQ(StatusLine(HttpExchange(port, "GET /" + std::string(20000, 'm') + " HTTP/1.0\r\n\r\n")),
            "HTTP/1.1 414 URI Too Long");
  ExpectServes(port);
}

TEST(MetricsEndpointTest, SilentAndHalfOpenClientsDoNotBlockScrapes) {
  std::unique_ptr<MetricsEndpoint> e = StartOrDie();
  ASSERT_NE(e, nullptr);
  const int silent = Connect(e->port());   // connects, never sends
  const int partial = Connect(e->port());  // half a request line, then nothing
  ASSERT_EQ(send(partial, "GET /met", 8, MSG_NOSIGNAL), 8);
  const int half_closed = Connect(e->port());  // half a request, then shuts down writing
  ASSERT_EQ(send(half_closed, "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL), 23);
  shutdown(half_closed, SHUT_WR);
  const absl::Time t0 = absl::Now();
  ExpectServes(e->port());
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(500));
  // The server closes the silent one after its keep-alive timeout (1 s).
  char c;
  const absl::Time start = absl::Now();
  EXPECT_LE(recv(silent, &c, 1, 0), 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  for (int fd : {silent, partial, half_closed}) close(fd);
  // More silent clients than connection threads: a scrape waits at most
  // about one keep-alive timeout per round of them.
  std::vector<int> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(Connect(e->port()));
  const absl::Time t1 = absl::Now();
  ExpectServes(e->port());
  EXPECT_LT(absl::Now() - t1, absl::Seconds(5));
  for (int fd : idle) close(fd);
}

TEST(MetricsEndpointTest, ConcurrentScrapes) {
  std::unique_ptr<MetricsEndpoint> e = StartOrDie();
  ASSERT_NE(e, nullptr);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) ok += HttpGet(e->port(), "/metrics").find(kDemoText) != std::string::npos;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST(MetricsEndpointTest, StartErrorsNameTheConfigKey) {
  std::unique_ptr<MetricsEndpoint> first = StartOrDie();
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> again =
      MetricsEndpoint::Start("127.0.0.1", first->port(), DemoRegistry());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("metrics_port"), std::string::npos) << again.status();
  EXPECT_NE(again.status().message().find(absl::StrCat("127.0.0.1:", first->port())), std::string::npos)
      << again.status();
  EXPECT_NE(again.status().message().find("in use"), std::string::npos) << again.status();
  for (const char* address : {"not an address!", "192.0.2.1", "[zz::1]", ""}) {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> bad = MetricsEndpoint::Start(address, 0, DemoRegistry());
    ASSERT_FALSE(bad.ok()) << address;
    EXPECT_NE(bad.status().message().find("metrics_address"), std::string::npos) << bad.status();
  }
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> range = MetricsEndpoint::Start("127.0.0.1", 70000, DemoRegistry());
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("metrics_port"), std::string::npos) << range.status();
  ExpectServes(first->port());
}

TEST(MetricsEndpointTest, StopIsPromptWithConnectionsOpen) {
  std::unique_ptr<MetricsEndpoint> e = StartOrDie();
  ASSERT_NE(e, nullptr);
  const int port = e->port();
  const int silent = Connect(port);
  // A keep-alive client between scrapes.
  const int kept = Connect(port);
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(kept, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  char buf[4096];
  ASSERT_GT(recv(kept, buf, sizeof(buf), 0), 0);
  const absl::Time t0 = absl::Now();
  e.reset();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));  // the keep-alive timeout (1 s) bounds it
  EXPECT_LE(recv(silent, buf, 1, 0), 0);
  close(silent);
  close(kept);
  EXPECT_EQ(HttpExchange(port, "GET /metrics HTTP/1.0\r\n\r\n"), "");  // nothing listens
}

TEST(MetricsEndpointTest, ApiKeyCheckWhenConfigured) {
  std::unique_ptr<MetricsEndpoint> e = StartOrDie([](absl::string_view authorization) {
    if (authorization == "Bearer good") return absl::OkStatus();
    if (authorization == "Bearer weak") return absl::PermissionDeniedError("lacks the right 'metrics'");
    return absl::UnauthenticatedError("invalid API key");
  });
  ASSERT_NE(e, nullptr);
  const std::string none = HttpExchange(e->port(), "GET /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(StatusLine(none), "HTTP/1.1 401 Unauthorized") << none;
  EXPECT_NE(none.find("WWW-Authenticate: Bearer"), std::string::npos);
  EXPECT_EQ(none.find("demo_total"), std::string::npos);
  EXPECT_EQ(StatusLine(HttpExchange(e->port(), "GET /metrics HTTP/1.0\r\nAuthorization: Bearer weak\r\n\r\n")),
            "HTTP/1.1 403 Forbidden");
  const std::string ok = HttpExchange(e->port(), "GET /metrics HTTP/1.0\r\nAuthorization: Bearer good\r\n\r\n");
  EXPECT_EQ(StatusLine(ok), "HTTP/1.1 200 OK");
  EXPECT_NE(ok.find(kDemoText), std::string::npos);
}

TEST(MetricsEndpointTest, IPv6LoopbackWhenAvailable) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> e = MetricsEndpoint::Start("[::1]", 0, DemoRegistry());
  if (!e.ok()) GTEST_SKIP() << "no IPv6 loopback: " << e.status();
  EXPECT_GT((*e)->port(), 0);
}

}  // namespace
}  // namespace argen::serving_test
