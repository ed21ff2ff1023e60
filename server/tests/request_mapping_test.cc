// Proto -> engine request mapping: defaults, the policy rule, and
// INVALID_ARGUMENT messages that name the proto field.
#include "server/request_mapping.h"

#include <gtest/gtest.h>

#include <cmath>

#include "server/model_info.h"

namespace argen::server {
namespace {

constexpr int32_t kImageTokens = 64;

// The engine's side of the mapping: its decode length, codebook and limits.
engine::ModelInfo Info() {
  engine::ModelInfo info;
  info.image_tokens = kImageTokens;
  info.image_vocab = 16384;
  info.max_images_per_request = 16;
  info.max_batch_rows = 64;
  info.kv_budget_bytes = int64_t{1} << 30;
  return info;
}

ServerConfig DiagonalDefault() {
  ServerConfig c;
  c.default_policy.kind = sparse::PolicyKind::kDiagonal;
  c.default_policy.sparsity = 0.75;
  c.default_policy.n_recent = 40;
  c.default_sampling.cfg_weight = 4;
  return c;
}

v1::GenerateRequest Basic() {
  v1::GenerateRequest r;
  r.set_prompt("a cat");
  return r;
}

TEST(RequestMappingTest, DefaultsFillUnsetFields) {
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(Basic(), DiagonalDefault(), Info(), 99);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_images, 1);
  EXPECT_EQ(g->sampling.seed, 99u);  // server-chosen seed when unset
  EXPECT_FLOAT_EQ(g->sampling.cfg_weight, 4);
  EXPECT_EQ(g->policy.kind, sparse::PolicyKind::kDiagonal);
  EXPECT_DOUBLE_EQ(g->policy.sparsity, 0.75);
  EXPECT_EQ(g->policy.n_recent, 40);
}

TEST(RequestMappingTest, RequestFieldsWin) {
  v1::GenerateRequest r = Basic();
  r.set_num_images(3);
  r.set_seed(5);
  r.set_cfg_weight(2.5f);
  r.set_temperature(0.7f);
  r.set_top_k(10);
  r.set_top_p(0.9f);
  r.mutable_policy()->set_name("diagonal");
  r.mutable_policy()->set_sparsity(0.5);
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, DiagonalDefault(), Info(), 99);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_images, 3);
  EXPECT_EQ(g->sampling.seed, 5u);
  EXPECT_FLOAT_EQ(g->sampling.cfg_weight, 2.5f);
  EXPECT_FLOAT_EQ(g->sampling.temperature, 0.7f);
  EXPECT_EQ(g->sampling.top_k, 10);
  EXPECT_FLOAT_EQ(g->sampling.top_p, 0.9f);
  EXPECT_DOUBLE_EQ(g->policy.sparsity, 0.5);
  EXPECT_EQ(g->policy.n_recent, 40);  // same policy as the default: its n_recent stays
}

TEST(RequestMappingTest, NamedPolicyTakesDefaultSparsityButNotOtherParameters) {
  v1::GenerateRequest r = Basic();
  r.mutable_policy()->set_name("streaming_llm");
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, DiagonalDefault(), Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->policy.kind, sparse::PolicyKind::kStreamingLlm);
  EXPECT_DOUBLE_EQ(g->policy.sparsity, 0.75);
  EXPECT_EQ(g->policy.n_recent, 0);  // streaming_llm rejects n_recent; not inherited
  r.mutable_policy()->set_name("dense");
  g = ToGenerationRequest(r, DiagonalDefault(), Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->policy.kind, sparse::PolicyKind::kDense);
  EXPECT_DOUBLE_EQ(g->policy.sparsity, 0.0);
  r.mutable_policy()->set_name("sliding_window");
  r.mutable_policy()->set_n_att(16);  // n_att replaces the default sparsity
  g = ToGenerationRequest(r, DiagonalDefault(), Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->policy.n_att, 16);
  EXPECT_DOUBLE_EQ(g->policy.sparsity, 0.0);
}

