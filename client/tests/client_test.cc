// argen_client pieces that need no server: policy specs,
// percentiles, command-line errors and the unreachable-server exit code.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "client/commands.h"
#include "client/image_writer.h"
#include "client/latency_stats.h"
#include "client/progress_bar.h"
#include "client/prompts_file.h"
#include "client/units.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace argen::client {
namespace {

TEST(PolicySpecTest, NameAndOptionalSparsity) {
  auto p = ParsePolicySpec("diagonal:0.75");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name(), "diagonal");
  ASSERT_TRUE(p->has_sparsity());
  EXPECT_DOUBLE_EQ(p->sparsity(), 0.75);
  p = ParsePolicySpec("dense");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->has_sparsity());
  EXPECT_FALSE(ParsePolicySpec("diagonal:lots").ok());
  EXPECT_FALSE(ParsePolicySpec(":0.5").ok());
  EXPECT_FALSE(ParsePolicySpec("a:1:2").ok());
}

TEST(PercentileTest, NearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted input
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 50);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.9), 90);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.99), 99);
  EXPECT_DOUBLE_EQ(Percentile(v, 1.0), 100);
  EXPECT_DOUBLE_EQ(Percentile({3.0}, 0.99), 3);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 0.5), 2);
  EXPECT_DOUBLE_EQ(Percentile({}, 0.5), 0);
}

TEST(ClientCliTest, BadCommandLinesExitWithUsageCode) {
  std::ostringstream out, err;
  EXPECT_EQ(RunClient({}, out, err), kUsage);
  EXPECT_EQ(RunClient({"paint"}, out, err), kUsage);
  EXPECT_NE(err.str().find("unknown command 'paint'"), std::string::npos);
  EXPECT_EQ(RunClient({"generate"}, out, err), kUsage);  // --prompt missing
  EXPECT_NE(err.str().find("--prompt"), std::string::npos);
  EXPECT_EQ(RunClient({"generate", "--prompt=x", "--count=0"}, out, err), kUsage);
  EXPECT_EQ(RunClient({"load", "--concurrency=zero"}, out, err), kUsage);
  EXPECT_EQ(RunClient({"--server"}, out, err), kUsage);
  EXPECT_EQ(RunClient({"--help"}, out, err), kOk);
}

