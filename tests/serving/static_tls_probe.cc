// Run by tests/serving/static_tls_test.cc, with and without LD_PRELOAD of a
// library holding 256 KiB of static TLS. Prints one line per check:
//   small_stack_thread: ok | <errno>   a thread with a 128 KiB stack (civetweb-like)
//   metrics: <HTTP status>             GET /metrics from MetricsEndpoint
//   http_api: <HTTP status>            GET /health from the HTTP API server
// Exit code 0 when both HTTP checks answered 200.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "prometheus/registry.h"
#include "server/http_images_api.h"
#include "server/http_server.h"
#include "server/prometheus_metrics.h"

namespace {

std::string StatusOf(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
    send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (response.size() < 12) return "no answer";
  return response.substr(9, 3);
}

}  // namespace

int main() {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  pthread_t thread;
  const int rc = pthread_create(
      &thread, &attr, [](void*) -> void* { return nullptr; }, nullptr);
  pthread_attr_destroy(&attr);
  if (rc == 0) pthread_join(thread, nullptr);
  std::cout << "small_stack_thread: " << (rc == 0 ? "ok" : rc == EINVAL ? "EINVAL" : strerror(rc)) << std::endl;

  auto metrics = argen::server::MetricsEndpoint::Start("127.0.0.1", 0, std::make_shared<prometheus::Registry>());
  std::string metrics_status = metrics.ok() ? StatusOf((*metrics)->port(), "/metrics") : metrics.status().ToString();
  std::cout << "metrics: " << metrics_status << std::endl;

  argen::server::HttpServerOptions options;
  options.address = "127.0.0.1";
  auto http = argen::server::HttpServer::Bind(options);
  std::string http_status = http.ok() ? "" : http.status().ToString();
  std::unique_ptr<argen::server::HttpImagesApi> api;
  if (http.ok()) {
    argen::server::ServerConfig config;
    api = std::make_unique<argen::server::HttpImagesApi>(http->get(), config, nullptr, nullptr);
    absl::Status started = (*http)->Start();
    http_status = started.ok() ? StatusOf((*http)->port(), "/health") : started.ToString();
  }
  std::cout << "http_api: " << http_status << std::endl;
  return metrics_status == "200" && http_status == "200" ? 0 : 1;
}
