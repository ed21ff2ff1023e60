// argen_server serving the tiny Emu3-Gen checkpoints (tests/goldens/tiny/
// tiny-emu3-gen-hf, transformers' layout; tiny-emu3-gen, BAAI's with its
// vision tokenizer beside it) as a process: over gRPC `info` reports the
// emu3 family, Emu3's sampling defaults (cfg 3; top-k 2048 capped at the
// tiny codebook's 64) and its sizes; `generate --size 40x24` writes a
// 40 x 24 PNG (diagonal sparsity 0.5); a size outside Emu3's rule is
// INVALID_ARGUMENT stating the rule; over HTTP, `size` "40x24" gives a
// 40 x 24 PNG and "48x48" a 400 naming `size`.
#include <signal.h>

#include <gtest/gtest.h>

#include <unistd.h>

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

class Emu3ServerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Emu3ServerTest, ServesPngsOfTheRequestedSizeOverGrpcAndHttp) {
  const std::string log = ::testing::TempDir() + "/argen_emu3_server_" + GetParam() + ".log";
  ServerProcess p = SpawnProcess(ModelServerArgs(SourceDir() + "/tests/goldens/tiny/" + GetParam(), true),
                                 log);  // the family's defaults
  ASSERT_TRUE(WaitServing(p, 60)) << ReadFile(log);
  const std::string server = "--server=127.0.0.1:" + std::to_string(p.port);
  const int http_port = AnnouncedHttpPort(p);
  ASSERT_GT(http_port, 0) << ReadFile(log);

  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({server, "info", "--json"}, out, err), 0) << err.str();
  const std::string info_text = out.str();
  EXPECT_NE(info_text.find("\"emu3\""), std::string::npos) << info_text;
  EXPECT_TRUE(std::regex_search(info_text, std::regex(R"("name": "cfg_weight",[^}]*"default_value": 3\b)")))
      << info_text;
  EXPECT_TRUE(std::regex_search(info_text, std::regex(R"("name": "top_k",[^}]*"default_value": 64\b)"))) << info_text;
  const nlohmann::json info = nlohmann::json::parse(info_text);
  EXPECT_EQ(info["default_size"]["width"], 32);
  EXPECT_EQ(info["default_size"]["height"], 32);

  const std::string dir = ::testing::TempDir() + "/emu3_images_" + GetParam();
  fs::remove_all(dir);
  std::ostringstream gen_out, gen_err;
  ASSERT_EQ(
      client::RunClient({server, "generate", "--prompt", "a red circle", "--seed", "5", "--size", "40x24", "--policy",
                         "diagonal", "--sparsity", "0.5", "--out", dir, "--request_id", "emu3", "--json", "--quiet"},
                        gen_out, gen_err),
      0)
      << gen_err.str() << gen_out.str();
  const nlohmann::json result = nlohmann::json::parse(gen_out.str());
  EXPECT_EQ(result["policy"]["l_dec"], 3 * 6 - 1) << gen_out.str();  // 3 rows of 5 codes and their row ends
  const std::string png = ReadFile(dir + "/emu3_0.png");
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, 40);
  EXPECT_EQ(decoded->height, 24);

  std::ostringstream bad_out, bad_err;
  EXPECT_EQ(
      client::RunClient({server, "generate", "--prompt", "a red circle", "--size", "48x48", "--out", dir, "--quiet"},
                        bad_out, bad_err),
      1);
  EXPECT_NE(bad_err.str().find("INVALID_ARGUMENT"), std::string::npos) << bad_err.str();
  EXPECT_NE(bad_err.str().find("the rule: width and height multiples of 8"), std::string::npos) << bad_err.str();

  auto http = serving_test::HttpClient(http_port);
  httplib::Result ok = serving_test::PostImages(*http, {{"prompt", "a red circle"}, {"size", "40x24"}, {"seed", 2}});
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  ASSERT_EQ(ok->status, 200) << ok->body;
  const nlohmann::json body = nlohmann::json::parse(ok->body);
  EXPECT_EQ(serving_test::PngSize(serving_test::Base64Decode(body["data"][0]["b64_json"].get<std::string>())),
            (std::pair<int, int>{40, 24}));
  httplib::Result refused = serving_test::PostImages(*http, {{"prompt", "a red circle"}, {"size", "48x48"}});
  ASSERT_TRUE(refused) << httplib::to_string(refused.error());
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(nlohmann::json::parse(refused->body)["error"]["param"], "size") << refused->body;

  EXPECT_EQ(StopServer(p), 0) << ReadFile(log);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Emu3ServerTest, ::testing::Values("tiny-emu3-gen-hf", "tiny-emu3-gen"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param == "tiny-emu3-gen" ? std::string("Baai") : std::string("Transformers");
                         });

}  // namespace
}  // namespace argen
