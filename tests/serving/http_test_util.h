// Helpers for the HTTP API tests: temporary files, server-sent events,
// base64 PNGs, and an HTTP client on loopback.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "httplib.h"
#include "nlohmann/json.hpp"

namespace argen::serving_test {

// A fresh directory under $TMPDIR (removed by the caller's TempDir object).
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  // Writes `text` to path()/name; returns the full path.
  std::string Write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

// Certificates made with the openssl CLI for the TLS tests: a CA, a server
// certificate it signed (SAN localhost and 127.0.0.1), a client certificate
// it signed, and an unrelated second CA. Paths; empty `error` on success.
struct TestCerts {
  std::string ca, server_cert, server_key, client_cert, client_key, other_ca;
  std::string error;
};
TestCerts MakeTestCerts(const TempDir& dir);
std::string ReadFile(const std::string& path);

struct SseEvent {
  std::string event;  // "" for data-only events
  std::string data;
};
// The events of a text/event-stream body, in order (comments dropped).
std::vector<SseEvent> ParseSse(const std::string& body);

// Width and height of a PNG (0, 0 when it is not one).
std::pair<int, int> PngSize(const std::string& png);
std::string Base64Decode(const std::string& text);

// A plaintext client on 127.0.0.1:port with generous timeouts.
std::unique_ptr<httplib::Client> HttpClient(int port);

// POST /v1/images/generations with `body`; headers extra.
httplib::Result PostImages(httplib::Client& client, const nlohmann::json& body, const httplib::Headers& headers = {});

}  // namespace argen::serving_test
