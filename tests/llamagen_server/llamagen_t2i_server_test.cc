// argen_server serving the tiny LlamaGen text-to-image checkpoint in its
// published layout (tests/goldens/tiny/tiny-llamagen-t2i: t2i_*.pt +
// vq_ds16_t2i.pt + a T5 hub directory) as a process: over gRPC `info`
// reports the llamagen family, no classes and sample_t2i.py's defaults (cfg
// 7.5, top-k 1000); `generate --prompt` at temperature 0 (argmax of the
// guided logits) writes the official generate()'s greedy image (within one
// uint8 level of VQModel.decode_code's); a class id is refused naming
// `class_id`. Over HTTP, a caption gives a PNG of the right size.
#include <signal.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
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
using test_support::ReadJson;
using test_support::SourceDir;

const char kRel[] = "tests/goldens/tiny/tiny-llamagen-t2i";

TEST(LlamaGenT2iServerTest, CaptionImagesOverGrpcAndHttp) {
#if defined(__SANITIZE_ADDRESS__)
  // Sanitizers refuse RTLD_DEEPBIND, without which Debian's libsentencepiece
  // (its bundled protobuf-lite) aborts in a gRPC process (engine/families/llamagen/sentencepiece_model.h).
  GTEST_SKIP() << "the SentencePiece module needs RTLD_DEEPBIND, which AddressSanitizer refuses";
#endif
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  const std::string log = ::testing::TempDir() + "/argen_llamagen_t2i_server.log";
  ServerProcess p = SpawnProcess(ModelServerArgs(SourceDir() + "/" + kRel, true), log);
  ASSERT_TRUE(WaitServing(p, 60)) << ReadFile(log);
  const std::string server = "--server=127.0.0.1:" + std::to_string(p.port);

  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({server, "info", "--json"}, out, err), 0) << err.str();
  const nlohmann::json info = nlohmann::json::parse(out.str());
  EXPECT_EQ(info["family"], "llamagen") << out.str();
  EXPECT_EQ(info.value("num_classes", 0), 0) << out.str();
  EXPECT_EQ(info["image_tokens"], 25) << out.str();
  EXPECT_TRUE(std::regex_search(out.str(), std::regex(R"("name": "cfg_weight",[^}]*"default_value": 7.5\b)")))
      << out.str();
  EXPECT_TRUE(std::regex_search(out.str(), std::regex(R"("name": "top_k",[^}]*"default_value": 64\b)")))
      << out.str();  // sample_t2i.py's 1000, capped by the 64-code tiny VQ

  const std::string dir = ::testing::TempDir() + "/llamagen_t2i_images";
  fs::remove_all(dir);
  std::ostringstream gen_out, gen_err;
  ASSERT_EQ(client::RunClient({server, "generate", "--prompt", golden["prompt"].get<std::string>(), "--temperature",
                               "0", "--out", dir, "--request_id", "t2i", "--quiet"},
                              gen_out, gen_err),
            0)
      << gen_err.str() << gen_out.str();
  const std::string png = ReadFile(dir + "/t2i_0.png");
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->width, 10);
  ASSERT_EQ(decoded->height, 10);
  const std::string rgb8 = ReadFile(SourceDir() + "/" + kRel + "/rgb8");
  ASSERT_EQ(decoded->rgb.size(), rgb8.size());
  int off = 0;
  for (size_t i = 0; i < rgb8.size(); ++i) {
    const int d = std::abs(static_cast<int>(decoded->rgb[i]) - static_cast<uint8_t>(rgb8[i]));
    EXPECT_LE(d, 1) << "byte " << i;
    off += d != 0;
  }
  EXPECT_LE(off, static_cast<int>(rgb8.size() / 100));  // truncation ties only

  std::ostringstream class_out, class_err;
  EXPECT_NE(client::RunClient({server, "generate", "--class_id", "3", "--out", dir, "--quiet"}, class_out, class_err),
            0);
  EXPECT_NE(class_err.str().find("INVALID_ARGUMENT"), std::string::npos) << class_err.str();
  EXPECT_NE(class_err.str().find("class_id:"), std::string::npos) << class_err.str();

  const int http_port = AnnouncedHttpPort(p);
  ASSERT_GT(http_port, 0) << ReadFile(log);
  std::unique_ptr<httplib::Client> http = serving_test::HttpClient(http_port);
  httplib::Result ok =
      serving_test::PostImages(*http, {{"prompt", "a red car"}, {"seed", 1}, {"response_format", "b64_json"}});
  ASSERT_TRUE(ok) << "no HTTP response";
  ASSERT_EQ(ok->status, 200) << ok->body;
  const nlohmann::json body = nlohmann::json::parse(ok->body);
  EXPECT_EQ(serving_test::PngSize(serving_test::Base64Decode(body["data"][0]["b64_json"].get<std::string>())),
            std::make_pair(10, 10));

  EXPECT_EQ(StopServer(p), 0) << ReadFile(log);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace argen
