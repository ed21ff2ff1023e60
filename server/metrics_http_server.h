// A small HTTP/1.1 server for Prometheus scrapes: GET (or HEAD) /metrics
// answers 200 with the text a callback renders; other paths 404, other
// methods 405, malformed requests 400, oversized ones 431; every response
// says Connection: close.
//
// One listener thread (std::thread, so a normal-sized stack; the civetweb
// server prometheus-cpp's Exposer used could not start its small-stack
// threads in processes that load libraries with a large static TLS, such as
// cuBLAS) runs a poll() loop over the listening socket and every open
// connection, all non-blocking: a client that connects and never sends (or
// never reads) holds only its own slot until its deadline, never the loop.
// Stop() wakes the loop through a pipe and returns at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace argen::server {

struct MetricsHttpOptions {
  // A request must arrive complete (request line and headers) within this.
  absl::Duration read_timeout = absl::Seconds(5);
  // The response must be written within this once it is ready.
  absl::Duration write_timeout = absl::Seconds(10);
  // Request line + headers beyond this: 431 and close.
  size_t max_request_bytes = 8192;
  // Connections open at once; more wait in the listen backlog.
  int max_connections = 64;
};

class MetricsHttpServer {
 public:
  // The body of a 200 answer to GET /metrics; called on the listener thread.
  using Render = std::function<std::string()>;

  // Binds address:port (port 0: any free port) and starts the thread.
  // `address` is numeric IPv4/IPv6 ("0.0.0.0", "127.0.0.1", "::", "[::1]")
  // or a host name. Errors name metrics_address / metrics_port.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& address,
                                                                   int32_t port, Render render,
                                                                   MetricsHttpOptions options = {});
  ~MetricsHttpServer();

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The bound port (the ephemeral one when started with port 0).
  int32_t port() const { return port_; }

  // Closes the listener and every connection; returns once the thread ended.
  // Idempotent.
  void Stop();

 private:
  struct Connection;
  MetricsHttpServer(int listen_fd, int32_t port, Render render, MetricsHttpOptions options);
  void Loop();
  // Parses conn's request buffer once complete and queues the response.
  void Respond(Connection& conn);

  const int listen_fd_;
  const int32_t port_;
  const Render render_;
  const MetricsHttpOptions options_;
  int wake_read_ = -1;
  int wake_write_ = -1;
  std::mutex stop_mu_;  // serializes Stop()
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace argen::server
