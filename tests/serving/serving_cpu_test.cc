// End to end through the real CPU engine on the tiny checkpoint
// (tests/goldens/tiny/tiny-mha): concurrent mixed-policy requests produce
// valid PNGs of the model's size, a request joins a running batch, KV never
// exceeds the budget, /metrics is Prometheus text, and argen_client's
// commands work against the server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "client/commands.h"
#include "client/generate_call.h"
#include "engine/image/png.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

std::string TinyModel() { return SourceDir() + "/tests/goldens/tiny/tiny-mha"; }

std::unique_ptr<engine::Engine> TinyEngine(const server::ServerConfig& c) {
  engine::EngineOptions o;
  o.model_dir = c.model_dir;
  o.threads = 1;
  // The server's limits are the engine's: made from the same config.
  o.max_batch_rows = c.max_batch_rows;
  o.kv_budget_bytes = c.kv_budget_bytes;
  o.max_images_per_request = c.max_images_per_request;
  o.share_prompt_kv = c.share_prompt_kv;
  o.share_prompt_kv_across_requests = c.share_prompt_kv_across_requests;
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::CreateEngine(o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

absl::StatusOr<TestServer> StartTiny(const server::ServerConfig& c) { return StartServer(c, TinyEngine(c)); }

void ExpectValidPng(const v1::Image& image, int size) {
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(image.png().data()), image.png().size()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, size);
  EXPECT_EQ(decoded->height, size);
  EXPECT_EQ(image.width(), size);
}

TEST(ServingCpuTest, ConcurrentMixedPolicyRequestsAllFinishWithValidPngs) {
  server::ServerConfig c = LoopbackConfig(TinyModel());
  ASSERT_STARTED(t, StartTiny(c));
  const int size = t.server->engine().info().image_size;
  const std::vector<std::pair<std::string, double>> policies = {
      {"dense", -1}, {"diagonal", 0.75}, {"diagonal_sink4", 0.75}, {"streaming_llm", 0.5}, {"sliding_window", 0.5},
      {"h2o", 0.5},  {"tova", 0.5},      {"alisa", 0.5},           {"grid_window", 0.75},  {"diagonal_grid", 0.75}};
  std::vector<client::GenerateResult> results(policies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < policies.size(); ++i) {
    threads.emplace_back([&, i] {
      v1::GenerateRequest r;
      r.set_prompt("a red circle");
      r.set_num_images(1 + static_cast<int>(i % 2));
      r.set_seed(100 + i);
      r.mutable_policy()->set_name(policies[i].first);
      if (policies[i].second >= 0) r.mutable_policy()->set_sparsity(policies[i].second);
      results[i] = client::CallGenerate(*t.stub, r, 120);
    });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < policies.size(); ++i) {
    const client::GenerateResult& r = results[i];
    ASSERT_TRUE(r.status.ok()) << policies[i].first << ": " << r.status.error_message();
    EXPECT_EQ(r.accepted.policy().name(), policies[i].first);
    ASSERT_EQ(r.images.size(), 1 + i % 2) << policies[i].first;
    for (size_t k = 0; k < r.images.size(); ++k) {
      EXPECT_EQ(r.images[k].index(), static_cast<int>(k));
      EXPECT_EQ(r.images[k].seed(), 100 + i);
      ExpectValidPng(r.images[k], size);
    }
    ASSERT_TRUE(r.has_metrics);
    EXPECT_EQ(r.metrics.steps(), t.server->engine().info().image_tokens);
    EXPECT_EQ(r.metrics.peak_kv_bytes(), r.accepted.kv_bytes());
    EXPECT_GT(r.metrics.tokens_per_second(), 0);
  }
  // Diagonal (2 images) needs less KV per image than dense (1 image).
  EXPECT_LT(results[1].accepted.kv_bytes() / 2, results[0].accepted.kv_bytes());
  EXPECT_LE(t.engine->peak_kv_bytes(), c.kv_budget_bytes);
}

// ssd needs the model's head classification; the tiny model ships none: the
// request is refused with a message naming the file, the server keeps serving.
TEST(ServingCpuTest, SsdWithoutAHeadClassificationIsRefused) {
  ASSERT_STARTED(t, StartTiny(LoopbackConfig(TinyModel())));
  v1::GenerateRequest r;
  r.set_prompt("a red circle");
  r.mutable_policy()->set_name("ssd");
  r.mutable_policy()->set_sparsity(0.75);
  const client::GenerateResult refused = client::CallGenerate(*t.stub, r, 60);
  ASSERT_FALSE(refused.status.ok());
  EXPECT_EQ(refused.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(refused.status.error_message().find("ssd_heads.json"), std::string::npos) << refused.status.error_message();
  r.mutable_policy()->set_name("grid_window");
  EXPECT_TRUE(client::CallGenerate(*t.stub, r, 60).status.ok());
}

TEST(ServingCpuTest, KvNeverExceedsTheBudget) {
  server::ServerConfig c = LoopbackConfig(TinyModel());
  ASSERT_STARTED(probe, StartTiny(c));
  v1::GenerateRequest r;
  r.set_prompt("a blue square");
  r.mutable_policy()->set_name("dense");
  client::GenerateResult one = client::CallGenerate(*probe.stub, r, 60);
  ASSERT_TRUE(one.status.ok());
  probe.server.reset();

  c.kv_budget_bytes = one.accepted.kv_bytes() * 2 + one.accepted.kv_bytes() / 2;  // two fit
  ASSERT_STARTED(t, StartTiny(c));
  std::vector<client::GenerateResult> results(6);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] { results[i] = client::CallGenerate(*t.stub, r, 120); });
  }
  for (auto& th : threads) th.join();
  for (const auto& res : results) EXPECT_TRUE(res.status.ok()) << res.status.error_message();
  EXPECT_LE(t.engine->peak_kv_bytes(), c.kv_budget_bytes);
  EXPECT_GE(t.engine->peak_kv_bytes(), 2 * one.accepted.kv_bytes());  // it did batch two
  EXPECT_LE(t.engine->peak_rows(), 4);
}

