// The /metrics HTTP server (server/metrics_http_server.h) on its own: status
// codes and headers, bad input of every kind (garbage, oversized, half-open
// connections, more connections than it keeps open) leaves it serving,
// startup errors name the config key, Stop() is prompt; and MetricsEndpoint
// serves a prometheus-cpp registry in the text format.
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
#include "server/metrics_http_server.h"
#include "server/prometheus_metrics.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

using server::MetricsHttpOptions;
using server::MetricsHttpServer;

constexpr char kBody[] = "# TYPE x counter\nx 1\n";

std::unique_ptr<MetricsHttpServer> StartOrDie(MetricsHttpOptions options = {}) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> s =
      MetricsHttpServer::Start("127.0.0.1", 0, [] { return std::string(kBody); }, options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
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
  const std::string r = HttpExchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(StatusLine(r), "HTTP/1.1 200 OK") << r;
  EXPECT_NE(r.find(kBody), std::string::npos) << r;
}

TEST(MetricsHttpServerTest, ServesMetricsWithPrometheusHeaders) {
  std::unique_ptr<MetricsHttpServer> s = StartOrDie();
  ASSERT_NE(s, nullptr);
  ASSERT_GT(s->port(), 0);
  const std::string r = HttpExchange(s->port(), "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                "Accept-Encoding: gzip\r\n\r\n");
  EXPECT_EQ(r, absl::StrCat("HTTP/1.1 200 OK\r\n"
                            "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                            "Content-Length: ",
                            sizeof(kBody) - 1, "\r\nConnection: close\r\n\r\n", kBody));
  // HTTP/1.0, bare LF line ends, a query string, absolute form: all /metrics.
  EXPECT_EQ(HttpGet(s->port(), "/metrics"), kBody);
  EXPECT_EQ(StatusLine(HttpExchange(s->port(), "GET /metrics HTTP/1.0\n\n")), "HTTP/1.1 200 OK");
  EXPECT_EQ(StatusLine(HttpExchange(s->port(), "GET /metrics?name[]=x HTTP/1.1\r\n\r\n")), "HTTP/1.1 200 OK");
  EXPECT_EQ(StatusLine(HttpExchange(s->port(), "GET http://h:1/metrics HTTP/1.1\r\n\r\n")), "HTTP/1.1 200 OK");
  // HEAD: the headers (Content-Length of the GET body), no body.
  const std::string head = HttpExchange(s->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(StatusLine(head), "HTTP/1.1 200 OK");
  EXPECT_NE(head.find(absl::StrCat("Content-Length: ", sizeof(kBody) - 1)), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << head;
}

TEST(MetricsHttpServerTest, OtherPathsMethodsAndGarbageGetTheirCodes) {
  std::unique_ptr<MetricsHttpServer> s = StartOrDie();
  ASSERT_NE(s, nullptr);
  const int port = s->port();
  EXPECT_EQ(StatusLine(HttpExchange(port, "GET / HTTP/1.1\r\n\r\n")), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(StatusLine(HttpExchange(port, "GET /metricsx HTTP/1.1\r\n\r\n")), "HTTP/1.1 404 Not Found");
  const std::string post = HttpExchange(port, "POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(StatusLine(post), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_NE(post.find("Allow: GET, HEAD\r\n"), std::string::npos) << post;
  for (const std::string& garbage :
       {std::string("garbage\r\n\r\n"), std::string("GET\r\n\r\n"), std::string("GET /metrics\r\n\r\n"),
        std::string("GET /metrics HTTP/2.0\r\n\r\n"), std::string("GET metrics HTTP/1.1\r\n\r\n"),
        std::string("GET  /metrics HTTP/1.1\r\n\r\n"), std::string("get /metrics HTTP/1.1\r\n\r\n"),
        std::string(" GET /metrics HTTP/1.1\r\n\r\n"), std::string("GET /met\x01rics HTTP/1.1\r\n\r\n"),
        // Binary (a TLS ClientHello's first bytes, NULs): refused at once, no line end needed.
        std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11), std::string(64, '\0')}) {
    const std::string r = HttpExchange(port, garbage);
    EXPECT_EQ(StatusLine(r), "HTTP/1.1 400 Bad Request") << ::testing::PrintToString(garbage);
    EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos);
  }
  // Headers past the 8 KiB cap (with and without an end), a request line past it.
  const std::string big_header(20000, 'a');
  EXPECT_EQ(StatusLine(HttpExchange(port, "GET /metrics HTTP/1.1\r\nX-Big: " + big_header + "\r\n\r\n")),
            "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_EQ(StatusLine(HttpExchange(port, "GET /metrics HTTP/1.1\r\nX-Big: " + big_header)),
            "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_EQ(StatusLine(HttpExchange(port, "GET /" + std::string(1 << 20, 'm'))),
            "HTTP/1.1 431 Request Header Fields Too Large");
  // A megabyte of garbage is refused at its first byte.
  EXPECT_EQ(StatusLine(HttpExchange(port, std::string(1 << 20, '%'))), "HTTP/1.1 400 Bad Request");
  ExpectServes(port);
}

TEST(MetricsHttpServerTest, HalfOpenAndSilentConnectionsDoNotBlockScrapes) {
  MetricsHttpOptions o;
  o.read_timeout = absl::Milliseconds(300);
  std::unique_ptr<MetricsHttpServer> s = StartOrDie(o);
  ASSERT_NE(s, nullptr);
  const int silent = Connect(s->port());                 // connects, never sends
  const int partial = Connect(s->port());                // half a request line, then nothing
  ASSERT_EQ(send(partial, "GET /met", 8, MSG_NOSIGNAL), 8);
  const int half_closed = Connect(s->port());            // half a request, then shuts down writing
  ASSERT_EQ(send(half_closed, "GET /metrics HTTP/1.1\r\n", 23, MSG_NOSIGNAL), 23);
  shutdown(half_closed, SHUT_WR);
  // Scrapes are answered at once while those are open.
  const absl::Time t0 = absl::Now();
  ExpectServes(s->port());
  ExpectServes(s->port());
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(250));
  // The server closes each after its read timeout (or at once for the half-closed one).
  char c;
  for (int fd : {silent, partial, half_closed}) {
    const absl::Time start = absl::Now();
    EXPECT_EQ(recv(fd, &c, 1, 0), 0);
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    close(fd);
  }
  ExpectServes(s->port());
}

TEST(MetricsHttpServerTest, MoreConnectionsThanItKeepsWaitInTheBacklog) {
  MetricsHttpOptions o;
  o.read_timeout = absl::Milliseconds(200);
  o.max_connections = 4;
  std::unique_ptr<MetricsHttpServer> s = StartOrDie(o);
  ASSERT_NE(s, nullptr);
  std::vector<int> idle;
  for (int i = 0; i < 12; ++i) idle.push_back(Connect(s->port()));
  // Served once the idle ones ahead of it time out (4 at a time, 200 ms each).
  const absl::Time t0 = absl::Now();
  ExpectServes(s->port());
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  for (int fd : idle) close(fd);
  ExpectServes(s->port());
}

TEST(MetricsHttpServerTest, ConcurrentScrapes) {
  std::unique_ptr<MetricsHttpServer> s = StartOrDie();
  ASSERT_NE(s, nullptr);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) ok += HttpGet(s->port(), "/metrics") == kBody ? 1 : 0;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST(MetricsHttpServerTest, ClientThatNeverReadsALargeResponseIsDropped) {
  MetricsHttpOptions o;
  o.write_timeout = absl::Milliseconds(300);
  const std::string big(16 << 20, 'x');
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> s =
      MetricsHttpServer::Start("127.0.0.1", 0, [&] { return big; }, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const int fd = Connect((*s)->port());
  ASSERT_GT(send(fd, "GET /metrics HTTP/1.1\r\n\r\n", 25, MSG_NOSIGNAL), 0);
  absl::SleepFor(absl::Milliseconds(800));  // never reading; the server gives up on it
  const std::string r = HttpExchange((*s)->port(), "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(StatusLine(r), "HTTP/1.1 404 Not Found");
  close(fd);
}

TEST(MetricsHttpServerTest, StartErrorsNameTheConfigKey) {
  // Port in use.
  std::unique_ptr<MetricsHttpServer> first = StartOrDie();
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> again =
      MetricsHttpServer::Start("127.0.0.1", first->port(), [] { return std::string(); });
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("metrics_port"), std::string::npos) << again.status();
  EXPECT_NE(again.status().message().find(absl::StrCat("127.0.0.1:", first->port())), std::string::npos)
      << again.status();
  EXPECT_NE(again.status().message().find("in use"), std::string::npos) << again.status();
  // Not an address; an address not on this host; a port out of range.
  for (const char* address : {"not an address!", "192.0.2.1", "[zz::1]"}) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> bad =
        MetricsHttpServer::Start(address, 0, [] { return std::string(); });
    ASSERT_FALSE(bad.ok()) << address;
    EXPECT_NE(bad.status().message().find("metrics_address"), std::string::npos) << bad.status();
  }
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> range =
      MetricsHttpServer::Start("127.0.0.1", 70000, [] { return std::string(); });
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("metrics_port"), std::string::npos) << range.status();
  ExpectServes(first->port());
}

TEST(MetricsHttpServerTest, StopIsPromptWithConnectionsOpen) {
  std::unique_ptr<MetricsHttpServer> s = StartOrDie();
  ASSERT_NE(s, nullptr);
  const int port = s->port();
  const int silent = Connect(port);
  const absl::Time t0 = absl::Now();
  s->Stop();
  s->Stop();  // idempotent
  s.reset();
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(200));
  char c;
  EXPECT_LE(recv(silent, &c, 1, 0), 0);  // closed by the server
  close(silent);
  EXPECT_EQ(HttpExchange(port, "GET /metrics HTTP/1.1\r\n\r\n"), "");  // nothing listens
}

TEST(MetricsHttpServerTest, IPv6LoopbackWhenAvailable) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> s =
      MetricsHttpServer::Start("[::1]", 0, [] { return std::string(kBody); });
  if (!s.ok()) GTEST_SKIP() << "no IPv6 loopback: " << s.status();
  EXPECT_GT((*s)->port(), 0);
}

TEST(MetricsEndpointTest, ServesTheRegistryAsPrometheusText) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("demo_total").Help("A demo").Register(*registry).Add({{"k", "v"}}).Increment(3);
  absl::StatusOr<std::unique_ptr<server::MetricsEndpoint>> e =
      server::MetricsEndpoint::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(e.ok()) << e.status();
  const std::string text = HttpGet((*e)->port(), "/metrics");
  EXPECT_NE(text.find("# HELP demo_total A demo\n# TYPE demo_total counter\ndemo_total{k=\"v\"} 3"),
            std::string::npos)
      << text;
  // Later changes show in later scrapes.
  prometheus::BuildCounter().Name("late_total").Help("Late").Register(*registry).Add({}).Increment();
  EXPECT_NE(HttpGet((*e)->port(), "/metrics").find("late_total 1"), std::string::npos);
}

}  // namespace
}  // namespace argen::serving_test
