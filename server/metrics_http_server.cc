#include "server/metrics_http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace argen::server {
namespace {

constexpr absl::string_view kMetricsPath = "/metrics";
constexpr absl::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";
// After the response: how long to wait for the client to close before closing
// ourselves (reading what it still sends, so the close does not reset the
// connection before the client has read the response).
constexpr absl::Duration kLinger = absl::Seconds(1);
// After accept() fails for lack of descriptors, how long the listener rests.
constexpr absl::Duration kAcceptBackoff = absl::Milliseconds(100);

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string Response(int code, absl::string_view reason, absl::string_view content_type,
                     const std::string& body, bool head, absl::string_view extra_headers = "") {
  std::string out = absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", content_type,
                                 "\r\nContent-Length: ", body.size(), "\r\n", extra_headers,
                                 "Connection: close\r\n\r\n");
  if (!head) out += body;
  return out;
}

std::string ErrorResponse(int code, absl::string_view reason, absl::string_view extra_headers = "") {
  return Response(code, reason, "text/plain; charset=utf-8", absl::StrCat(code, " ", reason, "\n"),
                  /*head=*/false, extra_headers);
}

bool IsMethodChar(char c) { return c >= 'A' && c <= 'Z'; }

// A request target may hold printable ASCII other than space.
bool IsTargetChar(char c) { return c > ' ' && c < 0x7f; }

// The path of an origin-form ("/metrics?x") or absolute-form
// ("http://host:9464/metrics") request target; "" when it is neither.
absl::string_view TargetPath(absl::string_view target) {
  if (target.substr(0, 7) == "http://" || target.substr(0, 8) == "https://") {
    const size_t authority = target.find("//") + 2;
    const size_t slash = target.find('/', authority);
    target = slash == absl::string_view::npos ? absl::string_view("/") : target.substr(slash);
  }
  if (target.empty() || target[0] != '/') return "";
  return target.substr(0, target.find_first_of("?#"));
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

struct MetricsHttpServer::Connection {
  enum class Phase { kReading, kWriting, kLingering };
  int fd = -1;
  Phase phase = Phase::kReading;
  std::string in;
  std::string out;
  size_t sent = 0;
  absl::Time deadline;
  bool closed = false;
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& address,
                                                                             int32_t port, Render render,
                                                                             MetricsHttpOptions options) {
  const std::string bind_text = absl::StrCat(address, ":", port);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_port: ", port, " is not a TCP port (0-65535; 0 picks a free one)"));
  }
  std::string host = address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return absl::InvalidArgumentError("metrics_address: empty (want e.g. 0.0.0.0 or 127.0.0.1)");

  // Numeric addresses are taken as they are; anything else must look like a
  // host name (letters, digits, '-', '.') before the resolver is asked.
  const bool host_name = std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
  });
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc == EAI_NONAME && host_name) {
    hints.ai_flags &= ~AI_NUMERICHOST;
    rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  }
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("metrics_address: cannot serve /metrics on ", bind_text,
                                                   ": ", gai_strerror(rc)));
  }
  int fd = -1;
  int last_errno = 0;
  const char* last_call = "socket";
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      last_call = "socket";
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      last_errno = errno;
      last_call = "bind";
      CloseFd(fd);
    } else if (listen(fd, 128) != 0) {
      last_errno = errno;
      last_call = "listen";
      CloseFd(fd);
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    const char* key = last_errno == EADDRNOTAVAIL ? "metrics_address" : "metrics_port";
    return absl::UnavailableError(absl::StrCat(key, ": cannot serve /metrics on ", bind_text, ": ", last_call,
                                               ": ", ErrnoText(last_errno)));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  int32_t bound_port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) == 0) {
    if (bound.ss_family == AF_INET) {
      bound_port = ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    } else if (bound.ss_family == AF_INET6) {
      bound_port = ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
    }
  }
  if (bound_port <= 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("metrics_port: cannot serve /metrics on ", bind_text,
                                               ": no bound port (", ErrnoText(err), ")"));
  }
  std::unique_ptr<MetricsHttpServer> server(
      new MetricsHttpServer(fd, bound_port, std::move(render), std::move(options)));
  int wake[2];
  if (pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("metrics_port: cannot serve /metrics on ", bind_text,
                                               ": pipe: ", ErrnoText(errno)));
  }
  server->wake_read_ = wake[0];
  server->wake_write_ = wake[1];
  try {
    server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  } catch (const std::system_error& e) {
    return absl::UnavailableError(absl::StrCat("metrics_port: cannot serve /metrics on ", bind_text,
                                               ": cannot start its thread: ", e.what()));
  }
  return server;
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int32_t port, Render render, MetricsHttpOptions options)
    : listen_fd_(listen_fd), port_(port), render_(std::move(render)), options_(std::move(options)) {}

MetricsHttpServer::~MetricsHttpServer() {
  Stop();
  int fd = listen_fd_;
  CloseFd(fd);
  CloseFd(wake_read_);
  CloseFd(wake_write_);
}

