#include "server/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

}  // namespace

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
  return server;
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
