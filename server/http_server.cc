#include "server/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/connection_task_queue.h"

namespace argen::server {
namespace {

time_t WholeSeconds(absl::Duration d) { return static_cast<time_t>(std::max<int64_t>(1, absl::ToInt64Seconds(d))); }

// Numeric host of `addr` and its port.
bool AddressOf(const sockaddr_storage& addr, std::string& host, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    if (inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text)) == nullptr) return false;
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text)) == nullptr) return false;
    port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  host = text;
  return true;
}

std::string ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return status >= 500 ? "Server Error" : "Client Error";
  }
}

// Request "headers" cpp-httplib adds itself (the connection's addresses).
bool AddedByLibrary(const std::string& name) {
  return name == "REMOTE_ADDR" || name == "REMOTE_PORT" || name == "LOCAL_ADDR" || name == "LOCAL_PORT";
}

// The methods a path's routes take, as an Allow header value.
std::string AllowValue(const std::set<std::string>& methods) {
  std::vector<std::string> allow(methods.begin(), methods.end());
  if (methods.count("GET") > 0) allow.push_back("HEAD");
  allow.push_back("OPTIONS");
  return absl::StrJoin(allow, ", ");
}

// The same rule gRPC's request_id follows (server/request_mapping.cc).
bool EchoableId(const std::string& id) {
  return !id.empty() && id.size() <= 128 &&
         std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 127; });
}

std::string RegexEscaped(const std::string& literal) {
  static const std::string kSpecial = R"(\^$.|?*+()[]{})";
  std::string out;
  for (char c : literal) {
    if (kSpecial.find(c) != std::string::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// `path` with each {parameter} segment as a capture of one segment.
std::string PathRegex(const std::string& path) {
  std::string out;
  size_t at = 0;
  while (at < path.size()) {
    const size_t open = path.find('{', at);
    if (open == std::string::npos) {
      out += RegexEscaped(path.substr(at));
      break;
    }
    const size_t close = path.find('}', open);
    out += RegexEscaped(path.substr(at, open - at)) + "([^/]+)";
    at = close == std::string::npos ? path.size() : close + 1;
  }
  return out;
}

// scheme "://" authority, the part of an absolute-form target before its path.
constexpr char kAbsoluteFormPrefix[] = "(?:[A-Za-z][A-Za-z0-9+.-]*://[^/]*)?";

}  // namespace

std::string OriginFormPath(const std::string& target_path) {
  static const std::regex absolute("^[A-Za-z][A-Za-z0-9+.-]*://[^/]*");
  std::smatch m;
  if (!std::regex_search(target_path, m, absolute)) return target_path;
  const std::string rest = m.suffix().str();
  return rest.empty() ? "/" : rest;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Bind(const HttpServerOptions& options) {
  const std::string where = absl::StrCat(options.address, ":", options.port);
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("key '", options.port_key, "': ", options.port,
                                                   " is not a TCP port (0-65535; 0 picks a free one)"));
  }
  std::string host = options.address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", options.address_key, "': empty (want e.g. 0.0.0.0 or 127.0.0.1)"));
  }
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->options_ = options;
  if (options.tls != nullptr) {
    absl::Status tls_status;
    const TlsMaterial material = *options.tls;
    server->server_ = std::make_unique<httplib::SSLServer>([&](SSL_CTX& context) {
      tls_status = ConfigureServerContext(&context, material);
      return tls_status.ok();
    });
    if (!server->server_->is_valid()) {
      return tls_status.ok() ? absl::InternalError("TLS: cannot create the OpenSSL context") : tls_status;
    }
    server->tls_ = true;
  } else {
    server->server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& s = *server->server_;
  if (options.on_response) {
    // httplib calls its logger once per response, errors and streams included.
    s.set_logger([on_response = options.on_response](const httplib::Request&, const httplib::Response& response) {
      on_response(response.status);
    });
  }
  const size_t threads = static_cast<size_t>(std::max(1, options.threads));
  // httplib's pool of std::threads: the default stack size (see the header).
  if (options.max_connections > 0) {
    const size_t max_connections = static_cast<size_t>(options.max_connections);
    s.new_task_queue = [max_connections] { return new ConnectionTaskQueue(max_connections); };
  } else {
    s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  }
  s.set_read_timeout(WholeSeconds(options.read_timeout));
  s.set_write_timeout(WholeSeconds(options.write_timeout));
  s.set_keep_alive_timeout(WholeSeconds(options.keep_alive_timeout));
  s.set_keep_alive_max_count(100);
  s.set_payload_max_length(options.max_body_bytes);
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would
  // let a second server bind the same port and silently share its traffic
  // (unless allow_port_sharing asks for exactly that).
  const bool reuse_port = options.reuse_port;
  s.set_socket_options([reuse_port](socket_t fd) {
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &yes, sizeof(yes));
  });

  errno = 0;
  int port = options.port;
  bool bound = false;
  if (options.port == 0) {
    port = s.bind_to_any_port(host);
    bound = port > 0;
  } else {
    bound = s.bind_to_port(host, options.port);
  }
  if (!bound) {
    const int err = errno;
    const bool bad_address = err == EADDRNOTAVAIL || err == 0 || err == EAFNOSUPPORT;
    return absl::UnavailableError(
        absl::StrCat("key '", bad_address ? options.address_key : options.port_key, "': cannot listen on ", where,
                     err != 0 ? absl::StrCat(": ", std::error_code(err, std::generic_category()).message())
                              : ": address not found"));
  }
  server->port_ = port;
  HttpServer* raw = server.get();
  s.set_pre_routing_handler([raw](const httplib::Request& request, httplib::Response& response) {
    return raw->BeforeRouting(request, response);
  });
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [raw](const httplib::Request& request, httplib::Response& response) { return raw->OnError(request, response); }));
  return server;
}

