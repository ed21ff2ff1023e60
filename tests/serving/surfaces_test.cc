// Issue 34, the surfaces a user touches (the CLI and metrics side): the
// client bounds --count by the server's limit before sending; /metrics has
// per-transport series with the served model, prefill / VQ-decode /
// prompt-token histograms, time to first preview and the HTTP API's
// responses by status; a sparse policy named without a sparsity is the same
// INVALID_ARGUMENT on gRPC, HTTP and the CLI; negative_prompt on both APIs
// changes the image (the guidance row's prompt) and an empty one keeps its
// bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "client/commands.h"
#include "engine/image/png_text.h"
#include "scheduler/tests/fake_engine.h"
#include "tests/serving/http_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

namespace fs = std::filesystem;

// The value of the series whose line starts with `series` (name and labels
// exactly as serialized); -1 when absent.
double SeriesValue(const std::string& scrape, const std::string& series) {
  std::istringstream lines(scrape);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

scheduler::testing::FakeEngineOptions StepsTakeTime() {
  scheduler::testing::FakeEngineOptions o;
  o.step_time = absl::Milliseconds(1);  // prefill and decode take measurable time
  o.decode_time = absl::Milliseconds(1);
  o.max_images_per_request = 4;
  return o;
}

TEST(SurfacesTest, CountAboveTheServersLimitIsACommandLineError) {
  ASSERT_STARTED(
      t, StartServer(LoopbackConfig("fake"), std::make_unique<scheduler::testing::FakeEngine>(StepsTakeTime())));
  const fs::path dir = fs::path(::testing::TempDir()) / "argen_surfaces_count";
  fs::remove_all(dir);
  std::ostringstream out, err;
  EXPECT_EQ(client::RunClient({"--server=" + t.address, "generate", "-p", "x", "--count", "5", "--out", dir.string()},
                              out, err),
            client::kUsage);
  EXPECT_NE(err.str().find("--count 5: the server takes at most 4 images per request"), std::string::npos) << err.str();
  EXPECT_FALSE(fs::exists(dir));
  err.str("");
  EXPECT_EQ(
      client::RunClient({"--server=" + t.address, "generate", "-p", "x", "-n", "4", "--out", dir.string()}, out, err),
      client::kOk)
      << err.str();
  // load: every request would fail, so it is refused before any is sent.
  err.str("");
  EXPECT_EQ(
      client::RunClient({"--server=" + t.address, "load", "-p", "x", "--count", "5", "--requests", "2"}, out, err),
      client::kUsage);
  EXPECT_NE(err.str().find("argen_client load: --count 5: the server takes at most 4 images per request"),
            std::string::npos)
      << err.str();
}

TEST(SurfacesTest, MetricsHaveTransportModelStagesFirstPreviewAndHttpStatus) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.metrics_port = 0;
  c.http_port = 0;
  c.http_address = "127.0.0.1";
  ASSERT_STARTED(t, StartServer(c, std::make_unique<scheduler::testing::FakeEngine>(StepsTakeTime())));
  t.engine->set_step_delay(absl::Milliseconds(5));  // the preview is made well before the last token
  v1::GenerateRequest r;
  r.set_prompt("four");
  r.set_previews(1);
  const client::GenerateResult grpc_result = client::CallGenerate(*t.stub, r, 30);
  ASSERT_TRUE(grpc_result.status.ok()) << grpc_result.status.error_message();
  auto http = HttpClient(t.server->http_port());
  const httplib::Result posted = PostImages(*http, {{"prompt", "four"}, {"response_format", "b64_json"}});
  ASSERT_TRUE(posted) << httplib::to_string(posted.error());
  EXPECT_EQ(posted->status, 200) << posted->body;
  EXPECT_EQ(http->Get("/health")->status, 200);
  EXPECT_EQ(http->Get("/no/such/route")->status, 404);
  r.mutable_policy()->set_name("nope");
  EXPECT_EQ(client::CallGenerate(*t.stub, r, 30).status.error_code(), grpc::INVALID_ARGUMENT);

  const std::string scrape = HttpGet(t.server->metrics_port(), "/metrics");
  const std::string grpc_labels = R"({model="fake",transport="grpc"})";
  const std::string http_labels = R"({model="fake",transport="http"})";
  EXPECT_EQ(SeriesValue(scrape, R"(argen_transport_requests_total{model="fake",status="OK",transport="grpc"})"), 1)
      << scrape;
  EXPECT_EQ(SeriesValue(scrape, R"(argen_transport_requests_total{model="fake",status="OK",transport="http"})"), 1)
      << scrape;
  EXPECT_EQ(
      SeriesValue(scrape, R"(argen_transport_requests_total{model="fake",status="INVALID_ARGUMENT",transport="grpc"})"),
      1)
      << scrape;
  for (const std::string& labels : {grpc_labels, http_labels}) {
    EXPECT_EQ(SeriesValue(scrape, "argen_prefill_seconds_count" + labels), 1) << labels << "\n" << scrape;
    EXPECT_EQ(SeriesValue(scrape, "argen_vq_decode_seconds_count" + labels), 1) << labels << "\n" << scrape;
    EXPECT_EQ(SeriesValue(scrape, "argen_prompt_tokens_count" + labels), 1) << labels << "\n" << scrape;
    // The fake's prompt: 4 framing tokens plus one a byte.
    EXPECT_EQ(SeriesValue(scrape, "argen_prompt_tokens_sum" + labels), scheduler::testing::FakePromptTokens("four"))
        << scrape;
  }
  EXPECT_EQ(SeriesValue(scrape, "argen_time_to_first_preview_seconds_count" + grpc_labels), 1) << scrape;
  EXPECT_GE(SeriesValue(scrape, R"(argen_http_responses_total{code="200"})"), 2) << scrape;
  EXPECT_EQ(SeriesValue(scrape, R"(argen_http_responses_total{code="404"})"), 1) << scrape;
  // Step rows up to the largest batch cuda "auto" sizes (2,000+ rows on an H200).
  EXPECT_NE(scrape.find(R"(argen_decode_step_rows_bucket{le="16384"})"), std::string::npos) << scrape;
  // The series that were there keep their labels (dashboards, alerts).
  EXPECT_EQ(SeriesValue(scrape, R"(argen_requests_total{policy="dense",status="OK"})"), 2) << scrape;
}

