// An HTTP/1.1 (optionally HTTPS) server on cpp-httplib (Debian's
// libcpp-httplib, built with OpenSSL): the OpenAI-compatible API and the
// Prometheus /metrics endpoint both run on it.
//
// Threads: one listener thread plus a pool of `threads` connection threads,
// all std::thread, so they get the process's normal stack size. (civetweb,
// behind prometheus-cpp's Exposer, starts its threads with a small fixed
// stack, which glibc refuses once a library with a large static TLS segment
// such as cuBLASLt's 94 KB is loaded; tests/serving/static_tls_test.cc keeps
// that from coming back.) A connection holds a pool thread while it is open;
// an idle keep-alive connection gives it back after `keep_alive_timeout`.
//
// Routes registered through Get()/Post() are known to the server, which is
// what both ports share (docs/serving.md, "HTTP conformance"): a known path
// asked with another method is 405 with Allow; OPTIONS answers with Allow
// (and is a CORS preflight); absolute-form targets (RFC 9112 3.2.2,
// "GET http://host/metrics") reach the same routes; requests with more than
// `max_header_count` header fields or `max_header_bytes` of them are 431;
// an X-Request-Id is echoed; CORS headers go to `allowed_origins`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "server/tls_config.h"

namespace argen::server {

struct HttpServerOptions {
  std::string address = "0.0.0.0";  // numeric IPv4/IPv6 ("::", "[::1]") or a host name
  int32_t port = 0;                 // 0: any free port
  // Config keys named in errors, e.g. {"http_address", "http_port"}.
  std::string address_key = "http_address";
  std::string port_key = "http_port";
  int32_t threads = 8;
  // > 0: one thread per open connection up to this many instead of the
  // fixed pool of `threads` (server/connection_task_queue.h), so silent
  // connections cannot delay others.
  int32_t max_connections = 0;
  bool reuse_port = false;          // SO_REUSEPORT (allow_port_sharing)
  size_t max_body_bytes = 1 << 20;  // larger bodies: 413
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration write_timeout = absl::Seconds(10);
  absl::Duration keep_alive_timeout = absl::Seconds(2);
  const TlsMaterial* tls = nullptr;  // null: plaintext
  // More header fields, or more bytes of them (names and values), than this: 431.
  // (cpp-httplib itself refuses one header line over 8 KiB with a 400.)
  size_t max_header_count = 100;
  size_t max_header_bytes = 32 << 10;
  // Origins (scheme://host[:port]) whose browser pages may call the server;
  // "*": any. Empty: no CORS headers.
  std::vector<std::string> allowed_origins;
  // Called after every response with its status code (metrics); may be empty.
  std::function<void(int status)> on_response;
};

// A route as documented: method and path with {parameters}.
struct HttpRoute {
  std::string method;  // GET, POST
  std::string path;    // e.g. /v1/models/{model}
};

// The origin-form path of a request target: "http://host:1/metrics" ->
// "/metrics"; an origin-form path is returned as it is.
std::string OriginFormPath(const std::string& target_path);

class HttpServer {
 public:
  // Binds (errors name the address or port key, or the TLS key); serves
  // nothing until Start(). Register routes on routes() in between.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Bind(const HttpServerOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes; `path` is literal except for {parameter} segments, which match
  // one path segment each and arrive in request.matches[1...].
  void Get(const std::string& path, httplib::Server::Handler handler);
  void Post(const std::string& path, httplib::Server::HandlerWithContentReader handler);
  // Every route registered, in order.
  const std::vector<HttpRoute>& served_routes() const { return served_; }
  // Renders every error response without a body of its own (404, 405, 413,
  // 431, malformed requests); Unhandled leaves the plain-text default.
  void SetErrorRenderer(httplib::Server::HandlerWithResponse renderer) { error_renderer_ = std::move(renderer); }
  // The library's server: the exception handler.
  httplib::Server& routes() { return *server_; }
  // Starts the listener thread; returns once it accepts connections.
  absl::Status Start();
  int32_t port() const { return port_; }
  bool tls() const { return tls_; }
  const HttpServerOptions& options() const { return options_; }

  // Stops accepting, waits for open connections to finish their current
  // request (streams end when their handler returns). Idempotent.
  void Stop();

 private:
  HttpServer() = default;
  struct KnownRoute {
    HttpRoute route;
    std::regex pattern;  // on the origin-form path
  };
  // The checks common to every route (see the top of this file); Handled
  // when it answered the request itself.
  httplib::Server::HandlerResponse BeforeRouting(const httplib::Request& request, httplib::Response& response) const;
  void SetCorsHeaders(const httplib::Request& request, httplib::Response& response) const;
  // The methods of the routes whose path matches `request`'s (any method).
  std::set<std::string> MethodsOf(const httplib::Request& request) const;
  httplib::Server::HandlerResponse OnError(const httplib::Request& request, httplib::Response& response) const;
  // The library's pattern of `path` (absolute-form prefix allowed).
  std::string Register(const std::string& method, const std::string& path);

  HttpServerOptions options_;
  std::vector<HttpRoute> served_;
  std::vector<KnownRoute> known_;
  httplib::Server::HandlerWithResponse error_renderer_;
  std::unique_ptr<httplib::Server> server_;
  bool tls_ = false;
  int32_t port_ = 0;
  std::thread listener_;
};

// The socket of the connection a handler serves (cpp-httplib 0.11 does not
// expose it; found by the connection's addresses), or -1.
int ConnectionSocket(const httplib::Request& request);

// True once the peer has closed or reset the connection (never blocks).
bool PeerClosed(int socket_fd);

}  // namespace argen::server