TEST(ClientCliTest, ServerDownIsUnreachable) {
  std::ostringstream out, err;
  // Port 1 on loopback: nothing listens there.
  EXPECT_EQ(RunClient({"--server=127.0.0.1:1", "--timeout=5", "health"}, out, err), kUnreachable);
  EXPECT_NE(err.str().find("UNAVAILABLE"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(RunClient({"--server=127.0.0.1:1", "--timeout=5", "generate", "--prompt=x", "--out",
                       ::testing::TempDir() + "/argen_client_down"},
                      out, err),
            kUnreachable);
  EXPECT_NE(err.str().find("127.0.0.1:1"), std::string::npos) << err.str();
}

TEST(ImageWriterTest, SafeStemKeepsFileNamesInsideTheFolder) {
  EXPECT_EQ(ImageWriter::SafeStem("01J9ZQ3K8V6W2X4Y5Z7A8B9C0D"), "01J9ZQ3K8V6W2X4Y5Z7A8B9C0D");
  EXPECT_EQ(ImageWriter::SafeStem("my-id_7"), "my-id_7");
  EXPECT_EQ(ImageWriter::SafeStem("../escaped"), "___escaped");
  EXPECT_EQ(ImageWriter::SafeStem("/etc/passwd"), "_etc_passwd");
  EXPECT_EQ(ImageWriter::SafeStem(".."), "__");
  EXPECT_EQ(ImageWriter::SafeStem(""), "image");
  EXPECT_EQ(ImageWriter::SafeStem(std::string(300, 'a')).size(), 128u);
  ImageWriter w("/tmp/o", false);
  EXPECT_EQ(w.PathFor("../x", 2), std::filesystem::path("/tmp/o/___x_2.png"));
}

TEST(ImageWriterTest, RefusesToReplaceUnlessOverwriting) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "argen_writer";
  std::filesystem::remove_all(dir);
  ImageWriter writer(dir, false);
  ASSERT_TRUE(writer.CheckWritable().ok());
  EXPECT_FALSE(std::filesystem::exists(dir));  // created at the first image only
  ASSERT_TRUE(writer.Write("a", 0, "first").ok());
  EXPECT_EQ(writer.CheckFree("a", 1).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(writer.CheckFree("a", 0).ok());
  EXPECT_EQ(writer.Write("a", 0, "second").status().code(), absl::StatusCode::kAlreadyExists);
  ImageWriter overwriting(dir, true);
  EXPECT_TRUE(overwriting.CheckFree("a", 1).ok());
  ASSERT_TRUE(overwriting.Write("a", 0, "second").ok());
  std::ifstream f(dir / "a_0.png");
  std::string text;
  f >> text;
  EXPECT_EQ(text, "second");
  // A file where the folder should be.
  ImageWriter blocked(dir / "a_0.png" / "sub", false);
  EXPECT_FALSE(blocked.CheckWritable().ok());
}

// Issue 34: --seed -1 ran as seed 18446744073709551615; now a usage error.
TEST(ClientCliTest, NegativeOrHugeSeedIsACommandLineError) {
  for (const char* seed : {"--seed=-1", "--seed=18446744073709551616", "--seed=1.5", "--seed=x"}) {
    std::ostringstream out, err;
    EXPECT_EQ(RunClient({"generate", "--prompt=x", seed}, out, err), kUsage) << seed;
    EXPECT_NE(err.str().find("--seed"), std::string::npos) << err.str();
    EXPECT_NE(err.str().find("18446744073709551615]"), std::string::npos) << err.str();
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunClient({"load", "--seed", "-1"}, out, err), kUsage) << err.str();
}

// Issue 34: every long flag in both spellings, -p, the protocol names as
// aliases, units on durations and byte counts. A command line that parses
// goes on to call the (absent) server: exit 3, never 2.
TEST(ClientCliTest, HyphenAndUnderscoreSpellingsShortFlagsAndAliasesParse) {
  const std::string down = "--server=127.0.0.1:1";
  const std::string dir = ::testing::TempDir() + "/argen_client_spellings";
  std::filesystem::create_directories(dir);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {down, "generate", "-p", "x", "--top-k", "5", "--top-p", "0.5", "--n-att", "4", "--out", dir},
           {down, "generate", "--prompt", "x", "--top_k", "5", "--kv_cache_dtype", "fp8", "--out", dir},
           {down, "generate", "--prompt", "x", "--request-id", "a", "--n-recent", "8", "--n_sink", "0", "--out", dir},
           {down, "generate", "-p", "x", "--num-images", "1", "--cfg-weight", "3", "--out", dir},
           {down, "generate", "-p", "x", "--num_images", "1", "--guidance_scale", "3", "--out", dir},
           {down, "generate", "-p", "x", "-n", "1", "--negative-prompt", "blur", "--output", dir + "/one.png"},
           {down, "--timeout", "500ms", "--max-message-bytes", "64MiB", "health"},
           {"--server", "127.0.0.1:1", "--api-key", "k", "--timeout=2s", "info"},
           {down, "load", "-p", "x", "--requests", "1", "--duration", "1m", "--save-result", dir + "/r.json"}}) {
    std::ostringstream out, err;
    EXPECT_EQ(RunClient(args, out, err), kUnreachable) << ::testing::PrintToString(args) << "\n" << err.str();
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunClient({down, "--timeout", "soon", "health"}, out, err), kUsage);
  EXPECT_NE(err.str().find("not a duration"), std::string::npos) << err.str();
  EXPECT_EQ(RunClient({"generate", "-p", "x", "--output", "a.png", "--out", "d"}, out, err), kUsage);
}

TEST(UnitsTest, ParsesAndPrintsDurationsAndBytes) {
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("1.5"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("90s"), 90);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("2m"), 120);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("1h"), 3600);
  for (const char* bad : {"", "ms", "-1", "1 fortnight", "1e3"}) EXPECT_FALSE(ParseDurationSeconds(bad)) << bad;
  EXPECT_EQ(*ParseByteCount("4096"), 4096);
  EXPECT_EQ(*ParseByteCount("64MiB"), int64_t{64} << 20);
  EXPECT_EQ(*ParseByteCount("64Mi"), int64_t{64} << 20);
  EXPECT_EQ(*ParseByteCount("1GB"), 1000000000);
  EXPECT_EQ(*ParseByteCount("2k"), 2000);
  for (const char* bad : {"", "MiB", "1.5", "-4", "12 parsecs"}) EXPECT_FALSE(ParseByteCount(bad)) << bad;
  EXPECT_EQ(HumanSeconds(0.0183697), "18.4 ms");
  EXPECT_EQ(HumanSeconds(0.0000042), "4 us");
  EXPECT_EQ(HumanSeconds(3.2), "3.20 s");
  EXPECT_EQ(HumanSeconds(75), "1 min 15 s");
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(28852224), "27.5 MiB");
  EXPECT_EQ(HumanBytes(int64_t{40} << 30), "40.0 GiB");
}

