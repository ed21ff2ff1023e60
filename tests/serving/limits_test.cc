// What GetModelInfo advertises is what the server enforces, through the
// production wiring (argen_server's own engine on tests/goldens/tiny/tiny-mha,
// L_dec 64, 64 codes), with the status codes docs/serving.md names:
//   * the limits (max_images_per_request, max_batch_rows, kv_budget_bytes),
//     table-driven over server settings: a request at the advertised limit
//     runs, one past it is INVALID_ARGUMENT naming num_images or
//     FAILED_PRECONDITION naming max_batch_rows / kv_budget_bytes;
//   * every parameter range: its advertised bounds are accepted (inside an
//     open end: just inside) and just past them is INVALID_ARGUMENT naming it;
//   * the defaults info shows are the server's (n_recent 64, not 0) and the
//     client prints open ends as such ("sparsity [0, 1)").
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "client/commands.h"
#include "client/generate_call.h"
#include "engine/engine.h"
#include "server/model_info.h"
#include "server/request_mapping.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

std::string TinyModel() { return SourceDir() + "/tests/goldens/tiny/tiny-mha"; }

struct Live {
  std::unique_ptr<server::ArgenServer> server;
  std::unique_ptr<v1::ArGen::Stub> stub;
  std::string address;
};

// argen_server's own path: the server loads the engine from the config.
absl::StatusOr<Live> Serve(const server::ServerConfig& config) {
  absl::StatusOr<std::unique_ptr<server::ArgenServer>> s = server::ArgenServer::Start(config);
  if (!s.ok()) return s.status();
  Live l;
  l.server = *std::move(s);
  l.address = absl::StrCat("127.0.0.1:", l.server->port());
  l.stub = v1::ArGen::NewStub(client::MakeChannel(l.address, 64 << 20));
  return l;
}