std::string HttpServer::Register(const std::string& method, const std::string& path) {
  served_.push_back(HttpRoute{method, path});
  const std::string origin_form = PathRegex(path);
  known_.push_back(KnownRoute{served_.back(), std::regex(origin_form)});
  return kAbsoluteFormPrefix + origin_form;
}

void HttpServer::Get(const std::string& path, httplib::Server::Handler handler) {
  server_->Get(Register("GET", path), std::move(handler));
}

void HttpServer::Post(const std::string& path, httplib::Server::HandlerWithContentReader handler) {
  server_->Post(Register("POST", path), std::move(handler));
}

void HttpServer::SetCorsHeaders(const httplib::Request& request, httplib::Response& response) const {
  const std::string origin = request.get_header_value("Origin");
  if (origin.empty()) return;
  const std::vector<std::string>& allowed = options_.allowed_origins;
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return;
  response.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) response.set_header("Vary", "Origin");
  response.set_header("Access-Control-Expose-Headers", "X-Request-Id, Warning, Retry-After");
}

httplib::Server::HandlerResponse HttpServer::BeforeRouting(const httplib::Request& request,
                                                           httplib::Response& response) const {
  using Handled = httplib::Server::HandlerResponse;
  size_t count = 0, bytes = 0;
  for (const auto& [name, value] : request.headers) {
    if (AddedByLibrary(name)) continue;
    ++count;
    bytes += name.size() + value.size();
  }
  if (count > options_.max_header_count || bytes > options_.max_header_bytes) {
    response.status = 431;
    response.set_header("Connection", "close");
    return Handled::Handled;
  }
  if (const std::string id = request.get_header_value("X-Request-Id"); EchoableId(id)) {
    response.set_header("X-Request-Id", id);
  }
  SetCorsHeaders(request, response);
  if (request.method != "OPTIONS") return Handled::Unhandled;  // a wrong method: 405 in OnError
  const std::set<std::string> methods = MethodsOf(request);
  if (methods.empty()) return Handled::Unhandled;  // 404
  // OPTIONS: Allow, and a CORS preflight's answer.
  response.status = 204;
  response.set_header("Allow", AllowValue(methods));
  if (response.has_header("Access-Control-Allow-Origin")) {
    response.set_header("Access-Control-Allow-Methods", AllowValue(methods));
    const std::string asked = request.get_header_value("Access-Control-Request-Headers");
    response.set_header("Access-Control-Allow-Headers",
                        asked.empty() ? "Authorization, Content-Type, X-Request-Id" : asked);
    response.set_header("Access-Control-Max-Age", "600");
  }
  return Handled::Handled;
}

std::set<std::string> HttpServer::MethodsOf(const httplib::Request& request) const {
  const std::string path = OriginFormPath(request.path);
  std::set<std::string> methods;
  for (const KnownRoute& k : known_) {
    if (std::regex_match(path, k.pattern)) methods.insert(k.route.method);
  }
  return methods;
}

httplib::Server::HandlerResponse HttpServer::OnError(const httplib::Request& request,
                                                     httplib::Response& response) const {
  // No route took it, but its path is known: the method is wrong (the body,
  // if any, has been read, so the connection stays usable).
  if (response.status == 404) {
    const std::set<std::string> methods = MethodsOf(request);
    const std::string method = request.method == "HEAD" ? "GET" : request.method;
    if (!methods.empty() && methods.count(method) == 0) {  // (a route's own 404 keeps its status)
      response.status = 405;
      response.set_header("Allow", AllowValue(methods));
    }
  }
  if (!response.body.empty() || response.content_provider_) return httplib::Server::HandlerResponse::Unhandled;
  if (error_renderer_ && error_renderer_(request, response) == httplib::Server::HandlerResponse::Handled) {
    return httplib::Server::HandlerResponse::Handled;
  }
  std::string text = absl::StrCat("HTTP ", response.status, " ", ReasonPhrase(response.status));
  if (response.status == 405) {
    absl::StrAppend(&text, ": ", request.method, " ", request.path, " (allowed: ", response.get_header_value("Allow"),
                    ")");
  }
  response.set_content(text + "\n", "text/plain; charset=utf-8");
  return httplib::Server::HandlerResponse::Handled;
}

absl::Status HttpServer::Start() {
  if (listener_.joinable()) return absl::OkStatus();
  try {
    listener_ = std::thread([this] { server_->listen_after_bind(); });
  } catch (const std::system_error& e) {
    return absl::UnavailableError(
        absl::StrCat("key '", options_.port_key, "': cannot start the listener thread: ", e.what()));
  }
  // stop() is a no-op until the listener runs; wait for it.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!server_->is_running() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  if (!server_->is_running()) return absl::UnavailableError("HTTP listener did not start");
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (listener_.joinable()) listener_.join();  // the pool joins its threads first
}

HttpServer::~HttpServer() { Stop(); }

int ConnectionSocket(const httplib::Request& request) {
  if (request.ssl != nullptr) return SSL_get_fd(request.ssl);
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      continue;
    }
    std::string local_host, peer_host;
    int local_port = 0, peer_port = 0;
    if (!AddressOf(local, local_host, local_port) || !AddressOf(peer, peer_host, peer_port)) continue;
    if (local_port == request.local_port && peer_port == request.remote_port && peer_host == request.remote_addr &&
        local_host == request.local_addr) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

bool PeerClosed(int socket_fd) {
  if (socket_fd < 0) return false;
  pollfd p{socket_fd, static_cast<short>(POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace argen::server