// Prompt-KV sharing across requests through the server: requests joining
// one that runs (captions of its length, so its guidance prompt; one of its
// caption too) take only their rows' KV at admission, and every request's
// PNGs are the bytes a server without it makes.
TEST(ServingCpuTest, SharingAcrossRequestsGivesTheSameImagesWithLessKv) {
  const std::vector<std::string> captions = {"a red circle", "a blue cross", "a red circle", "green square"};
  std::map<bool, std::vector<client::GenerateResult>> runs;
  for (bool across : {false, true}) {
    server::ServerConfig c = LoopbackConfig(TinyModel());
    c.share_prompt_kv_across_requests = across;
    c.metrics_port = 0;
    ASSERT_STARTED(t, StartTiny(c));
    t.engine->set_step_delay(absl::Milliseconds(3));  // the first request runs while the others join
    grpc::ClientContext first_context;
    v1::GenerateRequest first;
    first.set_prompt("a red circle");
    first.set_seed(7);
    first.set_progress_interval_ms(1);
    auto reader = t.stub->Generate(&first_context, first);
    v1::GenerateEvent e;
    while (reader->Read(&e) && !e.has_progress()) {
    }
    // Its prompts are shared prompt rows while it runs (the gauge operators watch).
    const std::string scrape = HttpGet(t.server->metrics_port(), "/metrics");
    const std::string gauge = "\nargen_kv_cache_shared_prompt_bytes ";
    const size_t at = scrape.find(gauge);
    ASSERT_NE(at, std::string::npos) << scrape;
    const double shared_bytes = std::stod(scrape.substr(at + gauge.size()));
    if (across) {
      EXPECT_GT(shared_bytes, 0);
    } else {
      EXPECT_EQ(shared_bytes, 0);
    }
    std::vector<client::GenerateResult> results(captions.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < captions.size(); ++i) {
      threads.emplace_back([&, i] {
        v1::GenerateRequest r;
        r.set_prompt(captions[i]);
        r.set_num_images(1 + static_cast<int>(i % 2));
        r.set_seed(20 + i);
        results[i] = client::CallGenerate(*t.stub, r, 120);
      });
    }
    for (auto& th : threads) th.join();
    while (reader->Read(&e)) {
    }
    EXPECT_TRUE(reader->Finish().ok());
    for (size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i].status.ok()) << results[i].status.error_message();
      ASSERT_TRUE(results[i].has_metrics);
      if (across && captions[i] == first.prompt()) {
        EXPECT_LT(results[i].metrics.peak_kv_bytes(), results[i].accepted.kv_bytes())
            << "request " << i << " joined while its prompts were resident";
      } else if (across) {
        EXPECT_LE(results[i].metrics.peak_kv_bytes(), results[i].accepted.kv_bytes());
      } else {
        EXPECT_EQ(results[i].metrics.peak_kv_bytes(), results[i].accepted.kv_bytes());
      }
    }
    EXPECT_EQ(t.engine->KvBytesInUse(), 0);
    runs[across] = std::move(results);
  }
  for (size_t i = 0; i < captions.size(); ++i) {
    ASSERT_EQ(runs[true][i].images.size(), runs[false][i].images.size());
    for (size_t k = 0; k < runs[true][i].images.size(); ++k) {
      EXPECT_EQ(runs[true][i].images[k].png(), runs[false][i].images[k].png()) << "request " << i << " image " << k;
    }
  }
}