// Issue 34: the metrics block in human units, not raw floats and byte counts.
TEST(ClientCliTest, MetricsArePrintedInHumanUnits) {
  v1::RequestMetrics m;
  m.set_queue_wait_seconds(0.0183697);
  m.set_total_seconds(3.25);
  m.set_peak_kv_bytes(28852224);
  m.set_tokens_per_second(121.04);
  std::ostringstream out;
  PrintMetrics(m, out);
  EXPECT_NE(out.str().find("queue wait     18.4 ms\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("total          3.25 s\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("peak KV        27.5 MiB\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("121.0 tokens/s"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("28852224"), std::string::npos) << out.str();
}

// Issue 34: an error was printed twice (the message, then the field
// violation repeating it); each fact is printed once.
TEST(ClientCliTest, EachErrorIsPrintedOnce) {
  const std::string message = "policy.sparsity: must be in [0, 1), got 2";
  google::rpc::Status rich;
  rich.set_code(grpc::INVALID_ARGUMENT);
  rich.set_message(message);
  google::rpc::ErrorInfo info;
  info.set_reason("INVALID_FIELD");
  info.set_domain("argen.v1");
  rich.add_details()->PackFrom(info);
  google::rpc::BadRequest bad;
  auto* violation = bad.add_field_violations();
  violation->set_field("policy.sparsity");
  violation->set_description("must be in [0, 1), got 2");
  rich.add_details()->PackFrom(bad);
  std::ostringstream err;
  EXPECT_EQ(
      ReportRpcError("generate", "s:1", grpc::Status(grpc::INVALID_ARGUMENT, message, rich.SerializeAsString()), err),
      kServerError);
  EXPECT_EQ(err.str(), "argen_client: generate: INVALID_ARGUMENT: " + message + "\n");
}

// Issue 34: --output FILE names the image itself (several: <stem>_<i><ext>).
TEST(ImageWriterTest, OutputFileNamesTheImageItself) {
  ImageWriter one(ImageWriter::OutputFile{"/tmp/o/cat.png", 1}, false);
  EXPECT_EQ(one.PathFor("ignored-id", 0), std::filesystem::path("/tmp/o/cat.png"));
  ImageWriter two(ImageWriter::OutputFile{"/tmp/o/cat.png", 2}, false);
  EXPECT_EQ(two.PathFor("ignored-id", 1), std::filesystem::path("/tmp/o/cat_1.png"));
  ImageWriter here(ImageWriter::OutputFile{"cat.png", 1}, false);
  EXPECT_EQ(here.PathFor("x", 0), std::filesystem::path("cat.png"));
  EXPECT_TRUE(here.CheckWritable().ok());
}

TEST(ProgressBarTest, RendersPercentRateElapsedAndEta) {
  EXPECT_EQ(ProgressBar::Render(50, 200, 10, "1/4 images", 8),
            "[##......]  25%     5.0 tok/s  00:10 elapsed  ETA 00:30  1/4 images");
  EXPECT_EQ(ProgressBar::Render(200, 200, 3700, "", 4), "[####] 100%     0.1 tok/s  1:01:40 elapsed  ETA 00:00");
  EXPECT_EQ(ProgressBar::Render(0, 100, 0, "", 4), "[....]   0%     0.0 tok/s  00:00 elapsed  ETA --:--");
  std::ostringstream plain;
  {
    ProgressBar bar(plain, /*terminal=*/false, 100);
    for (int i = 0; i <= 100; ++i) bar.Update(i, "");
  }
  int lines = 0;
  for (char c : plain.str()) lines += c == '\n';
  EXPECT_EQ(lines, 11) << plain.str();  // 0%, 10%, ..., 100%
  EXPECT_EQ(plain.str().find('\r'), std::string::npos);
  // load counts finished requests: its rate is requests/s, not tokens/s.
  EXPECT_EQ(ProgressBar::Render(3, 12, 2, "", 4, "req/s"), "[#...]  25%     1.5 req/s  00:02 elapsed  ETA 00:06");
}

// Issue 34: on a terminal a line printed meanwhile (an image written) goes
// above the bar instead of joining it, a new label redraws it at the same
// count, and Finish draws the last state and ends the line.
TEST(ProgressBarTest, LinesGoAboveTheBarAndFinishEndsItWithTheLastLabel) {
  std::ostringstream err, out;
  {
    ProgressBar bar(err, /*terminal=*/true, 100);
    bar.Update(100, "0/2 images");
    bar.Print(out, "wrote a_0.png");
    EXPECT_EQ(out.str(), "wrote a_0.png\n");
    // The bar's line was cleared before the line and drawn again after it.
    const std::string before = err.str();
    EXPECT_NE(before.find("0/2 images\x1b[K\r\x1b[K\r["), std::string::npos) << ::testing::PrintToString(before);
    EXPECT_EQ(before.substr(before.size() - 13), "0/2 images\x1b[K") << ::testing::PrintToString(before);
    bar.Relabel("2/2 images");
    bar.Finish();
  }
  const std::string text = err.str();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << ::testing::PrintToString(text);
  const size_t last = text.rfind('\r');
  ASSERT_NE(last, std::string::npos);
  EXPECT_NE(text.find("100%", last), std::string::npos) << ::testing::PrintToString(text);
  EXPECT_NE(text.find("2/2 images", last), std::string::npos) << ::testing::PrintToString(text);
}

TEST(PromptsFileTest, PlainLinesAndJsonlWithOverrides) {
  v1::GenerateRequest base;
  base.set_num_images(2);
  base.set_seed(1);
  absl::StatusOr<PromptsFile> f = ParsePrompts(
      "# header\nfirst prompt\n\n{\"prompt\": \"second\", \"seed\": 7, \"policy\": \"diagonal:0.9\", "
      "\"count\": 3, \"cfg\": 2.5, \"tag\": \"t\"}\n",
      "p.txt", base);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->lines.size(), 2u);
  EXPECT_EQ(f->lines[0].line, 2);
  EXPECT_EQ(f->lines[0].request.prompt(), "first prompt");
  EXPECT_EQ(f->lines[0].request.num_images(), 2);
  EXPECT_EQ(f->lines[1].line, 4);
  EXPECT_EQ(f->lines[1].request.seed(), 7u);
  EXPECT_EQ(f->lines[1].request.num_images(), 3);
  EXPECT_EQ(f->lines[1].request.policy().name(), "diagonal");
  EXPECT_DOUBLE_EQ(f->lines[1].request.policy().sparsity(), 0.9);
  EXPECT_FLOAT_EQ(f->lines[1].request.cfg_weight(), 2.5f);
  EXPECT_EQ(f->ignored_fields, std::set<std::string>{"tag"});
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"{\"seed\": 1}", "p.txt:1: no \"prompt\""},
           {"ok\n{\"prompt\": \"x\", \"count\": \"two\"}", "p.txt:2: field \"count\""},
           {"{not json", "p.txt:1: not a JSON object"},
           {"# only comments\n", "no prompts"}}) {
    absl::StatusOr<PromptsFile> bad = ParsePrompts(text, "p.txt", base);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(want), std::string::npos) << bad.status();
  }
}