// Issue 34: with a dense default a sparse policy named without sparsity or
// n_att would run dense (n_att = every key) under a sparse name; it is an
// INVALID_ARGUMENT naming policy.sparsity instead, on every front end.
TEST(RequestMappingTest, SparsePolicyWithoutSparsityUnderADenseDefaultIsRefused) {
  const ServerConfig dense;  // the shipped config's default policy
  for (const char* name : {"diagonal", "sliding_window", "grid_window", "alisa"}) {
    v1::GenerateRequest r = Basic();
    r.mutable_policy()->set_name(name);
    absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, dense, Info(), 1);
    ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(g.status().message().rfind("policy.sparsity: ", 0), 0u) << g.status();
    EXPECT_NE(g.status().message().find(name), std::string::npos) << g.status();
    r.mutable_policy()->set_sparsity(0.5);
    EXPECT_TRUE(ToGenerationRequest(r, dense, Info(), 1).ok()) << name;
    r.mutable_policy()->clear_sparsity();
    r.mutable_policy()->set_n_att(16);
    EXPECT_TRUE(ToGenerationRequest(r, dense, Info(), 1).ok()) << name;
  }
  // A window or sink size alone sets no budget either (N_att would be every
  // key): `--policy diagonal --n_recent 64` and `--policy streaming_llm
  // --n_sink 4` ran dense.
  for (const auto& [name, field] : {std::pair{"diagonal", "n_recent"}, std::pair{"streaming_llm", "n_sink"}}) {
    v1::GenerateRequest r = Basic();
    r.mutable_policy()->set_name(name);
    if (std::string(field) == "n_recent")
      r.mutable_policy()->set_n_recent(32);
    else
      r.mutable_policy()->set_n_sink(4);
    absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, dense, Info(), 1);
    ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << name << " with " << field;
    EXPECT_EQ(g.status().message().rfind("policy.sparsity: ", 0), 0u) << g.status();
    r.mutable_policy()->set_sparsity(0.75);
    EXPECT_TRUE(ToGenerationRequest(r, dense, Info(), 1).ok()) << name << " with " << field;
  }
  v1::GenerateRequest r = Basic();
  r.mutable_policy()->set_name("diagonal");
  r.mutable_policy()->set_sparsity(0);  // said explicitly: kept
  EXPECT_TRUE(ToGenerationRequest(r, dense, Info(), 1).ok());
  r.mutable_policy()->set_name("dense");
  r.mutable_policy()->clear_sparsity();
  EXPECT_TRUE(ToGenerationRequest(r, dense, Info(), 1).ok());
  EXPECT_TRUE(ToGenerationRequest(Basic(), dense, Info(), 1).ok());  // no name: the default
}

// Issue 34: negative_prompt reaches the engine request as given ("" keeps the family's default).
TEST(RequestMappingTest, NegativePromptIsCarriedToTheEngine) {
  v1::GenerateRequest r = Basic();
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, DiagonalDefault(), Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->negative_prompt, "");
  r.set_negative_prompt("blurry, text");
  g = ToGenerationRequest(r, DiagonalDefault(), Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->negative_prompt, "blurry, text");
  EXPECT_EQ(g->prompt, "a cat");
}

TEST(RequestMappingTest, DefaultWindowNarrowerThanRequestedNattFallsBackToPolicyDefault) {
  // Default diagonal n_recent 40 of 64 tokens; sparsity 0.25 asks N_att = 48 > 40.
  v1::GenerateRequest r = Basic();
  r.mutable_policy()->set_sparsity(0.25);
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, DiagonalDefault(), Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->policy.n_recent, 0);  // the policy's own default window
  // Within the default window the configured n_recent stays.
  r.mutable_policy()->set_sparsity(0.5);  // N_att 32 <= 40
  g = ToGenerationRequest(r, DiagonalDefault(), Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->policy.n_recent, 40);
  // A window the request itself names is never changed: too narrow is an error.
  r.mutable_policy()->set_sparsity(0.25);
  r.mutable_policy()->set_n_recent(40);
  g = ToGenerationRequest(r, DiagonalDefault(), Info(), 1);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("policy"), std::string::npos) << g.status();
}

struct BadField {
  const char* field;
  std::function<void(v1::GenerateRequest&)> mutate;
};