void MetricsHttpServer::Stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  stop_.store(true);
  if (wake_write_ >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = write(wake_write_, &byte, 1);
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void MetricsHttpServer::Respond(Connection& conn) {
  const absl::string_view in = conn.in;
  const size_t line_end = in.find('\n');
  if (line_end == absl::string_view::npos) {
    // No full request line yet: fail early on bytes no method can start with.
    const size_t space = in.find(' ');
    const absl::string_view method = in.substr(0, space);
    const bool garbage = !std::all_of(method.begin(), method.end(), IsMethodChar) ||
                         (space != absl::string_view::npos && space == 0);
    if (garbage) {
      conn.out = ErrorResponse(400, "Bad Request");
    } else if (in.size() > options_.max_request_bytes) {
      conn.out = ErrorResponse(431, "Request Header Fields Too Large");
    }
    return;
  }
  absl::string_view line = in.substr(0, line_end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == absl::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  const absl::string_view method = line.substr(0, sp1);
  const absl::string_view target =
      sp2 == absl::string_view::npos ? absl::string_view() : line.substr(sp1 + 1, sp2 - sp1 - 1);
  const absl::string_view version = sp2 == absl::string_view::npos ? absl::string_view() : line.substr(sp2 + 1);
  const bool well_formed =
      !method.empty() && std::all_of(method.begin(), method.end(), IsMethodChar) && !target.empty() &&
      std::all_of(target.begin(), target.end(), IsTargetChar) && version.size() == 8 &&
      version.substr(0, 7) == "HTTP/1." && version[7] >= '0' && version[7] <= '9';
  if (!well_formed) {
    conn.out = ErrorResponse(400, "Bad Request");
    return;
  }
  // The headers end with an empty line; nothing in them changes the answer.
  size_t headers_end = in.find("\r\n\r\n");
  if (headers_end == absl::string_view::npos) headers_end = in.find("\n\n");
  if (headers_end == absl::string_view::npos) {
    if (in.size() > options_.max_request_bytes) conn.out = ErrorResponse(431, "Request Header Fields Too Large");
    return;
  }
  if (headers_end > options_.max_request_bytes) {
    conn.out = ErrorResponse(431, "Request Header Fields Too Large");
    return;
  }
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    conn.out = ErrorResponse(405, "Method Not Allowed", "Allow: GET, HEAD\r\n");
    return;
  }
  const absl::string_view path = TargetPath(target);
  if (path.empty()) {
    conn.out = ErrorResponse(400, "Bad Request");
    return;
  }
  if (path != kMetricsPath) {
    conn.out = ErrorResponse(404, "Not Found");
    return;
  }
  std::string body;
  try {
    body = render_();
  } catch (...) {
    conn.out = ErrorResponse(500, "Internal Server Error");
    return;
  }
  conn.out = Response(200, "OK", kMetricsContentType, body, head);
}

void MetricsHttpServer::Loop() {
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  absl::Time accept_paused_until = absl::InfinitePast();
  char buf[4096];

  auto finish = [](Connection& c) {
    CloseFd(c.fd);
    c.closed = true;
  };
  // Sends what the connection still owes; on completion half-closes and lingers.
  auto send_some = [&](Connection& c, absl::Time now) {
    while (c.sent < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        finish(c);
        return;
      }
    }
    shutdown(c.fd, SHUT_WR);
    c.phase = Connection::Phase::kLingering;
    c.in.clear();
    c.in.shrink_to_fit();
    c.out.clear();
    c.out.shrink_to_fit();
    c.deadline = now + kLinger;
  };

  while (!stop_.load()) {
    absl::Time now = absl::Now();
    const bool accepting =
        static_cast<int>(conns.size()) < options_.max_connections && now >= accept_paused_until;
    fds.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    absl::Time wake_at = now + absl::Seconds(1);
    if (!accepting && accept_paused_until > now) wake_at = std::min(wake_at, accept_paused_until);
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.phase == Connection::Phase::kWriting ? POLLOUT : POLLIN), 0});
      wake_at = std::min(wake_at, c.deadline);
    }
    const int timeout_ms =
        static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(wake_at - now + absl::Milliseconds(1))));
    const int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (stop_.load()) break;
    if (ready < 0) {
      if (errno != EINTR) absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    now = absl::Now();
    if (fds[0].revents != 0) {
      while (read(wake_read_, buf, sizeof(buf)) > 0) {}
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      Connection& c = conns[i];
      const short revents = fds[2 + i].revents;
      if (revents != 0) {
        switch (c.phase) {
          case Connection::Phase::kReading: {
            bool eof = false;
            while (true) {
              const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
              if (n > 0) {
                c.in.append(buf, static_cast<size_t>(n));
                if (c.in.size() > options_.max_request_bytes) break;  // enough to decide
              } else if (n == 0) {
                eof = true;
                break;
              } else if (errno == EINTR) {
                continue;
              } else {
                if (errno != EAGAIN && errno != EWOULDBLOCK) eof = true;
                break;
              }
            }
            Respond(c);
            if (!c.out.empty()) {
              c.phase = Connection::Phase::kWriting;
              c.deadline = now + options_.write_timeout;
              send_some(c, now);
            } else if (eof) {
              finish(c);  // closed (or reset) before a whole request arrived
            }
            break;
          }
          case Connection::Phase::kWriting:
            send_some(c, now);
            break;
          case Connection::Phase::kLingering:
            while (true) {
              const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
              if (n > 0) continue;
              if (n < 0 && errno == EINTR) continue;
              if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) finish(c);
              break;
            }
            break;
        }
      }
      if (!c.closed && now >= c.deadline) finish(c);  // a client that never sent, read or closed
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const Connection& c) { return c.closed; }),
                conns.end());
    if (accepting && (fds[1].revents & POLLIN) != 0) {
      while (static_cast<int>(conns.size()) < options_.max_connections) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
          Connection c;
          c.fd = fd;
          c.deadline = now + options_.read_timeout;
          conns.push_back(std::move(c));
          continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) accept_paused_until = now + kAcceptBackoff;  // EMFILE...
        break;
      }
    }
  }
  for (Connection& c : conns) finish(c);
}

}  // namespace argen::server