TEST(ServingCpuTest, RequestJoinsARunningBatch) {
  server::ServerConfig c = LoopbackConfig(TinyModel());
  ASSERT_STARTED(t, StartTiny(c));
  // Retry a few times in case the long request finishes before the short
  // one arrives on a loaded machine.
  for (int attempt = 0; attempt < 5; ++attempt) {
    grpc::ClientContext context;
    v1::GenerateRequest big;
    big.set_prompt("many shapes");
    big.set_num_images(8);
    big.set_progress_interval_ms(1);
    auto reader = t.stub->Generate(&context, big);
    v1::GenerateEvent e;
    while (reader->Read(&e) && !e.has_progress()) {
    }
    v1::GenerateRequest small;
    small.set_prompt("one shape");
    client::GenerateResult joined = client::CallGenerate(*t.stub, small, 60);
    while (reader->Read(&e)) {
    }
    ASSERT_TRUE(reader->Finish().ok());
    ASSERT_TRUE(joined.status.ok()) << joined.status.error_message();
    if (joined.metrics.mean_batch_rows() > joined.metrics.rows()) {
      EXPECT_EQ(joined.metrics.rows(), 2);
      SUCCEED() << "joined with mean batch " << joined.metrics.mean_batch_rows();
      return;
    }
  }
  FAIL() << "the short request never decoded beside the long one";
}

