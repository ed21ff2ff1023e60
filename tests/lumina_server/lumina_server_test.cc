// argen_server serving the shipped Lumina-mGPT-format model
// (models/argen-lumina-scenes-v1) as a process, through the client over
// gRPC: `info` reports the lumina family, its 384 px grid and L_dec with the
// row breaks, the family's sampling defaults (cfg 4; top-k 2000 capped at the small
// model's 1,024 codes), `generate` writes a valid 384 x 384 PNG (diagonal
// sparsity 0.9 with the paper's N_r), and a wrong
// vqgan_dir is a start-up error naming vqgan.yaml. One model per server.
// Sizes per request: with a config copy allowing 384 x 384 and 128 x 64,
// `info` lists both, `generate --size 128x64` (GenerateRequest width and
// height) writes a 128 x 64 PNG, and an unsupported size is refused listing
// the sizes; over HTTP, `size` "128x64" gives a 128 x 64 PNG and "96x96" a
// 400 naming `size`.
#include <signal.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
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
using reliability_test::WaitExit;
using reliability_test::WaitServing;
using test_support::SourceDir;

// No config file and no sampling flags: the family's defaults apply (cfg 4, top-k 2000
// capped by the small model's 1,024 codes).
std::vector<std::string> ServerArgs(bool http = false, const std::vector<std::string>& extra = {}) {
  return ModelServerArgs(SourceDir() + "/models/argen-lumina-scenes-v1", http, extra);
}

TEST(LuminaServerTest, InfoAndGenerateOverGrpc) {
  const std::string log = ::testing::TempDir() + "/argen_lumina_server.log";
  ServerProcess p = SpawnProcess(ServerArgs(), log);
  ASSERT_TRUE(WaitServing(p, 60)) << ReadFile(log);
  const std::string port = std::to_string(p.port);
  const std::string server = "--server=127.0.0.1:" + port;

  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({server, "info", "--json"}, out, err), 0) << err.str();
  const std::string info = out.str();
  EXPECT_NE(info.find("\"lumina\""), std::string::npos) << info;
  EXPECT_NE(info.find("599"), std::string::npos) << info;  // L_dec: 24 rows of 24 codes + 23 new lines
  // The family's sampling defaults, since nothing configured them.
  EXPECT_TRUE(std::regex_search(info, std::regex(R"("name": "cfg_weight",[^}]*"default_value": 4\b)"))) << info;
  EXPECT_TRUE(std::regex_search(info, std::regex(R"("name": "top_k",[^}]*"default_value": 1024\b)"))) << info;

  const std::string dir = ::testing::TempDir() + "/lumina_images";
  fs::remove_all(dir);
  std::ostringstream gen_out, gen_err;
  ASSERT_EQ(client::RunClient({server, "generate", "--prompt", "a red circle", "--seed", "5", "--policy", "diagonal",
                               "--sparsity", "0.9", "--out", dir, "--request_id", "lumina", "--quiet"},
                              gen_out, gen_err),
            0)
      << gen_err.str() << gen_out.str();
  const std::string png = ReadFile(dir + "/lumina_0.png");
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, 384);
  EXPECT_EQ(decoded->height, 384);
  EXPECT_EQ(StopServer(p), 0) << ReadFile(log);
  fs::remove_all(dir);
}