// --size WxH and a prompts file's "size" set GenerateRequest width and height.
TEST(SizeSpecTest, WxHOrAutoElseAClearError) {
  EXPECT_EQ(*ParseSizeSpec("512x768"), (std::pair<int32_t, int32_t>{512, 768}));
  EXPECT_EQ(*ParseSizeSpec(""), (std::pair<int32_t, int32_t>{0, 0}));
  EXPECT_EQ(*ParseSizeSpec("auto"), (std::pair<int32_t, int32_t>{0, 0}));
  for (const char* bad : {"512", "512x", "x512", "0x512", "-1x2", "512x768x2", "axb"}) {
    absl::StatusOr<std::pair<int32_t, int32_t>> s = ParseSizeSpec(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("WxH"), std::string::npos) << s.status();
  }
  RequestFlags flags;
  flags.prompt = "x";
  flags.size = "128x64";
  absl::StatusOr<v1::GenerateRequest> r = RequestFromFlags(flags);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->width(), 128);
  EXPECT_EQ(r->height(), 64);
  absl::StatusOr<PromptsFile> f = ParsePrompts("{\"prompt\": \"a\", \"size\": \"64x128\"}\nb\n", "p.txt", *r);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->lines[0].request.width(), 64);
  EXPECT_EQ(f->lines[0].request.height(), 128);
  EXPECT_EQ(f->lines[1].request.width(), 128);  // the flags' size
  EXPECT_FALSE(ParsePrompts("{\"prompt\": \"a\", \"size\": 64}", "p.txt", *r).ok());
}

// A health service that records the authorization metadata it receives.
class RecordingHealth final : public grpc::health::v1::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest*,
                     grpc::health::v1::HealthCheckResponse* response) override {
    auto it = context->client_metadata().find("authorization");
    authorization = it == context->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
    response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
  std::string authorization;
};

TEST(ClientCliTest, ApiKeyIsSentAsBearerToken) {
  RecordingHealth health;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&health);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  const std::string address = "--server=127.0.0.1:" + std::to_string(port);
  std::ostringstream out, err;
  ASSERT_EQ(RunClient({address, "--api_key=s3cret", "health"}, out, err), kOk) << err.str();
  EXPECT_EQ(health.authorization, "Bearer s3cret");
  setenv("ARGEN_API_KEY", "from-env", 1);
  ASSERT_EQ(RunClient({address, "health"}, out, err), kOk) << err.str();
  unsetenv("ARGEN_API_KEY");
  EXPECT_EQ(health.authorization, "Bearer from-env");
  ASSERT_EQ(RunClient({address, "health"}, out, err), kOk) << err.str();
  EXPECT_EQ(health.authorization, "");  // none without a key
  server->Shutdown();
}

}  // namespace
}  // namespace argen::client
