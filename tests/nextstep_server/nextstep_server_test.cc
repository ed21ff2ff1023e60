// argen_server serving the tiny NextStep-1 checkpoint (tests/goldens/tiny/
// tiny-nextstep: continuous image tokens) as a process on the CPU: over
// gRPC `info` reports the nextstep family with its cfg 7.5 default and its
// 12 x 12 size and 2 previews at most (its 3 token rows, as a code model's);
// `generate --seed 5` writes a 12 x 12 PNG, the same bytes twice, and another
// seed other bytes; a code-sampling knob (top_k) is INVALID_ARGUMENT saying
// the model makes continuous tokens; over HTTP a request gives a 12 x 12 PNG,
// and the same request streamed with partial images the same PNG after its
// partial images (12 x 12, in order; the tiny model may outrun its image path,
// so some may be dropped: preview_cpu_test counts them on a slowed engine).
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

TEST(NextStepServerTest, ServesTheSamePngForASeedOverGrpcAndAPngOverHttp) {
  const std::string log = ::testing::TempDir() + "/argen_nextstep_server.log";
  ServerProcess p = SpawnProcess(ModelServerArgs(SourceDir() + "/tests/goldens/tiny/tiny-nextstep", true),
                                 log);  // the family's defaults
  ASSERT_TRUE(WaitServing(p, 60)) << ReadFile(log);
  const std::string server = "--server=127.0.0.1:" + std::to_string(p.port);
  const int http_port = AnnouncedHttpPort(p);
  ASSERT_GT(http_port, 0) << ReadFile(log);

  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({server, "info", "--json"}, out, err), 0) << err.str();
  const std::string info_text = out.str();
  EXPECT_NE(info_text.find("\"nextstep\""), std::string::npos) << info_text;
  EXPECT_TRUE(std::regex_search(info_text, std::regex(R"("name": "cfg_weight",[^}]*"default_value": 7.5\b)")))
      << info_text;
  const nlohmann::json info = nlohmann::json::parse(info_text);
  EXPECT_EQ(info["default_size"]["width"], 12);
  EXPECT_EQ(info["default_size"]["height"], 12);
  EXPECT_EQ(info["max_previews"], 2) << info_text;  // after token rows 1 and 2 of 3

  const std::string dir = ::testing::TempDir() + "/nextstep_images";
  fs::remove_all(dir);
  const auto generate = [&](const std::string& seed, const std::string& id) {
    std::ostringstream gen_out, gen_err;
    EXPECT_EQ(client::RunClient({server, "generate", "--prompt", "a photo of a red circle", "--seed", seed, "--out",
                                 dir, "--request_id", id, "--quiet"},
                                gen_out, gen_err),
              0)
        << gen_err.str() << gen_out.str();
    return ReadFile(dir + "/" + id + "_0.png");
  };
  const std::string png = generate("5", "first");
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, 12);
  EXPECT_EQ(decoded->height, 12);
  EXPECT_EQ(generate("5", "again"), png);
  EXPECT_NE(generate("6", "other"), png);

  std::ostringstream bad_out, bad_err;
  EXPECT_EQ(client::RunClient({server, "generate", "--prompt", "a red circle", "--top_k", "5", "--out", dir, "--quiet"},
                              bad_out, bad_err),
            1);
  EXPECT_NE(bad_err.str().find("INVALID_ARGUMENT"), std::string::npos) << bad_err.str();
  EXPECT_NE(bad_err.str().find("continuous image tokens"), std::string::npos) << bad_err.str();

  auto http = serving_test::HttpClient(http_port);
  httplib::Result ok = serving_test::PostImages(*http, {{"prompt", "a red circle"}, {"seed", 2}});
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  ASSERT_EQ(ok->status, 200) << ok->body;
  const nlohmann::json body = nlohmann::json::parse(ok->body);
  const std::string http_png = serving_test::Base64Decode(body["data"][0]["b64_json"].get<std::string>());
  EXPECT_EQ(serving_test::PngSize(http_png), (std::pair<int, int>{12, 12}));

  httplib::Result streamed = serving_test::PostImages(
      *http, {{"prompt", "a red circle"}, {"seed", 2}, {"stream", true}, {"partial_images", 2}});
  ASSERT_TRUE(streamed) << httplib::to_string(streamed.error());
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  const std::vector<serving_test::SseEvent> events = serving_test::ParseSse(streamed->body);
  ASSERT_GE(events.size(), 1u) << streamed->body;
  ASSERT_LE(events.size(), 3u) << streamed->body;
  int last_partial = -1;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_EQ(events[i].event, "image_generation.partial_image") << streamed->body.substr(0, 300);
    const nlohmann::json partial = nlohmann::json::parse(events[i].data);
    EXPECT_GT(partial["partial_image_index"].get<int>(), last_partial);
    last_partial = partial["partial_image_index"].get<int>();
    EXPECT_EQ(serving_test::PngSize(serving_test::Base64Decode(partial["b64_json"].get<std::string>())),
              (std::pair<int, int>{12, 12}));
  }
  EXPECT_EQ(events.back().event, "image_generation.completed");
  EXPECT_EQ(serving_test::Base64Decode(nlohmann::json::parse(events.back().data)["b64_json"].get<std::string>()),
            http_png)
      << "partial images changed the image";

  EXPECT_EQ(StopServer(p), 0) << ReadFile(log);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace argen