v1::ModelInfo Info(v1::ArGen::Stub& stub) {
  grpc::ClientContext context;
  v1::ModelInfo info;
  EXPECT_TRUE(stub.GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  return info;
}

const v1::ParameterRange* Range(const v1::ModelInfo& info, const std::string& name) {
  for (const v1::ParameterRange& r : info.ranges())
    if (r.name() == name) return &r;
  return nullptr;
}

client::GenerateResult Generate(v1::ArGen::Stub& stub, int images, const std::string& policy = "") {
  v1::GenerateRequest r;
  r.set_prompt("a red square");
  r.set_num_images(images);
  r.set_seed(1);
  if (!policy.empty()) r.mutable_policy()->set_name(policy);
  return client::CallGenerate(stub, r, 120);
}

struct LimitCase {
  std::string label;
  int32_t max_images_per_request, max_batch_rows;
  int64_t kv_budget_bytes;     // 0: room for `fit_images` dense images and not one more
  int32_t advertised_images;   // num_images max GetModelInfo must show
  int32_t fit_images;          // the most that run
  grpc::StatusCode over_code;  // one image more
  std::string over_names;
};

TEST(LimitsTest, ModelInfoReportsTheLimitsThatAreEnforced) {
  // One dense image's need on this model (prompt "a red square").
  int64_t one_image = 0;
  {
    server::ServerConfig c = LoopbackConfig(TinyModel());
    absl::StatusOr<Live> l = Serve(c);
    ASSERT_TRUE(l.ok()) << l.status();
    client::GenerateResult r = Generate(*l->stub, 1, "dense");
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    one_image = r.accepted.kv_bytes();
  }
  ASSERT_GT(one_image, 0);
  const std::vector<LimitCase> cases = {
      // #11: --max_images_per_request=32 was advertised but 16 enforced.
      {"max_images_per_request 32", 32, 64, int64_t{4} << 30, 32, 32, grpc::INVALID_ARGUMENT, "num_images"},
      // #16: --max_batch_rows 4 with 3 images was INVALID_ARGUMENT and info said 16.
      {"max_batch_rows 4", 16, 4, int64_t{4} << 30, 2, 2, grpc::FAILED_PRECONDITION, "max_batch_rows"},
      {"max_batch_rows 7", 16, 7, int64_t{4} << 30, 3, 3, grpc::FAILED_PRECONDITION, "max_batch_rows"},
      {"kv budget of two images", 16, 64, 0, 16, 2, grpc::FAILED_PRECONDITION, "kv_budget_bytes"},
  };
  for (const LimitCase& c : cases) {
    SCOPED_TRACE(c.label);
    server::ServerConfig config = LoopbackConfig(TinyModel());
    config.max_images_per_request = c.max_images_per_request;
    config.max_batch_rows = c.max_batch_rows;
    config.kv_budget_bytes = c.kv_budget_bytes > 0 ? c.kv_budget_bytes : 2 * one_image + one_image / 2;
    absl::StatusOr<Live> l = Serve(config);
    ASSERT_TRUE(l.ok()) << l.status();
    const v1::ModelInfo info = Info(*l->stub);
    EXPECT_EQ(info.max_batch_rows(), c.max_batch_rows);
    EXPECT_EQ(info.kv_budget_bytes(), config.kv_budget_bytes);
    EXPECT_EQ(info.max_images_per_request(), c.advertised_images);
    const v1::ParameterRange* images = Range(info, "num_images");
    ASSERT_NE(images, nullptr);
    EXPECT_EQ(images->max(), c.advertised_images);

    client::GenerateResult fit = Generate(*l->stub, c.fit_images, "dense");
    EXPECT_TRUE(fit.status.ok()) << c.fit_images << " images: " << fit.status.error_message();
    EXPECT_EQ(fit.images.size(), static_cast<size_t>(c.fit_images));
    client::GenerateResult over = Generate(*l->stub, c.fit_images + 1, "dense");
    EXPECT_EQ(over.status.error_code(), c.over_code) << over.status.error_message();
    EXPECT_NE(over.status.error_message().find(c.over_names), std::string::npos) << over.status.error_message();
  }
}

// A request with one field set, the others the server's defaults.
struct Probe {
  std::string field;
  std::function<void(v1::GenerateRequest&, double)> set;
  double step;            // how far past a bound "just outside" is
  double below_step = 0;  // below the minimum, when not `step`
};

TEST(LimitsTest, EveryAdvertisedRangeIsTheEnforcedOne) {
  server::ServerConfig config = LoopbackConfig(TinyModel());
  engine::EngineOptions options;
  options.model_dir = config.model_dir;
  options.threads = 1;
  options.max_batch_rows = config.max_batch_rows;
  options.kv_budget_bytes = config.kv_budget_bytes;
  options.max_images_per_request = config.max_images_per_request;
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine = engine::CreateEngine(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const engine::ModelInfo& model = (*engine)->info();
  v1::ModelInfo info;
  server::FillModelInfo(model, config, &info);

  auto policy = [](const char* name) { return [name](v1::GenerateRequest& r) { r.mutable_policy()->set_name(name); }; };
  const std::map<std::string, Probe> probes = {
      // 0 is proto3's unset and means 1: below the minimum is -1.
      {"num_images", {"num_images", [](auto& r, double v) { r.set_num_images(static_cast<int>(v)); }, 1, 2}},
      {"sparsity",
       {"policy.sparsity",
        [&](auto& r, double v) {
          policy("diagonal")(r);
          r.mutable_policy()->set_sparsity(v);
        },
        0.01}},
      {"n_att",
       {"policy.n_att",
        [&](auto& r, double v) {
          policy("sliding_window")(r);
          r.mutable_policy()->set_n_att(static_cast<int>(v));
        },
        1}},
      {"n_recent",
       {"policy.n_recent",
        [&](auto& r, double v) {
          policy("diagonal")(r);
          r.mutable_policy()->set_n_att(1);  // a window alone sets no budget (refused)
          r.mutable_policy()->set_n_recent(static_cast<int>(v));
        },
        1}},
      {"n_sink",
       {"policy.n_sink",
        [&](auto& r, double v) {
          policy("streaming_llm")(r);
          // A sink alone sets no budget (refused); every key leaves room for the widest sink.
          r.mutable_policy()->set_n_att(model.image_tokens);
          r.mutable_policy()->set_n_sink(static_cast<int>(v));
        },
        1}},
      {"cfg_weight", {"cfg_weight", [](auto& r, double v) { r.set_cfg_weight(static_cast<float>(v)); }, 1e-3}},
      {"temperature", {"temperature", [](auto& r, double v) { r.set_temperature(static_cast<float>(v)); }, 1e-3}},
      {"top_k", {"top_k", [](auto& r, double v) { r.set_top_k(static_cast<int>(v)); }, 1}},
      {"top_p", {"top_p", [](auto& r, double v) { r.set_top_p(static_cast<float>(v)); }, 1e-3}},
      {"parallel_window",
       {"parallel_window",
        [&](auto& r, double v) {
          policy("dense")(r);
          r.set_parallel_window(static_cast<int>(v));
        },
        1}},
      {"speculative_window",
       {"speculative_window",
        [&](auto& r, double v) {
          policy("dense")(r);
          r.set_speculative_window(static_cast<int>(v));
        },
        1}},
  };
  ASSERT_EQ(info.ranges_size(), static_cast<int>(probes.size()));
  for (const v1::ParameterRange& range : info.ranges()) {
    SCOPED_TRACE(range.name());
    auto it = probes.find(range.name());
    ASSERT_NE(it, probes.end()) << "an advertised parameter without a probe";
    const Probe& p = it->second;
    auto check = [&](double value, bool accepted) {
      v1::GenerateRequest r;
      r.set_prompt("a red square");
      p.set(r, value);
      absl::StatusOr<engine::GenerationRequest> g = server::ToGenerationRequest(r, config, model, 1);
      if (accepted) {
        ASSERT_TRUE(g.ok()) << value << ": " << g.status();
        absl::StatusOr<engine::PreparedRequest> prepared = (*engine)->Prepare(*g);
        EXPECT_TRUE(prepared.ok()) << value << ": " << prepared.status();
      } else {
        ASSERT_FALSE(g.ok()) << value << " accepted outside the advertised range";
        EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
        EXPECT_NE(g.status().message().find(p.field), std::string::npos) << g.status();
      }
    };
    check(range.min_exclusive() ? range.min() + p.step : range.min(), true);
    check(range.max_exclusive() ? range.max() - p.step : range.max(), true);
    check(range.min_exclusive() ? range.min() : range.min() - (p.below_step > 0 ? p.below_step : p.step), false);
    check(range.max_exclusive() ? range.max() : range.max() + p.step, false);
  }
}

TEST(LimitsTest, InfoShowsTheServersDefaultsAndOpenEnds) {
  server::ServerConfig config = LoopbackConfig(TinyModel());
  config.default_policy.kind = sparse::PolicyKind::kDiagonal;
  config.default_policy.sparsity = 0.9;
  config.default_policy.n_recent = 64;      // as configs/argen.yaml
  config.default_sampling.temperature = 0;  // greedy is a valid default
  absl::StatusOr<Live> l = Serve(config);
  ASSERT_TRUE(l.ok()) << l.status();
  const v1::ModelInfo info = Info(*l->stub);
  const v1::ParameterRange* n_recent = Range(info, "n_recent");
  const v1::ParameterRange* sparsity = Range(info, "sparsity");
  const v1::ParameterRange* temperature = Range(info, "temperature");
  ASSERT_TRUE(n_recent && sparsity && temperature);
  EXPECT_EQ(n_recent->default_value(), 64);  // #15: was 0
  EXPECT_TRUE(sparsity->max_exclusive());
  EXPECT_FALSE(sparsity->min_exclusive());
  EXPECT_EQ(temperature->min(), 0);
  EXPECT_EQ(temperature->default_value(), 0);
  std::ostringstream out, err;
  client::CommonOptions common;
  common.server = l->address;
  ASSERT_EQ(client::RunInfo(common, {}, out, err), client::kOk) << err.str();
  EXPECT_NE(out.str().find("sparsity [0, 1) default 0.9"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("n_recent [0, 64] default 64"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("top_p (0, 1] default 1"), std::string::npos) << out.str();
  // A greedy request (temperature 0) runs.
  v1::GenerateRequest r;
  r.set_prompt("a red square");
  r.set_temperature(0);
  client::GenerateResult greedy = client::CallGenerate(*l->stub, r, 120);
  EXPECT_TRUE(greedy.status.ok()) << greedy.status.error_message();
}

}  // namespace
}  // namespace argen::serving_test
