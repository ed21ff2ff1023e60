#include "tests/serving/serving_test_util.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "client/generate_call.h"
#include "grpcpp/generic/generic_stub.h"

namespace argen::serving_test {

absl::StatusOr<engine::GroupId> WatchingEngine::Add(engine::RequestPtr r) {
  absl::StatusOr<engine::GroupId> id = inner_->Add(std::move(r));
  Observe();
  return id;
}

absl::StatusOr<engine::StepReport> WatchingEngine::Step() {
  if (const int64_t us = step_delay_us_.load(); us > 0) absl::SleepFor(absl::Microseconds(us));
  Observe();
  absl::StatusOr<engine::StepReport> report = inner_->Step();
  steps_.fetch_add(1);
  Observe();
  return report;
}

void WatchingEngine::Observe() {
  const int64_t kv = inner_->KvBytesInUse();
  int64_t prev = peak_kv_.load();
  while (kv > prev && !peak_kv_.compare_exchange_weak(prev, kv)) {
  }
  const int32_t rows = inner_->RunningRows();
  int32_t prev_rows = peak_rows_.load();
  while (rows > prev_rows && !peak_rows_.compare_exchange_weak(prev_rows, rows)) {
  }
}

server::ServerConfig LoopbackConfig(const std::string& model_dir) {
  server::ServerConfig c;
  c.model_dir = model_dir;
  c.listen_address = "127.0.0.1";
  c.port = 0;
  c.metrics_address = "127.0.0.1";
  c.metrics_port = -1;  // tests that scrape set 0
  c.threads = 1;
  c.drain_timeout_s = 30;
  // The CPU defaults of kv_budget_bytes / max_batch_rows "auto", as numbers:
  // the fakes take their limits from these fields.
  c.kv_budget_bytes = server::ResolvedKvBudget(c);
  c.max_batch_rows = server::ResolvedMaxBatchRows(c);
  return c;
}

absl::StatusOr<TestServer> StartServer(const server::ServerConfig& config, std::unique_ptr<engine::Engine> engine,
                                       scheduler::ImageEncoder encoder) {
  if (engine == nullptr) return absl::FailedPreconditionError("no engine to serve");
  TestServer t;
  auto watching = std::make_unique<WatchingEngine>(std::move(engine));
  t.engine = watching.get();
  absl::StatusOr<std::unique_ptr<server::ArgenServer>> s =
      server::ArgenServer::Start(config, std::move(watching), std::move(encoder));
  if (!s.ok()) return s.status();
  t.server = *std::move(s);
  if (config.metrics_port >= 0 && t.server->metrics_port() <= 0) {
    return absl::InternalError("the server started without its /metrics port");
  }
  t.address = absl::StrCat("127.0.0.1:", t.server->port());
  t.stub = v1::ArGen::NewStub(client::MakeChannel(t.address, 64 << 20));
  return t;
}

std::string HttpExchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval timeout{};
  timeout.tv_sec = 10;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    // A server may answer (and close) before taking all of an oversized
    // request; what it sent back is still read.
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

std::string HttpGet(int port, const std::string& path) {
  const std::string response = HttpExchange(port, absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"));
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

grpc::reflection::v1::ServerReflectionResponse Reflect(const std::string& address, const std::string& method,
                                                       const grpc::reflection::v1::ServerReflectionRequest& req) {
  grpc::GenericStub generic(client::MakeChannel(address, 1 << 20));
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = generic.PrepareCall(&context, method, &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](intptr_t expected) {
    EXPECT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), expected);
    return ok;
  };
  grpc::reflection::v1::ServerReflectionResponse response;
  call->StartCall(reinterpret_cast<void*>(1));
  if (!step(1)) return response;
  const std::string bytes = req.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  if (!step(2)) return response;
  grpc::ByteBuffer reply;
  call->Read(&reply, reinterpret_cast<void*>(3));
  const bool got = step(3);
  call->WritesDone(reinterpret_cast<void*>(4));
  step(4);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  if (!got) return response;
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(reply.Dump(&slices).ok());
  std::string data;
  for (const grpc::Slice& s : slices) data.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_TRUE(response.ParseFromString(data));
  return response;
}

}  // namespace argen::serving_test