TEST(SurfacesTest, SparsePolicyWithoutSparsityIsRefusedOnGrpcHttpAndTheCli) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.http_port = 0;
  c.http_address = "127.0.0.1";
  ASSERT_STARTED(t, StartServer(c, std::make_unique<scheduler::testing::FakeEngine>()));
  v1::GenerateRequest r;
  r.set_prompt("x");
  r.mutable_policy()->set_name("diagonal");
  const client::GenerateResult refused = client::CallGenerate(*t.stub, r, 30);
  EXPECT_EQ(refused.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(refused.status.error_message().rfind("policy.sparsity: diagonal is a sparse policy", 0), 0u)
      << refused.status.error_message();
  auto http = HttpClient(t.server->http_port());
  const httplib::Result posted = PostImages(*http, {{"prompt", "x"}, {"policy", "diagonal"}});
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 400) << posted->body;
  EXPECT_NE(posted->body.find("policy.sparsity"), std::string::npos) << posted->body;
  std::ostringstream out, err;
  const std::string dir = (fs::path(::testing::TempDir()) / "argen_surfaces_policy").string();
  EXPECT_EQ(client::RunClient({"--server=" + t.address, "generate", "-p", "x", "--policy", "diagonal", "--out", dir},
                              out, err),
            client::kServerError);
  // Said once: the message, no repeated field line.
  const std::string said = err.str();
  EXPECT_NE(said.find("INVALID_ARGUMENT: policy.sparsity: diagonal is a sparse policy"), std::string::npos) << said;
  EXPECT_EQ(said.find("is a sparse policy"), said.rfind("is a sparse policy")) << said;
  out.str("");
  err.str("");
  EXPECT_EQ(client::RunClient(
                {"--server=" + t.address, "generate", "-p", "x", "--policy", "diagonal:0.5", "--out", dir}, out, err),
            client::kOk)
      << err.str();
  // A misspelt name: "did you mean".
  r.mutable_policy()->set_name("diagnoal");
  r.mutable_policy()->set_sparsity(0.5);
  const client::GenerateResult typo = client::CallGenerate(*t.stub, r, 30);
  EXPECT_NE(typo.status.error_message().find("(did you mean \"diagonal\"?)"), std::string::npos)
      << typo.status.error_message();
}

