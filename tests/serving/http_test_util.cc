#include "tests/serving/http_test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

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
