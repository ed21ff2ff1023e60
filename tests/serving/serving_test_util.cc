#include "tests/serving/serving_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "client/generate_call.h"
#include "gtest/gtest.h"

namespace argen::serving_test {

absl::StatusOr<engine::GroupId> WatchingEngine::Add(const engine::PreparedRequest& r) {
  absl::StatusOr<engine::GroupId> id = inner_->Add(r);
  Observe();
  return id;
}

absl::StatusOr<engine::StepReport> WatchingEngine::Step() {
  Observe();
  absl::StatusOr<engine::StepReport> report = inner_->Step();
  steps_.fetch_add(1);
  Observe();
  return report;
}

void WatchingEngine::Observe() {
  const int64_t kv = inner_->KvBytesInUse();
  int64_t prev = peak_kv_.load();
  while (kv > prev && !peak_kv_.compare_exchange_weak(prev, kv)) {}
  const int32_t rows = inner_->RunningRows();
  int32_t prev_rows = peak_rows_.load();
  while (rows > prev_rows && !peak_rows_.compare_exchange_weak(prev_rows, rows)) {}
}

server::ServerConfig LoopbackConfig(const std::string& model_dir) {
  server::ServerConfig c;
  c.model_dir = model_dir;
  c.listen_address = "127.0.0.1";
  c.port = 0;
  c.metrics_address = "127.0.0.1";
  c.metrics_port = -1;  // tests that scrape set 0 (stopping the exporter takes ~2 s)
  c.threads = 1;
  c.drain_timeout_s = 30;
  return c;
}

TestServer StartServer(const server::ServerConfig& config, std::unique_ptr<engine::Engine> engine) {
  TestServer t;
  auto watching = std::make_unique<WatchingEngine>(std::move(engine));
  t.engine = watching.get();
  absl::StatusOr<std::unique_ptr<server::ArgenServer>> s =
      server::ArgenServer::Start(config, std::move(watching));
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return t;
  t.server = *std::move(s);
  t.address = absl::StrCat("127.0.0.1:", t.server->port());
  t.stub = v1::ArGen::NewStub(client::MakeChannel(t.address, 64 << 20));
  return t;
}

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

std::string SourceDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

}  // namespace argen::serving_test
