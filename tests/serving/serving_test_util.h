// Shared pieces of the serving tests: an in-process server on loopback with
// a client stub, an engine decorator that records KV use at every step, and a
// minimal HTTP GET for scraping /metrics.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "argen/v1/argen.grpc.pb.h"
#include "engine/engine.h"
#include "grpc/reflection/v1/reflection.pb.h"
#include "server/argen_server.h"

namespace argen::serving_test {

// Forwards to an engine and records KvBytesInUse before and after each step.
class WatchingEngine : public engine::Engine {
 public:
  explicit WatchingEngine(std::unique_ptr<engine::Engine> inner) : inner_(std::move(inner)) {}
  const engine::ModelInfo& info() const override { return inner_->info(); }
  absl::StatusOr<engine::PreparedRequest> Prepare(const engine::GenerationRequest& r) const override {
    return inner_->Prepare(r);
  }
  bool CanAdd(const engine::PreparedRequest& r) const override { return inner_->CanAdd(r); }
  using engine::Engine::Add;
  absl::StatusOr<engine::GroupId> Add(engine::RequestPtr r) override;
  absl::StatusOr<engine::StepReport> Step() override;
  void Remove(engine::GroupId id) override { inner_->Remove(id); }
  absl::StatusOr<engine::GroupState> State(engine::GroupId id) const override { return inner_->State(id); }
  int64_t KvBytesInUse() const override { return inner_->KvBytesInUse(); }
  int64_t SharedKvBytes() const override { return inner_->SharedKvBytes(); }
  int32_t RunningRows() const override { return inner_->RunningRows(); }
  absl::StatusOr<std::vector<engine::RgbImage>> DecodeImages(const std::vector<std::vector<int32_t>>& grids) override {
    return inner_->DecodeImages(grids);
  }

  // Sleeps this long in every Step (tests that need the decode loop slower
  // than the image path, e.g. so that no preview is dropped).
  void set_step_delay(absl::Duration delay) { step_delay_us_.store(absl::ToInt64Microseconds(delay)); }

  int64_t peak_kv_bytes() const { return peak_kv_.load(); }
  int64_t steps() const { return steps_.load(); }
  int32_t peak_rows() const { return peak_rows_.load(); }

 private:
  void Observe();
  std::unique_ptr<engine::Engine> inner_;
  std::atomic<int64_t> peak_kv_{0};
  std::atomic<int64_t> steps_{0};
  std::atomic<int32_t> peak_rows_{0};
  std::atomic<int64_t> step_delay_us_{0};
};

// A server on 127.0.0.1 with ephemeral gRPC and metrics ports.
struct TestServer {
  std::unique_ptr<server::ArgenServer> server;
  WatchingEngine* engine = nullptr;  // owned by the server
  std::unique_ptr<v1::ArGen::Stub> stub;
  std::string address;
};

server::ServerConfig LoopbackConfig(const std::string& model_dir);
// The server with a client stub, or why it did not start (a null engine
// included). Tests take it with ASSERT_STARTED, never using a half-started one.
absl::StatusOr<TestServer> StartServer(const server::ServerConfig& config, std::unique_ptr<engine::Engine> engine,
                                       scheduler::ImageEncoder encoder = nullptr);

// `TestServer var = <absl::StatusOr<TestServer> expr>`, or the test fails
// with the start error and returns.
#define ASSERT_STARTED(var, expr)                                       \
  absl::StatusOr<::argen::serving_test::TestServer> var##_or_ = (expr); \
  ASSERT_TRUE(var##_or_.ok()) << var##_or_.status();                    \
  ::argen::serving_test::TestServer var = *std::move(var##_or_)

// Sends `request` as is to 127.0.0.1:<port> and reads until the server closes
// (or 10 s pass); the whole response, or "" when nothing came back.
std::string HttpExchange(int port, const std::string& request);

// GET http://127.0.0.1:<port><path>; the body, or "" on failure.
std::string HttpGet(int port, const std::string& path);

std::string SourceDir();

// One server reflection exchange with `address` over `method`
// ("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo" or the
// v1alpha one: both share the wire format); an empty response on failure.
grpc::reflection::v1::ServerReflectionResponse Reflect(const std::string& address, const std::string& method,
                                                       const grpc::reflection::v1::ServerReflectionRequest& request);

// Polls `done` every millisecond for up to `timeout`; true when it held.
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(20));

}  // namespace argen::serving_test
