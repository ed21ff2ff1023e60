#include "tests/serving/http_test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "engine/image/png.h"

namespace argen::serving_test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/argen-http-test.XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::Write(const std::string& name, const std::string& text) const {
  const std::string file = path_ + "/" + name;
  std::ofstream(file, std::ios::binary) << text;
  return file;
}

TestCerts MakeTestCerts(const TempDir& dir) {
  TestCerts c;
  const std::string d = dir.path();
  dir.Write("server.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  dir.Write("client.ext", "extendedKeyUsage=clientAuth\n");
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      dir.Write("make_certs.sh",
                "set -e\ncd '" + d + "'\n" + "openssl req -x509 " + ec +
                    " -keyout ca.key -out ca.pem -days 2 -subj '/CN=argen test CA'\n" + "openssl req -x509 " + ec +
                    " -keyout other.key -out other_ca.pem -days 2 -subj '/CN=some other CA'\n" + "openssl req " + ec +
                    " -keyout server.key -out server.csr -subj '/CN=localhost'\n" +
                    "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
                    "-extfile server.ext\n" +
                    "openssl req " + ec + " -keyout client.key -out client.csr -subj '/CN=argen test client'\n" +
                    "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 "
                    "-extfile client.ext\n");
  const std::string command = "bash '" + script + "' >'" + d + "/openssl.log' 2>&1";
  if (std::system(command.c_str()) != 0) {
    c.error = "openssl failed: " + ReadFile(d + "/openssl.log");
    return c;
  }
  c.ca = d + "/ca.pem";
  c.other_ca = d + "/other_ca.pem";
  c.server_cert = d + "/server.pem";
  c.server_key = d + "/server.key";
  c.client_cert = d + "/client.pem";
  c.client_key = d + "/client.key";
  return c;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<SseEvent> ParseSse(const std::string& body) {
  std::vector<SseEvent> events;
  for (absl::string_view block : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    SseEvent e;
    bool any = false;
    for (absl::string_view line : absl::StrSplit(block, '\n')) {
      if (line.empty() || line[0] == ':') continue;
      if (absl::StartsWith(line, "event: ")) {
        e.event = std::string(line.substr(7));
        any = true;
      } else if (absl::StartsWith(line, "data: ")) {
        e.data += std::string(line.substr(6));
        any = true;
      }
    }
    if (any) events.push_back(std::move(e));
  }
  return events;
}

std::pair<int, int> PngSize(const std::string& png) {
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(png.data()), png.size()));
  if (!decoded.ok()) return {0, 0};
  return {decoded->width, decoded->height};
}

std::string Base64Decode(const std::string& text) {
  std::string out;
  if (!absl::Base64Unescape(text, &out)) return "";
  return out;
}

std::unique_ptr<httplib::Client> HttpClient(int port) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port);
  client->set_read_timeout(60, 0);
  client->set_write_timeout(10, 0);
  client->set_connection_timeout(5, 0);
  return client;
}

httplib::Result PostImages(httplib::Client& client, const nlohmann::json& body, const httplib::Headers& headers) {
  return client.Post("/v1/images/generations", headers, body.dump(), "application/json");
}

}  // namespace argen::serving_test