TEST(RequestMappingTest, BadFieldsAreInvalidArgumentNamingTheField) {
  const std::vector<BadField> cases = {
      {"prompt", [](v1::GenerateRequest& r) { r.set_prompt("   "); }},
      {"num_images", [](v1::GenerateRequest& r) { r.set_num_images(-1); }},
      {"num_images", [](v1::GenerateRequest& r) { r.set_num_images(17); }},
      {"cfg_weight", [](v1::GenerateRequest& r) { r.set_cfg_weight(NAN); }},
      {"temperature", [](v1::GenerateRequest& r) { r.set_temperature(-1); }},
      {"temperature", [](v1::GenerateRequest& r) { r.set_temperature(100.5f); }},
      {"top_k", [](v1::GenerateRequest& r) { r.set_top_k(-3); }},
      {"top_p", [](v1::GenerateRequest& r) { r.set_top_p(0); }},
      {"top_p", [](v1::GenerateRequest& r) { r.set_top_p(1.5f); }},
      {"request_id", [](v1::GenerateRequest& r) { r.set_request_id("has space"); }},
      {"policy.name", [](v1::GenerateRequest& r) { r.mutable_policy()->set_name("magic"); }},
      {"policy.sparsity", [](v1::GenerateRequest& r) { r.mutable_policy()->set_sparsity(1.0); }},
      {"policy.n_att", [](v1::GenerateRequest& r) { r.mutable_policy()->set_n_att(-2); }},
      {"policy.n_recent", [](v1::GenerateRequest& r) { r.mutable_policy()->set_n_recent(-2); }},
      {"policy.n_sink", [](v1::GenerateRequest& r) { r.mutable_policy()->set_n_sink(-5); }},
      // Cross-field rule from sparse::ResolvePolicy: n_att above the window.
      {"n_att",
       [](v1::GenerateRequest& r) {
         r.mutable_policy()->set_name("diagonal");
         r.mutable_policy()->set_sparsity(0);
         r.mutable_policy()->set_n_att(60);
         r.mutable_policy()->set_n_recent(20);
       }},
      {"policy",
       [](v1::GenerateRequest& r) {
         r.mutable_policy()->set_name("dense");
         r.mutable_policy()->set_sparsity(0.5);
       }},
  };
  for (const BadField& c : cases) {
    v1::GenerateRequest r = Basic();
    c.mutate(r);
    absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, DiagonalDefault(), Info(), 1);
    ASSERT_FALSE(g.ok()) << c.field;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(g.status().message().find(c.field), std::string::npos)
        << "expected '" << c.field << "' in: " << g.status().message();
  }
}

TEST(RequestMappingTest, StatusCodesCarryOver) {
  grpc::Status s = ToGrpcStatus(absl::ResourceExhaustedError("queue full"));
  EXPECT_EQ(s.error_code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "queue full");
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(), grpc::FAILED_PRECONDITION);
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("x")).error_code(), grpc::UNAVAILABLE);
  EXPECT_EQ(ToGrpcStatus(absl::DeadlineExceededError("x")).error_code(), grpc::DEADLINE_EXCEEDED);
  EXPECT_EQ(ToGrpcStatus(absl::CancelledError("x")).error_code(), grpc::CANCELLED);
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(RequestMappingTest, ModelInfoListsEveryPolicyAndRanges) {
  engine::ModelInfo info;
  info.name = "m";
  info.image_tokens = 576;
  info.image_vocab = 16384;
  v1::ModelInfo out;
  FillModelInfo(info, DiagonalDefault(), &out);
  ASSERT_EQ(out.policies_size(), 12);  // sparse::kAllPolicyKinds
  for (const v1::PolicyInfo& p : out.policies()) {
    EXPECT_TRUE(sparse::ParsePolicyName(p.name()).ok()) << p.name();
    if (p.name() == "ssd" || p.name() == "grid_window" || p.name() == "line_evict") {
      EXPECT_EQ(p.parameters_size(), 4) << p.name();  // sparsity, n_att, n_recent, n_sink
    }
    if (p.name() == "tova") {
      EXPECT_EQ(p.parameters_size(), 2);
    }
  }
  EXPECT_EQ(out.default_policy().name(), "diagonal");
  bool has_n_att = false;
  for (const v1::ParameterRange& r : out.ranges()) {
    if (r.name() == "n_att") {
      has_n_att = true;
      EXPECT_EQ(r.max(), 576);
    }
  }
  EXPECT_TRUE(has_n_att);
}

