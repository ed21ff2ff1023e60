// The per-request KV cache dtype (SparsityPolicy.kv_cache_dtype) through the
// server's surfaces: gRPC request mapping with the configured default, the
// Accepted echo, ModelInfo, the HTTP policy object, and the config key.
#include <gtest/gtest.h>

#include "server/config_values.h"
#include "server/http_request_mapping.h"
#include "server/model_info.h"
#include "server/request_mapping.h"
#include "server/server_config.h"

namespace argen::server {
namespace {

engine::ModelInfo Info() {
  engine::ModelInfo info;
  info.name = "m";
  info.image_tokens = 64;
  info.image_vocab = 16384;
  info.max_images_per_request = 16;
  info.max_batch_rows = 64;
  info.kv_budget_bytes = int64_t{1} << 30;
  return info;
}

v1::GenerateRequest WithDtype(const std::string& dtype) {
  v1::GenerateRequest r;
  r.set_prompt("a cat");
  if (!dtype.empty()) r.mutable_policy()->set_kv_cache_dtype(dtype);
  return r;
}

ServerConfig Fp8Default() {
  ServerConfig c;
  c.default_policy.kind = sparse::PolicyKind::kDiagonal;
  c.default_policy.sparsity = 0.75;
  c.default_policy.kv_format = sparse::KvFormat::kFp8E4m3;
  return c;
}

TEST(KvCacheDtypeTest, RequestValueMapsOntoThePolicy) {
  for (const auto& [text, format] :
       std::vector<std::pair<std::string, sparse::KvFormat>>{{"auto", sparse::KvFormat::kAuto},
                                                             {"fp8", sparse::KvFormat::kFp8E4m3},
                                                             {"FP8", sparse::KvFormat::kFp8E4m3},
                                                             {"fp8_e4m3", sparse::KvFormat::kFp8E4m3}}) {
    absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(WithDtype(text), ServerConfig(), Info(), 1);
    ASSERT_TRUE(g.ok()) << text << ": " << g.status();
    EXPECT_EQ(g->policy.kv_format, format) << text;
  }
}

TEST(KvCacheDtypeTest, UnsetTakesTheServerDefaultAndAutoOverridesIt) {
  absl::StatusOr<engine::GenerationRequest> unset = ToGenerationRequest(WithDtype(""), Fp8Default(), Info(), 1);
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->policy.kv_format, sparse::KvFormat::kFp8E4m3);
  absl::StatusOr<engine::GenerationRequest> plain = ToGenerationRequest(WithDtype(""), ServerConfig(), Info(), 1);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->policy.kv_format, sparse::KvFormat::kAuto);
  absl::StatusOr<engine::GenerationRequest> any = ToGenerationRequest(WithDtype("auto"), Fp8Default(), Info(), 1);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->policy.kv_format, sparse::KvFormat::kAuto);
}

// The policy rule resets the parameters when a request names another policy
// than the default; the dtype is not a policy parameter and stays.
TEST(KvCacheDtypeTest, NamingAnotherPolicyKeepsTheDefaultDtype) {
  v1::GenerateRequest r = WithDtype("");
  r.mutable_policy()->set_name("dense");
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, Fp8Default(), Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->policy.kind, sparse::PolicyKind::kDense);
  EXPECT_EQ(g->policy.kv_format, sparse::KvFormat::kFp8E4m3);
}

TEST(KvCacheDtypeTest, UnknownValueIsInvalidArgumentNamingTheField) {
  for (const std::string bad : {"fp16", "bf16", "e5m2", "fp8 "}) {
    absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(WithDtype(bad), ServerConfig(), Info(), 1);
    ASSERT_FALSE(g.ok()) << bad;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(g.status().message().rfind("policy.kv_cache_dtype: ", 0), 0u) << g.status();
    EXPECT_NE(g.status().message().find("auto, fp8"), std::string::npos) << g.status();
    const grpc::Status s = ToGrpcStatus(g.status());
    EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  }
}

TEST(KvCacheDtypeTest, AcceptedEchoesTheResolvedDtype) {
  for (const auto& [format, text] : std::vector<std::pair<sparse::KvFormat, std::string>>{
           {sparse::KvFormat::kAuto, "auto"}, {sparse::KvFormat::kFp8E4m3, "fp8"}}) {
    scheduler::QueuedEvent q;
    q.policy.kind = sparse::PolicyKind::kDense;
    q.policy.kv_format = format;
    scheduler::RequestEvent event = q;
    const v1::GenerateEvent out = ToProtoEvent(event, "r1");
    ASSERT_TRUE(out.has_accepted());
    EXPECT_EQ(out.accepted().policy().kv_cache_dtype(), text);
  }
}

