// argen_server serving the tiny Anole checkpoint (tests/goldens/tiny/
// tiny-anole-*) as a process. Meta's layout (models/7b/params.json +
// consolidated.pth, tokenizer/): over gRPC `info` reports the anole family,
// 1,024 image tokens and Anole's sampling defaults (cfg 3, temperature 0.7,
// top-p 0.9), and `generate` writes a valid 64 x 64 PNG (diagonal sparsity
// 0.9); over HTTP a caption gives a 64 x 64 PNG. The -hf conversion, its
// VQGAN named by --vqgan_dir, gives the same pixels for the same seed at
// temperature 0 as Meta's layout.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "client/commands.h"
#include "engine/image/png.h"
#include "nlohmann/json.hpp"
#include "tests/reliability/process_util.h"
#include "tests/serving/http_test_util.h"
#include "tests/support/golden_files.h"

namespace argen {
namespace {

namespace fs = std::filesystem;
using reliability_test::AnnouncedHttpPort;
using reliability_test::ModelServerArgs;
using reliability_test::ReadFile;
using reliability_test::ServerProcess;
using reliability_test::SpawnProcess;
using reliability_test::StopServer;
using reliability_test::WaitServing;
using test_support::SourceDir;

// Greedy generation of "a red cube" through the client; returns the image's RGB bytes (the
// PNG's text chunks name the model, so the files differ between layouts).
std::vector<uint8_t> GreedyPixels(const std::string& server, const std::string& dir, const std::string& id) {
  std::ostringstream out, err;
  EXPECT_EQ(client::RunClient({server, "generate", "--prompt", "a red cube", "--seed", "5", "--temperature", "0",
                               "--out", dir, "--request_id", id, "--quiet"},
                              out, err),
            0)
      << err.str() << out.str();
  const std::string png = ReadFile(dir + "/" + id + "_0.png");
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? decoded->rgb : std::vector<uint8_t>{};
}

TEST(AnoleServerTest, MetaLayoutOverGrpcAndHttp) {
  const std::string log = ::testing::TempDir() + "/argen_anole_server.log";
  ServerProcess p = SpawnProcess(ModelServerArgs(SourceDir() + "/tests/goldens/tiny/tiny-anole-meta", true), log);
  ASSERT_TRUE(WaitServing(p, 60)) << ReadFile(log);
  const std::string server = "--server=127.0.0.1:" + std::to_string(p.port);

  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({server, "info", "--json"}, out, err), 0) << err.str();
  const nlohmann::json info = nlohmann::json::parse(out.str());
  EXPECT_EQ(info["family"], "anole") << out.str();
  EXPECT_EQ(info["image_tokens"], 1024) << out.str();
  EXPECT_TRUE(std::regex_search(out.str(), std::regex(R"("name": "cfg_weight",[^}]*"default_value": 3\b)")))
      << out.str();
  EXPECT_TRUE(std::regex_search(out.str(), std::regex(R"("name": "temperature",[^}]*"default_value": 0\.(7\b|69999))")))
      << out.str();
  EXPECT_TRUE(std::regex_search(out.str(), std::regex(R"("name": "top_p",[^}]*"default_value": 0\.(9\b|89999))")))
      << out.str();

  const std::string dir = ::testing::TempDir() + "/anole_images";
  fs::remove_all(dir);
  std::ostringstream gen_out, gen_err;
  ASSERT_EQ(client::RunClient({server, "generate", "--prompt", "a red cube", "--seed", "5", "--policy", "diagonal",
                               "--sparsity", "0.9", "--out", dir, "--request_id", "anole", "--quiet"},
                              gen_out, gen_err),
            0)
      << gen_err.str() << gen_out.str();
  const std::string png = ReadFile(dir + "/anole_0.png");
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, 64);
  EXPECT_EQ(decoded->height, 64);

  const int http_port = AnnouncedHttpPort(p);
  ASSERT_GT(http_port, 0) << ReadFile(log);
  std::unique_ptr<httplib::Client> http = serving_test::HttpClient(http_port);
  httplib::Result ok =
      serving_test::PostImages(*http, {{"prompt", "a red car"}, {"seed", 1}, {"response_format", "b64_json"}});
  ASSERT_TRUE(ok) << "no HTTP response";
  ASSERT_EQ(ok->status, 200) << ok->body;
  const nlohmann::json body = nlohmann::json::parse(ok->body);
  EXPECT_EQ(serving_test::PngSize(serving_test::Base64Decode(body["data"][0]["b64_json"].get<std::string>())),
            std::make_pair(64, 64));

  const std::vector<uint8_t> greedy = GreedyPixels(server, dir, "meta_greedy");
  EXPECT_EQ(StopServer(p), 0) << ReadFile(log);

  // The -hf conversion of the same model: the same image for the same greedy request.
  const std::vector<std::string> hf_args =
      ModelServerArgs(SourceDir() + "/tests/goldens/tiny/tiny-anole-hf", false,
                      {"--vqgan_dir=" + SourceDir() + "/tests/goldens/tiny/tiny-anole-meta/tokenizer"});
  const std::string hf_log = ::testing::TempDir() + "/argen_anole_hf_server.log";
  ServerProcess hf = SpawnProcess(hf_args, hf_log);
  ASSERT_TRUE(WaitServing(hf, 60)) << ReadFile(hf_log);
  const std::string hf_server = "--server=127.0.0.1:" + std::to_string(hf.port);
  EXPECT_FALSE(greedy.empty());
  EXPECT_EQ(GreedyPixels(hf_server, dir, "hf_greedy"), greedy);
  EXPECT_EQ(StopServer(hf), 0) << ReadFile(hf_log);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace argen