// A model of two sizes: the default 64 tokens (8 x 8) and a wide 16 x 4.
engine::ModelInfo TwoSizes() {
  engine::ModelInfo info = Info();
  info.name = "m";
  info.image_size = 128;
  info.token_grid = 8;
  info.image_layouts = {engine::ImageLayout{128, 128, 8, 8, kImageTokens, sparse::GridGeometry{8, 0, kImageTokens}},
                        engine::ImageLayout{256, 64, 16, 4, 64 + 3, sparse::GridGeometry{16, 1, 64 + 3}}};
  return info;
}

TEST(RequestMappingTest, WidthAndHeightPickTheSizeAndItsDecodeLength) {
  v1::GenerateRequest r = Basic();
  r.set_width(256);
  r.set_height(64);
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, DiagonalDefault(), TwoSizes(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->width, 256);
  EXPECT_EQ(g->height, 64);
  // Unset: the default size (0 x 0 for the engine).
  g = ToGenerationRequest(Basic(), DiagonalDefault(), TwoSizes(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->width, 0);
  EXPECT_EQ(g->height, 0);
}

TEST(RequestMappingTest, HalfAGivenOrUnsupportedSizeIsInvalidArgumentNamingTheField) {
  v1::GenerateRequest r = Basic();
  r.set_width(256);
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, DiagonalDefault(), TwoSizes(), 1);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message().rfind("height: ", 0), 0u) << g.status();
  r.set_height(-3);
  g = ToGenerationRequest(r, DiagonalDefault(), TwoSizes(), 1);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message().rfind("height: ", 0), 0u) << g.status();
  r.set_height(100);
  g = ToGenerationRequest(r, DiagonalDefault(), TwoSizes(), 1);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message().rfind("width: image size 256x100", 0), 0u) << g.status();
  EXPECT_NE(g.status().message().find("128x128, 256x64"), std::string::npos) << g.status();
}

TEST(RequestMappingTest, ManySizesAreListedBoundedInMessages) {
  engine::ModelInfo info = TwoSizes();
  info.image_layouts.resize(1);
  for (int32_t i = 1; i <= 30; ++i) {
    info.image_layouts.push_back(
        engine::ImageLayout{32 * i, 32, 2 * i, 2, 4 * i, sparse::GridGeometry{2 * i, 0, 4 * i}});
  }
  v1::GenerateRequest r = Basic();
  r.set_width(7);
  r.set_height(7);
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(r, DiagonalDefault(), info, 1);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("... (31 sizes; GetModelInfo lists all)"), std::string::npos) << g.status();
  EXPECT_EQ(g.status().message().find("640x32"), std::string::npos) << g.status();  // the 21st is left out
}

TEST(RequestMappingTest, ModelInfoListsTheSizesAndTheDefault) {
  v1::ModelInfo out;
  FillModelInfo(TwoSizes(), DiagonalDefault(), &out);
  ASSERT_EQ(out.image_sizes_size(), 2);
  EXPECT_EQ(out.image_sizes(1).width(), 256);
  EXPECT_EQ(out.image_sizes(1).height(), 64);
  EXPECT_EQ(out.image_sizes(1).image_tokens(), 67);
  EXPECT_EQ(out.default_size().width(), 128);
  EXPECT_EQ(out.default_size().height(), 128);
  EXPECT_EQ(out.default_size().image_tokens(), kImageTokens);
  // A model of one size (no list): that one.
  v1::ModelInfo one;
  engine::ModelInfo info = Info();
  info.image_size = 128;
  info.token_grid = 8;
  FillModelInfo(info, DiagonalDefault(), &one);
  ASSERT_EQ(one.image_sizes_size(), 1);
  EXPECT_EQ(one.image_sizes(0).width(), 128);
  EXPECT_EQ(one.image_sizes(0).image_tokens(), kImageTokens);
}

}  // namespace
}  // namespace argen::server

