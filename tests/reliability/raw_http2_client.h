// A deliberately bad HTTP/2 client for the hostile-client tests: it opens one
// gRPC call with hand-made frames, then never sends anything again (no
// WINDOW_UPDATE, so the server can send at most 64 KiB; no PING ACK, so
// keepalive sees a dead peer) and reads only when asked to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"

namespace argen::reliability_test {

class RawHttp2Client {
 public:
  // Connects to 127.0.0.1:port and exchanges the connection preface and
  // SETTINGS; null on failure.
  static std::unique_ptr<RawHttp2Client> Connect(int port);
  ~RawHttp2Client();

  // Starts a call of `path` (e.g. "/argen.v1.ArGen/Generate") on stream 1
  // with one length-prefixed message (`serialized` request) and END_STREAM.
  bool StartCall(const std::string& path, const std::string& serialized);

  // Reads (and discards) what the server sends for up to `timeout`, never
  // answering; true when the server closed the connection meanwhile.
  bool ReadUntilClosed(absl::Duration timeout);

  int64_t bytes_received() const { return bytes_received_; }
  int pings_received() const { return pings_received_; }

 private:
  explicit RawHttp2Client(int fd) : fd_(fd) {}
  bool SendFrame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload);

  int fd_;
  int64_t bytes_received_ = 0;
  int pings_received_ = 0;
  std::string pending_;  // received bytes not yet parsed into frames
};

}  // namespace argen::reliability_test