std::string TinyModel() { return SourceDir() + "/tests/goldens/tiny/tiny-mha"; }

std::unique_ptr<engine::Engine> TinyEngine(const server::ServerConfig& c) {
  engine::EngineOptions o;
  o.model_dir = c.model_dir;
  o.threads = 1;
  o.max_batch_rows = c.max_batch_rows;
  o.kv_budget_bytes = c.kv_budget_bytes;
  o.max_images_per_request = c.max_images_per_request;
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::CreateEngine(o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

std::string OneImage(v1::ArGen::Stub& stub, const v1::GenerateRequest& r) {
  const client::GenerateResult result = client::CallGenerate(stub, r, 60);
  EXPECT_TRUE(result.status.ok()) << result.status.error_message();
  return result.images.size() == 1 ? result.images[0].png() : std::string();
}

// Issue 34, item 7: negative_prompt replaces the guidance row's prompt (the
// tiny model's images change for the same seed); an empty one keeps today's
// bytes exactly; HTTP's negative_prompt is gRPC's; the PNG records it.
TEST(SurfacesCpuTest, NegativePromptChangesTheImageAndEmptyKeepsItsBytes) {
  server::ServerConfig c = LoopbackConfig(TinyModel());
  c.http_port = 0;
  c.http_address = "127.0.0.1";
  ASSERT_STARTED(t, StartServer(c, TinyEngine(c)));
  v1::GenerateRequest r;
  r.set_prompt("a red circle");
  r.set_seed(7);
  const std::string plain = OneImage(*t.stub, r);
  ASSERT_FALSE(plain.empty());
  r.set_negative_prompt("");
  EXPECT_EQ(OneImage(*t.stub, r), plain);
  r.set_negative_prompt("a blue square");
  const std::string negative = OneImage(*t.stub, r);
  ASSERT_FALSE(negative.empty());
  EXPECT_NE(negative, plain);
  absl::StatusOr<image::TextEntries> text = image::ReadPngText(negative);
  ASSERT_TRUE(text.ok()) << text.status();
  bool recorded = false;
  for (const auto& [key, value] : *text) recorded |= key == "negative_prompt" && value == "a blue square";
  EXPECT_TRUE(recorded);
  absl::StatusOr<image::TextEntries> plain_text = image::ReadPngText(plain);
  ASSERT_TRUE(plain_text.ok());
  for (const auto& [key, value] : *plain_text) EXPECT_NE(key, "negative_prompt");

  auto http = HttpClient(t.server->http_port());
  const httplib::Result posted = PostImages(
      *http,
      {{"prompt", "a red circle"}, {"seed", 7}, {"negative_prompt", "a blue square"}, {"response_format", "b64_json"}});
  ASSERT_TRUE(posted);
  ASSERT_EQ(posted->status, 200) << posted->body;
  const nlohmann::json body = nlohmann::json::parse(posted->body);
  EXPECT_EQ(Base64Decode(body["data"][0]["b64_json"].get<std::string>()), negative);
  const httplib::Result wrong = PostImages(*http, {{"prompt", "x"}, {"negative_prompt", 3}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 400) << wrong->body;
  EXPECT_NE(wrong->body.find("negative_prompt"), std::string::npos) << wrong->body;
}

}  // namespace
}  // namespace argen::serving_test