// The shipped model's files, its config allowing 384 x 384 (the default) and 128 x 64.
std::string TwoSizeModelDir() {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("lumina_sizes_" + std::to_string(::getpid())) / "argen-lumina-scenes-v1";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path shipped = fs::absolute(SourceDir() + "/models/argen-lumina-scenes-v1");
  for (const char* f :
       {"model-00001-of-00001.safetensors", "model.safetensors.index.json", "tokenizer.json", "tokenizer"}) {
    fs::create_symlink(shipped / f, dir / f);
  }
  std::ifstream in(shipped / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["argen_image_sizes"] = nlohmann::json::array({{384, 384}, {128, 64}});
  std::ofstream(dir / "config.json") << config.dump();
  return dir.string();
}

TEST(LuminaServerTest, GenerateAtARequestedSize) {
  const std::string model_dir = TwoSizeModelDir();
  const std::vector<std::string> args = ModelServerArgs(model_dir, true);
  const std::string log = ::testing::TempDir() + "/argen_lumina_sizes.log";
  ServerProcess p = SpawnProcess(args, log);
  ASSERT_TRUE(WaitServing(p, 60)) << ReadFile(log);
  const std::string server = "--server=127.0.0.1:" + std::to_string(p.port);
  const int http_port = AnnouncedHttpPort(p);
  ASSERT_GT(http_port, 0) << ReadFile(log);

  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({server, "info", "--json"}, out, err), 0) << err.str();
  const nlohmann::json info = nlohmann::json::parse(out.str());
  ASSERT_EQ(info["image_sizes"].size(), 2u) << out.str();
  EXPECT_EQ(info["image_sizes"][1]["width"], 128);
  EXPECT_EQ(info["image_sizes"][1]["height"], 64);
  EXPECT_EQ(info["image_sizes"][1]["image_tokens"], 4 * 9 - 1);  // 4 rows of 8 codes + 3 new lines
  EXPECT_EQ(info["default_size"]["width"], 384);

  const std::string dir = ::testing::TempDir() + "/lumina_sized_images";
  fs::remove_all(dir);
  std::ostringstream gen_out, gen_err;
  ASSERT_EQ(client::RunClient({server, "generate", "--prompt", "a red circle", "--seed", "5", "--size", "128x64",
                               "--out", dir, "--request_id", "wide", "--json", "--quiet"},
                              gen_out, gen_err),
            0)
      << gen_err.str() << gen_out.str();
  const nlohmann::json result = nlohmann::json::parse(gen_out.str());
  EXPECT_EQ(result["policy"]["l_dec"], 35) << gen_out.str();  // Accepted: the request's own L_dec
  const std::string png = ReadFile(dir + "/wide_0.png");
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, 128);
  EXPECT_EQ(decoded->height, 64);

  std::ostringstream bad_out, bad_err;
  EXPECT_EQ(
      client::RunClient({server, "generate", "--prompt", "a red circle", "--size", "96x96", "--out", dir, "--quiet"},
                        bad_out, bad_err),
      1);
  EXPECT_NE(bad_err.str().find("INVALID_ARGUMENT"), std::string::npos) << bad_err.str();
  EXPECT_NE(bad_err.str().find("384x384, 128x64"), std::string::npos) << bad_err.str();
  // HTTP: size "WxH" is the same choice; an unsupported one a 400 naming size.
  auto http = serving_test::HttpClient(http_port);
  httplib::Result ok = serving_test::PostImages(*http, {{"prompt", "a red circle"}, {"size", "128x64"}, {"seed", 2}});
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  ASSERT_EQ(ok->status, 200) << ok->body;
  const nlohmann::json body = nlohmann::json::parse(ok->body);
  EXPECT_EQ(body["size"], "128x64");
  EXPECT_EQ(serving_test::PngSize(serving_test::Base64Decode(body["data"][0]["b64_json"].get<std::string>())),
            (std::pair<int, int>{128, 64}));
  httplib::Result refused = serving_test::PostImages(*http, {{"prompt", "a red circle"}, {"size", "96x96"}});
  ASSERT_TRUE(refused) << httplib::to_string(refused.error());
  EXPECT_EQ(refused->status, 400);
  const nlohmann::json error = nlohmann::json::parse(refused->body);
  EXPECT_EQ(error["error"]["param"], "size") << refused->body;
  EXPECT_NE(error["error"]["message"].get<std::string>().find("384x384, 128x64"), std::string::npos) << refused->body;
  httplib::Result models = http->Get("/v1/models");
  ASSERT_TRUE(models) << httplib::to_string(models.error());
  const nlohmann::json listed = nlohmann::json::parse(models->body);
  EXPECT_EQ(listed["data"][0]["argen"]["sizes"], nlohmann::json::array({"384x384", "128x64"})) << models->body;

  std::ostringstream usage_out, usage_err;
  EXPECT_EQ(
      client::RunClient({server, "generate", "--prompt", "x", "--size", "wide", "--out", dir}, usage_out, usage_err),
      2);
  EXPECT_NE(usage_err.str().find("size"), std::string::npos) << usage_err.str();
  EXPECT_EQ(StopServer(p), 0) << ReadFile(log);
  fs::remove_all(dir);
  fs::remove_all(fs::path(model_dir).parent_path());
}

TEST(LuminaServerTest, MissingVqganIsAStartUpErrorNamingIt) {
  const std::string log = ::testing::TempDir() + "/argen_lumina_novq.log";
  const pid_t pid = SpawnProcess(ServerArgs(false, {"--vqgan_dir=no_such_dir"}), log).pid;
  EXPECT_EQ(WaitExit(pid, 60), 1);
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("no_such_dir/vqgan.yaml"), std::string::npos) << text;
}

}  // namespace
}  // namespace argen