TEST(KvCacheDtypeTest, ModelInfoListsTheValuesAndTheDefault) {
  v1::ModelInfo out;
  FillModelInfo(Info(), Fp8Default(), &out);
  ASSERT_EQ(out.kv_cache_dtypes_size(), 2);
  EXPECT_EQ(out.kv_cache_dtypes(0), "auto");
  EXPECT_EQ(out.kv_cache_dtypes(1), "fp8");
  EXPECT_EQ(out.default_policy().kv_cache_dtype(), "fp8");
  v1::ModelInfo plain;
  FillModelInfo(Info(), ServerConfig(), &plain);
  EXPECT_EQ(plain.default_policy().kv_cache_dtype(), "auto");
  EXPECT_EQ(plain.weight_dtype(), "auto");
  ServerConfig fp8_weights;
  fp8_weights.weight_dtype = "fp8";
  v1::ModelInfo with_fp8;
  FillModelInfo(Info(), fp8_weights, &with_fp8);
  EXPECT_EQ(with_fp8.weight_dtype(), "fp8");
}

const ImagesApiModel kModel{"tiny", 32, /*jpeg=*/false};

TEST(KvCacheDtypeTest, HttpPolicyObjectTakesIt) {
  std::variant<ImagesRequest, HttpApiError> r =
      ParseImagesRequest(R"({"prompt": "x", "policy": {"name": "dense", "kv_cache_dtype": "fp8"}})", kModel);
  ASSERT_TRUE(std::holds_alternative<ImagesRequest>(r)) << std::get<HttpApiError>(r).message;
  const v1::GenerateRequest& g = std::get<ImagesRequest>(r).generate;
  EXPECT_EQ(g.policy().kv_cache_dtype(), "fp8");
  absl::StatusOr<engine::GenerationRequest> mapped = ToGenerationRequest(g, ServerConfig(), Info(), 1);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ(mapped->policy.kv_format, sparse::KvFormat::kFp8E4m3);
}

TEST(KvCacheDtypeTest, HttpBadValueIsA400NamingIt) {
  // Not a string: the HTTP layer's own check.
  std::variant<ImagesRequest, HttpApiError> r =
      ParseImagesRequest(R"({"prompt": "x", "policy": {"kv_cache_dtype": 8}})", kModel);
  ASSERT_TRUE(std::holds_alternative<HttpApiError>(r));
  EXPECT_EQ(std::get<HttpApiError>(r).status, 400);
  EXPECT_EQ(std::get<HttpApiError>(r).param, "policy.kv_cache_dtype");
  // A string that is no dtype: the shared check, answered as a 400 naming the JSON field.
  r = ParseImagesRequest(R"({"prompt": "x", "policy": {"kv_cache_dtype": "int4"}})", kModel);
  ASSERT_TRUE(std::holds_alternative<ImagesRequest>(r));
  absl::StatusOr<engine::GenerationRequest> mapped =
      ToGenerationRequest(std::get<ImagesRequest>(r).generate, ServerConfig(), Info(), 1);
  ASSERT_FALSE(mapped.ok());
  const HttpApiError e = ToHttpError(mapped.status());
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "policy.kv_cache_dtype");
  EXPECT_NE(e.message.find("int4"), std::string::npos) << e.message;
}

TEST(KvCacheDtypeTest, ConfigKeySetsTheDefault) {
  ServerConfig c;
  ASSERT_TRUE(ApplyConfigYaml(c, "model_dir: /m\ndefault_policy:\n  kv_cache_dtype: fp8\n", "t.yaml").ok());
  EXPECT_EQ(c.default_policy.kv_format, sparse::KvFormat::kFp8E4m3);
  EXPECT_EQ(ConfigValueText(c, "default_policy.kv_cache_dtype").value_or(""), "fp8");
  // A flag after the file wins.
  ASSERT_TRUE(SetConfigValue(c, "default_policy.kv_cache_dtype", "auto").ok());
  EXPECT_EQ(c.default_policy.kv_format, sparse::KvFormat::kAuto);
  EXPECT_EQ(ConfigValueText(c, "default_policy.kv_cache_dtype").value_or(""), "auto");
  const char* argv[] = {"argen_server", "--model_dir=/m", "--default_policy.kv_cache_dtype=fp8_e4m3"};
  absl::StatusOr<ServerConfig> loaded = LoadServerConfig(*ParseCommandLine(3, argv));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->default_policy.kv_format, sparse::KvFormat::kFp8E4m3);
}

TEST(KvCacheDtypeTest, ConfigBadValueNamesTheKey) {
  ServerConfig c;
  absl::Status s = ApplyConfigYaml(c, "default_policy:\n  kv_cache_dtype: fp16\n", "t.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("t.yaml: key 'default_policy.kv_cache_dtype'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("auto or fp8"), std::string::npos) << s;
  const char* argv[] = {"argen_server", "--model_dir=/m", "--default_policy.kv_cache_dtype="};
  absl::StatusOr<ServerConfig> loaded = LoadServerConfig(*ParseCommandLine(3, argv));
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("flag --default_policy.kv_cache_dtype"), std::string::npos)
      << loaded.status();
}

}  // namespace
}  // namespace argen::server
