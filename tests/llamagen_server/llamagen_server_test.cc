// argen_server serving the tiny LlamaGen c2i checkpoint in its published
// layout (tests/goldens/tiny/tiny-llamagen-c2i: c2i_*.pt + vq_ds16_c2i.pt,
// torch pickles) as a process: over gRPC `info` reports the llamagen family,
// num_classes and cfg 4; `generate --class_id` writes a 20 x 20 PNG; a
// caption is refused naming `prompt`, a class id out of range naming
// `class_id`. Over HTTP, `class_id` gives a PNG of the right size.
#include <signal.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <regex>
#include <sstream>
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

TEST(LlamaGenServerTest, ClassConditionalImagesOverGrpcAndHttp) {
  const std::string log = ::testing::TempDir() + "/argen_llamagen_server.log";
  ServerProcess p = SpawnProcess(ModelServerArgs(SourceDir() + "/tests/goldens/tiny/tiny-llamagen-c2i", true), log);
  ASSERT_TRUE(WaitServing(p, 60)) << ReadFile(log);
  const std::string server = "--server=127.0.0.1:" + std::to_string(p.port);

  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({server, "info", "--json"}, out, err), 0) << err.str();
  const nlohmann::json info = nlohmann::json::parse(out.str());
  EXPECT_EQ(info["family"], "llamagen") << out.str();
  EXPECT_EQ(info["num_classes"], 10) << out.str();
  EXPECT_EQ(info["image_tokens"], 25) << out.str();
  EXPECT_TRUE(std::regex_search(out.str(), std::regex(R"("name": "cfg_weight",[^}]*"default_value": 4\b)")))
      << out.str();

  const std::string dir = ::testing::TempDir() + "/llamagen_images";
  fs::remove_all(dir);
  std::ostringstream gen_out, gen_err;
  ASSERT_EQ(client::RunClient({server, "generate", "--class_id", "7", "--seed", "5", "--count", "2", "--out", dir,
                               "--request_id", "c2i", "--quiet"},
                              gen_out, gen_err),
            0)
      << gen_err.str() << gen_out.str();
  for (const char* name : {"/c2i_0.png", "/c2i_1.png"}) {
    const std::string png = ReadFile(dir + name);
    absl::StatusOr<image::Rgb8Image> decoded =
        image::DecodePng({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->width, 20);
    EXPECT_EQ(decoded->height, 20);
  }

  std::ostringstream bad_out, bad_err;
  EXPECT_NE(client::RunClient({server, "generate", "--prompt", "a cat", "--out", dir, "--quiet"}, bad_out, bad_err), 0);
  EXPECT_NE(bad_err.str().find("INVALID_ARGUMENT"), std::string::npos) << bad_err.str();
  EXPECT_NE(bad_err.str().find("prompt:"), std::string::npos) << bad_err.str();
  std::ostringstream range_out, range_err;
  EXPECT_NE(client::RunClient({server, "generate", "--class_id", "10", "--out", dir, "--quiet"}, range_out, range_err),
            0);
  EXPECT_NE(range_err.str().find("class_id: must be in [0, 10)"), std::string::npos) << range_err.str();

  const int http_port = AnnouncedHttpPort(p);
  ASSERT_GT(http_port, 0) << ReadFile(log);
  std::unique_ptr<httplib::Client> http = serving_test::HttpClient(http_port);
  httplib::Result ok = serving_test::PostImages(*http, {{"class_id", 2}, {"seed", 1}, {"response_format", "b64_json"}});
  ASSERT_TRUE(ok) << "no HTTP response";
  ASSERT_EQ(ok->status, 200) << ok->body;
  const nlohmann::json body = nlohmann::json::parse(ok->body);
  EXPECT_EQ(serving_test::PngSize(serving_test::Base64Decode(body["data"][0]["b64_json"].get<std::string>())),
            std::make_pair(20, 20));
  httplib::Result caption = serving_test::PostImages(*http, {{"prompt", "a cat"}});
  ASSERT_TRUE(caption);
  EXPECT_EQ(caption->status, 400) << caption->body;
  EXPECT_NE(caption->body.find("prompt"), std::string::npos) << caption->body;

  EXPECT_EQ(StopServer(p), 0) << ReadFile(log);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace argen
