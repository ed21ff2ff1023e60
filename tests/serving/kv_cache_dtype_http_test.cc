// kv_cache_dtype over loopback against the deterministic FakeEngine (which
// resolves policies with sparse::ResolvePolicy, kv_format included): the
// server default reaches requests that set none, a request's own value wins,
// both APIs echo the resolved value, /v1/models and GetModelInfo advertise
// the values and the default, and a bad HTTP value is a 400 naming the field.
#include <gtest/gtest.h>

#include "client/generate_call.h"
#include "scheduler/tests/fake_engine.h"
#include "tests/serving/http_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

using nlohmann::json;
using scheduler::testing::FakeEngine;
using scheduler::testing::FakeEngineOptions;

absl::StatusOr<TestServer> StartFp8Default() {
  server::ServerConfig c = LoopbackConfig("fake");
  c.http_address = "127.0.0.1";
  c.http_port = 0;
  c.metrics_port = 0;
  c.default_policy.kv_format = sparse::KvFormat::kFp8E4m3;
  FakeEngineOptions options;
  options.kv_budget_bytes = c.kv_budget_bytes;
  options.max_batch_rows = c.max_batch_rows;
  options.max_images_per_request = c.max_images_per_request;
  return StartServer(c, std::make_unique<FakeEngine>(options));
}

TEST(KvCacheDtypeHttpTest, DefaultAndRequestValueAreEchoedOnBothApis) {
  ASSERT_STARTED(t, StartFp8Default());
  auto http = HttpClient(t.server->http_port());
  for (const auto& [policy, want] : std::vector<std::pair<json, std::string>>{
           {json::object({{"name", "dense"}}), "fp8"},                  // the server default
           {json::object({{"kv_cache_dtype", "auto"}}), "auto"},        // the request's own
           {json::object({{"kv_cache_dtype", "FP8_E4M3"}}), "fp8"}}) {  // any spelling, resolved
    httplib::Result r = PostImages(*http, {{"prompt", "a red circle"}, {"seed", 1}, {"policy", policy}});
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["argen"]["kv_cache_dtype"], want) << policy.dump();
  }
  for (const auto& [dtype, want] : std::vector<std::pair<std::string, std::string>>{{"", "fp8"}, {"auto", "auto"}}) {
    v1::GenerateRequest request;
    request.set_prompt("a red circle");
    if (!dtype.empty()) request.mutable_policy()->set_kv_cache_dtype(dtype);
    const client::GenerateResult g = client::CallGenerate(*t.stub, request, 20.0);
    ASSERT_TRUE(g.status.ok()) << g.status.error_message();
    EXPECT_EQ(g.accepted.policy().kv_cache_dtype(), want) << dtype;
  }
}

TEST(KvCacheDtypeHttpTest, ModelsAdvertiseTheValuesAndABadOneIsA400) {
  ASSERT_STARTED(t, StartFp8Default());
  const json models = json::parse(HttpGet(t.server->http_port(), "/v1/models"), nullptr, false);
  ASSERT_FALSE(models.is_discarded());
  const json& argen = models["data"][0]["argen"];
  EXPECT_EQ(argen["kv_cache_dtypes"], json({"auto", "fp8"})) << argen.dump();
  EXPECT_EQ(argen["default_policy"]["kv_cache_dtype"], "fp8") << argen.dump();
  EXPECT_EQ(argen["weight_dtype"], "auto") << argen.dump();  // the config's default
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(t.stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.default_policy().kv_cache_dtype(), "fp8");
  ASSERT_EQ(info.kv_cache_dtypes_size(), 2);

  auto http = HttpClient(t.server->http_port());
  httplib::Result r = PostImages(*http, {{"prompt", "x"}, {"policy", {{"kv_cache_dtype", "int4"}}}});
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 400) << r->body;
  const json error = json::parse(r->body)["error"];
  EXPECT_EQ(error["param"], "policy.kv_cache_dtype") << r->body;
  EXPECT_EQ(error["message"].get<std::string>().rfind("policy.kv_cache_dtype: \"int4\"", 0), 0u) << r->body;
  r = PostImages(*http, {{"prompt", "x"}, {"policy", {{"kv_cache_dtype", true}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "policy.kv_cache_dtype") << r->body;
}

}  // namespace
}  // namespace argen::serving_test
