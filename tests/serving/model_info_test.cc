// gRPC GetModelInfo and HTTP GET /v1/models describe the served model with
// the same limits (server/model_info.h), through argen_server's own wiring
// (the engine loaded from the config, tests/goldens/tiny/tiny-mha):
//   * with the limits "auto" (max_batch_rows and kv_budget_bytes 0 in the
//     config, as shipped), both report the engine's sized limits, not 0 (#27:
//     /v1/models reported the raw config values);
//   * with max_batch_rows 2 (one CFG pair), both report
//     max_images_per_request 1 (/v1/models said 16).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/generate_call.h"
#include "nlohmann/json.hpp"
#include "tests/serving/http_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

using nlohmann::json;

std::string TinyModel() { return SourceDir() + "/tests/goldens/tiny/tiny-mha"; }

// The tiny model behind both APIs, the limits as `max_batch_rows` and
// `kv_budget_bytes` say (0: auto).
server::ServerConfig BothApis(int32_t max_batch_rows, int64_t kv_budget_bytes) {
  server::ServerConfig config = LoopbackConfig(TinyModel());
  config.max_batch_rows = max_batch_rows;
  config.kv_budget_bytes = kv_budget_bytes;
  config.http_address = "127.0.0.1";
  config.http_port = 0;
  return config;
}

struct Described {
  v1::ModelInfo grpc;
  json http;  // /v1/models' entry's "argen" object
  json http_entry;
};

// GetModelInfo and /v1/models from one server started with `config`.
void Describe(const server::ServerConfig& config, Described* out) {
  absl::StatusOr<std::unique_ptr<server::ArgenServer>> server = server::ArgenServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::ArGen::NewStub(client::MakeChannel(absl::StrCat("127.0.0.1:", (*server)->port()), 64 << 20));
  grpc::ClientContext context;
  const grpc::Status got = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &out->grpc);
  ASSERT_TRUE(got.ok()) << got.error_message();
  auto client = HttpClient((*server)->http_port());
  httplib::Result models = client->Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200) << models->body;
  const json list = json::parse(models->body, nullptr, false);
  ASSERT_TRUE(list.is_object()) << models->body;
  ASSERT_EQ(list["data"].size(), 1u) << models->body;
  out->http_entry = list["data"][0];
  out->http = out->http_entry["argen"];
  ASSERT_TRUE(out->http.is_object()) << models->body;
}

// Every field the two share says the same.
void ExpectSameDescription(Described d) {  // a copy: a missing key reads as null
  const v1::ModelInfo& g = d.grpc;
  EXPECT_EQ(d.http_entry["id"], g.model());
  EXPECT_EQ(d.http["backend"], g.backend());
  EXPECT_EQ(d.http["image_size"], g.image_size());
  EXPECT_EQ(d.http["token_grid"], g.token_grid());
  EXPECT_EQ(d.http["image_tokens"], g.image_tokens());
  EXPECT_EQ(d.http["max_prompt_tokens"], g.max_prompt_tokens());
  EXPECT_EQ(d.http["max_batch_rows"], g.max_batch_rows());
  EXPECT_EQ(d.http["kv_budget_bytes"], g.kv_budget_bytes());
  EXPECT_EQ(d.http["max_images_per_request"], g.max_images_per_request());
  EXPECT_EQ(d.http["queue_limit"], g.queue_limit());
  EXPECT_EQ(d.http["weight_dtype"], g.weight_dtype());
  std::vector<std::string> sizes;
  for (const v1::ImageSize& s : g.image_sizes()) sizes.push_back(absl::StrCat(s.width(), "x", s.height()));
  EXPECT_EQ(d.http["sizes"], json(sizes));
  EXPECT_EQ(d.http["default_size"], absl::StrCat(g.default_size().width(), "x", g.default_size().height()));
  std::vector<std::string> policies;
  for (const v1::PolicyInfo& p : g.policies()) policies.push_back(p.name());
  EXPECT_EQ(d.http["policies"], json(policies));
  EXPECT_EQ(d.http["default_policy"]["name"], g.default_policy().name());
  EXPECT_EQ(d.http["default_policy"]["n_recent"], g.default_policy().n_recent());
  EXPECT_EQ(d.http["default_policy"]["kv_cache_dtype"], g.default_policy().kv_cache_dtype());
}

TEST(ModelInfoTest, AutoLimitsAreTheEnginesOnBothApis) {
  Described d;
  ASSERT_NO_FATAL_FAILURE(Describe(BothApis(0, 0), &d));
  ExpectSameDescription(d);
  // The sizes "auto" resolves to on the CPU backend (server_config.h).
  const server::ServerConfig resolved = LoopbackConfig(TinyModel());
  EXPECT_EQ(d.grpc.max_batch_rows(), resolved.max_batch_rows);
  EXPECT_EQ(d.grpc.kv_budget_bytes(), resolved.kv_budget_bytes);
  EXPECT_GT(d.http["max_batch_rows"].get<int64_t>(), 0);
  EXPECT_GT(d.http["kv_budget_bytes"].get<int64_t>(), 0);
  EXPECT_GT(d.http["max_images_per_request"].get<int64_t>(), 0);
}

TEST(ModelInfoTest, OnePairOfRowsIsOneImageOnBothApis) {
  Described d;
  ASSERT_NO_FATAL_FAILURE(Describe(BothApis(2, 0), &d));
  ExpectSameDescription(d);
  EXPECT_EQ(d.grpc.max_batch_rows(), 2);
  EXPECT_EQ(d.grpc.max_images_per_request(), 1);
  EXPECT_EQ(d.http["max_batch_rows"], 2);
  EXPECT_EQ(d.http["max_images_per_request"], 1);
}

// What /v1/models advertises is what POST /v1/images/generations enforces:
// with one CFG pair of rows, n = 1 runs and n = 2 is a 400 naming `n` (#34).
TEST(ModelInfoTest, HttpEnforcesTheImagesPerRequestItAdvertises) {
  absl::StatusOr<std::unique_ptr<server::ArgenServer>> server = server::ArgenServer::Start(BothApis(2, 0));
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = HttpClient((*server)->http_port());
  const json models = json::parse(client->Get("/v1/models")->body, nullptr, false);
  const int64_t most = models["data"][0]["argen"]["max_images_per_request"].get<int64_t>();
  ASSERT_EQ(most, 1);
  httplib::Result fits = PostImages(*client, {{"prompt", "a red square"}, {"n", most}, {"seed", 1}});
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200) << fits->body;
  httplib::Result over = PostImages(*client, {{"prompt", "a red square"}, {"n", most + 1}});
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 400) << over->body;
  const json error = json::parse(over->body, nullptr, false)["error"];
  EXPECT_EQ(error["param"], "n") << over->body;
  EXPECT_NE(error["message"].get<std::string>().find("1"), std::string::npos) << over->body;
}

}  // namespace
}  // namespace argen::serving_test
