#include "tests/reliability/raw_http2_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace argen::reliability_test {
namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr uint8_t kData = 0, kHeaders = 1, kSettings = 4, kPing = 6;
constexpr uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;

bool SendAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// HPACK "literal header field without indexing, new name", no Huffman coding.
void AppendHeader(std::string& block, const std::string& name, const std::string& value) {
  auto length = [&](size_t n) {  // 7-bit prefix integer
    if (n < 127) {
      block.push_back(static_cast<char>(n));
      return;
    }
    block.push_back(127);
    n -= 127;
    while (n >= 128) {
      block.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    block.push_back(static_cast<char>(n));
  };
  block.push_back(0);
  length(name.size());
  block += name;
  length(value.size());
  block += value;
}

}  // namespace

std::unique_ptr<RawHttp2Client> RawHttp2Client::Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return nullptr;
  }
  std::unique_ptr<RawHttp2Client> client(new RawHttp2Client(fd));
  if (!SendAll(fd, std::string(kPreface, sizeof(kPreface) - 1)) || !client->SendFrame(kSettings, 0, 0, "")) {
    return nullptr;
  }
  // The server's SETTINGS must be acknowledged or it gives up on us.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (absl::Now() < until) {
    if (client->pending_.size() >= 9) {
      const auto* h = reinterpret_cast<const uint8_t*>(client->pending_.data());
      const size_t len = (size_t{h[0]} << 16) | (size_t{h[1]} << 8) | h[2];
      if (client->pending_.size() < 9 + len) goto read_more;
      const uint8_t type = h[3], flags = h[4];
      client->pending_.erase(0, 9 + len);
      if (type == kSettings && (flags & kAck) == 0) {
        return client->SendFrame(kSettings, kAck, 0, "") ? std::move(client) : nullptr;
      }
      continue;
    }
  read_more:
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return nullptr;
    client->pending_.append(buf, static_cast<size_t>(n));
  }
  return nullptr;
}

RawHttp2Client::~RawHttp2Client() { close(fd_); }

bool RawHttp2Client::SendFrame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string frame;
  frame.push_back(static_cast<char>(payload.size() >> 16));
  frame.push_back(static_cast<char>(payload.size() >> 8));
  frame.push_back(static_cast<char>(payload.size()));
  frame.push_back(static_cast<char>(type));
  frame.push_back(static_cast<char>(flags));
  frame.push_back(static_cast<char>((stream >> 24) & 0x7f));  // the reserved bit stays 0
  frame.push_back(static_cast<char>(stream >> 16));
  frame.push_back(static_cast<char>(stream >> 8));
  frame.push_back(static_cast<char>(stream));
  frame += payload;
  return SendAll(fd_, frame);
}

bool RawHttp2Client::StartCall(const std::string& path, const std::string& serialized) {
  std::string headers;
  AppendHeader(headers, ":method", "POST");
  AppendHeader(headers, ":scheme", "http");
  AppendHeader(headers, ":path", path);
  AppendHeader(headers, ":authority", "localhost");
  AppendHeader(headers, "content-type", "application/grpc");
  AppendHeader(headers, "te", "trailers");
  std::string message(1, '\0');  // not compressed
  for (int shift = 24; shift >= 0; shift -= 8) message.push_back(static_cast<char>(serialized.size() >> shift));
  message += serialized;
  return SendFrame(kHeaders, kEndHeaders, 1, headers) && SendFrame(kData, kEndStream, 1, message);
}

bool RawHttp2Client::ReadUntilClosed(absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  char buf[65536];
  while (absl::Now() < until) {
    pollfd p{fd_, POLLIN, 0};
    const int wait_ms = static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(until - absl::Now())));
    if (poll(&p, 1, std::min(wait_ms, 100)) <= 0) continue;
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return true;  // EOF or reset: the server closed the connection
    bytes_received_ += n;
    pending_.append(buf, static_cast<size_t>(n));
    // Count PINGs (never answered).
    while (pending_.size() >= 9) {
      const auto* h = reinterpret_cast<const uint8_t*>(pending_.data());
      const size_t len = (size_t{h[0]} << 16) | (size_t{h[1]} << 8) | h[2];
      if (pending_.size() < 9 + len) break;
      if (h[3] == kPing && (h[4] & kAck) == 0) ++pings_received_;
      pending_.erase(0, 9 + len);
    }
  }
  return false;
}

}  // namespace argen::reliability_test