TEST(ServingCpuTest, MetricsEndpointServesPrometheusText) {
  server::ServerConfig c = LoopbackConfig(TinyModel());
  c.metrics_port = 0;
  ASSERT_STARTED(t, StartTiny(c));
  v1::GenerateRequest r;
  r.set_prompt("a green triangle");
  r.mutable_policy()->set_name("diagonal");
  r.mutable_policy()->set_sparsity(0.75);
  ASSERT_TRUE(client::CallGenerate(*t.stub, r, 60).status.ok());
  v1::GenerateRequest bad = r;
  bad.mutable_policy()->set_name("no such policy");
  EXPECT_EQ(client::CallGenerate(*t.stub, bad, 60).status.error_code(), grpc::INVALID_ARGUMENT);
  const std::string text = HttpGet(t.server->metrics_port(), "/metrics");
  for (const char* needle : {"# TYPE argen_requests_total counter",
                             "argen_requests_total{policy=\"diagonal\",status=\"OK\"} 1",
                             "# TYPE argen_queue_wait_seconds histogram",
                             "argen_queue_wait_seconds_bucket{policy=\"diagonal\",le=\"+Inf\"} 1",
                             "argen_time_to_first_image_seconds_count{policy=\"diagonal\"} 1",
                             "# TYPE argen_image_latency_seconds histogram",
                             "# TYPE argen_decode_step_seconds histogram",
                             "argen_tokens_total 64",
                             "argen_images_total 1",
                             "# TYPE argen_running_batch_rows gauge",
                             "# TYPE argen_queue_depth gauge",
                             "# TYPE argen_kv_cache_used_bytes gauge",
                             "argen_kv_cache_budget_bytes 4294967296",
                             "argen_running_requests 0",
                             "argen_kv_cache_usage_ratio 0",
                             "argen_build_info{backend=\"cpu\",model=\"tiny-mha\",version=\"",
                             "# TYPE process_cpu_seconds_total counter",
                             "# TYPE process_resident_memory_bytes gauge",
                             "process_start_time_seconds ",
                             "argen_requests_total{policy=\"invalid\",status=\"INVALID_ARGUMENT\"} 1"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << "missing: " << needle << "\n" << text;
  }
}

TEST(ServingCpuTest, ClientCommandsAgainstTheServer) {
  ASSERT_STARTED(t, StartTiny(LoopbackConfig(TinyModel())));
  const std::string out_dir = ::testing::TempDir() + "/argen_client_e2e";
  std::filesystem::remove_all(out_dir);
  std::ostringstream out, err;
  const std::string server = "--server=" + t.address;
  ASSERT_EQ(client::RunClient({server, "generate", "--prompt", "a red circle", "--count", "2", "--policy",
                               "diagonal:0.75", "--seed", "9", "--request_id", "demo", "--out", out_dir},
                              out, err),
            client::kOk)
      << err.str();
  for (const char* name : {"demo_0.png", "demo_1.png"}) {
    std::ifstream f(out_dir + "/" + name, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto decoded = image::DecodePng(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    EXPECT_TRUE(decoded.ok()) << name;
  }
  EXPECT_NE(out.str().find("tokens/s"), std::string::npos);
  EXPECT_NE(err.str().find("100%"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("tok/s"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("/2 images"), std::string::npos) << err.str();

  out.str("");
  EXPECT_EQ(client::RunClient({server, "info"}, out, err), client::kOk);
  EXPECT_NE(out.str().find("tiny-mha"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("--policy NAME --sparsity S"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("grid_window diagonal_grid ssd"), std::string::npos) << out.str();
  out.str("");
  EXPECT_EQ(client::RunClient({server, "health"}, out, err), client::kOk);
  EXPECT_EQ(out.str(), "SERVING\n");
  out.str("");
  EXPECT_EQ(client::RunClient({server, "load", "--requests", "6", "--concurrency", "3", "--policies",
                               "dense,diagonal:0.75,streaming_llm:0.5"},
                              out, err),
            client::kOk)
      << err.str();
  EXPECT_NE(out.str().find("ok 6, failed 0"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("images/s"), std::string::npos);
  EXPECT_NE(out.str().find("p50"), std::string::npos);
  EXPECT_NE(out.str().find("p99"), std::string::npos);
  // A server-side rejection is exit code 1 with the server's message.
  err.str("");
  EXPECT_EQ(
      client::RunClient(
          {server, "generate", "--prompt", "x", "--policy", "dense", "--sparsity", "0.5", "--out", out_dir}, out, err),
      client::kServerError);
  EXPECT_NE(err.str().find("INVALID_ARGUMENT"), std::string::npos) << err.str();
}

}  // namespace
}  // namespace argen::serving_test