namespace argen::server {
namespace {

// parallel_window: the request's value (checked: range, dense only), else the
// server's default where the request is dense; INVALID_ARGUMENT names the field.
TEST(RequestMappingTest, ParallelWindowTakesTheDefaultWhereItAppliesAndIsChecked) {
  ServerConfig dense;
  dense.default_parallel_window = 4;
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(Basic(), dense, Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->parallel_window, 4);
  v1::GenerateRequest own = Basic();
  own.set_parallel_window(0);
  g = ToGenerationRequest(own, dense, Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->parallel_window, 0);  // set: wins over the default
  // A sparse request does not take the default (it could not run it).
  ServerConfig diagonal = DiagonalDefault();
  diagonal.default_parallel_window = 4;
  g = ToGenerationRequest(Basic(), diagonal, Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->parallel_window, 0);
  for (int32_t bad : {-1, 9}) {  // the 64-token grid is 8 wide
    v1::GenerateRequest r = Basic();
    r.set_parallel_window(bad);
    absl::StatusOr<engine::GenerationRequest> b = ToGenerationRequest(r, dense, Info(), 1);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(b.status().message().rfind("parallel_window: must be in [0, 8]", 0), 0u) << b.status();
  }
  // A diagonal request's own window runs (docs/policies.md defines it); a
  // policy without a definition is refused naming the field and the policy.
  v1::GenerateRequest sparse_window = Basic();
  sparse_window.set_parallel_window(2);
  absl::StatusOr<engine::GenerationRequest> b = ToGenerationRequest(sparse_window, diagonal, Info(), 1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->parallel_window, 2);
  ServerConfig h2o = diagonal;
  h2o.default_policy.kind = sparse::PolicyKind::kH2O;
  h2o.default_policy.n_recent = 0;
  b = ToGenerationRequest(sparse_window, h2o, Info(), 1);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message().rfind("parallel_window: parallel decoding runs with the dense", 0), 0u) << b.status();
  EXPECT_NE(b.status().message().find("policy h2o keeps"), std::string::npos) << b.status();
}

// speculative_window: the request's value (checked: range, dense only, not
// with parallel_window), else the server's default where the request is
// dense and decodes in order; INVALID_ARGUMENT names the field.
TEST(RequestMappingTest, SpeculativeWindowTakesTheDefaultWhereItAppliesAndIsChecked) {
  ServerConfig dense;
  dense.default_speculative_window = 4;
  absl::StatusOr<engine::GenerationRequest> g = ToGenerationRequest(Basic(), dense, Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->speculative_window, 4);
  v1::GenerateRequest own = Basic();
  own.set_speculative_window(0);
  g = ToGenerationRequest(own, dense, Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->speculative_window, 0);  // set: wins over the default
  // A request with parallel decoding does not take it, nor a sparse one.
  v1::GenerateRequest parallel = Basic();
  parallel.set_parallel_window(2);
  g = ToGenerationRequest(parallel, dense, Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->speculative_window, 0);
  ServerConfig diagonal = DiagonalDefault();
  diagonal.default_speculative_window = 4;
  g = ToGenerationRequest(Basic(), diagonal, Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->speculative_window, 0);
  // Nor does a speculative request take the default parallel window.
  ServerConfig parallel_default;
  parallel_default.default_parallel_window = 4;
  v1::GenerateRequest speculative = Basic();
  speculative.set_speculative_window(3);
  g = ToGenerationRequest(speculative, parallel_default, Info(), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->parallel_window, 0);
  EXPECT_EQ(g->speculative_window, 3);
  for (int32_t bad : {-1, 33}) {
    v1::GenerateRequest r = Basic();
    r.set_speculative_window(bad);
    absl::StatusOr<engine::GenerationRequest> b = ToGenerationRequest(r, ServerConfig{}, Info(), 1);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(b.status().message().rfind("speculative_window: must be in [0, 32]", 0), 0u) << b.status();
  }
  v1::GenerateRequest both = Basic();
  both.set_speculative_window(4);
  both.set_parallel_window(2);
  absl::StatusOr<engine::GenerationRequest> b = ToGenerationRequest(both, ServerConfig{}, Info(), 1);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message().rfind("speculative_window: speculative decoding does not combine", 0), 0u)
      << b.status();
  v1::GenerateRequest sparse_window = Basic();
  sparse_window.set_speculative_window(2);
  b = ToGenerationRequest(sparse_window, diagonal, Info(), 1);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message().rfind("speculative_window: speculative decoding needs the dense policy", 0), 0u)
      << b.status();
}

}  // namespace
}  // namespace argen::server
