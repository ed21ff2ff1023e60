// What an operator and a daily user rely on (issue 15), against the
// deterministic FakeEngine over loopback: gauges right after every way a
// request ends, unique request ids, reflection that describes the health
// service, google.rpc.Status details, one log line per request, PNG metadata,
// and argen_client writing images as they arrive, without overwriting and
// without leaving empty folders or escaping --out.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "client/commands.h"
#include "client/generate_call.h"
#include "engine/image/png.h"
#include "engine/image/png_text.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpc/reflection/v1/reflection.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "nlohmann/json.hpp"
#include "scheduler/tests/fake_engine.h"
#include "server/request_log.h"
#include "spdlog/sinks/ostream_sink.h"
#include "tests/serving/http_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

namespace fs = std::filesystem;
using scheduler::testing::FakeEngine;
using scheduler::testing::FakeEngineOptions;

absl::StatusOr<TestServer> StartFake(server::ServerConfig config, FakeEngineOptions options = {},
                                     scheduler::ImageEncoder encoder = nullptr) {
  return StartServer(config, std::make_unique<FakeEngine>(options), std::move(encoder));
}

v1::GenerateRequest Request(const std::string& prompt, int images = 1) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.set_num_images(images);
  r.mutable_policy()->set_name("dense");
  return r;
}

// The value of an unlabelled sample in a /metrics scrape; -1 when absent.
double Sample(const std::string& scrape, const std::string& name) {
  std::istringstream lines(scrape);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

// Every gauge that describes running work reads 0 in a fresh scrape.
void ExpectIdleGauges(const TestServer& t, const std::string& after) {
  const std::string scrape = HttpGet(t.server->metrics_port(), "/metrics");
  for (const char* gauge :
       {"argen_running_batch_rows", "argen_running_requests", "argen_queue_depth", "argen_kv_cache_used_bytes",
        "argen_kv_cache_reserved_bytes", "argen_kv_cache_usage_ratio", "argen_kv_cache_shared_prompt_bytes"}) {
    EXPECT_EQ(Sample(scrape, gauge), 0) << gauge << " after " << after << ":\n" << scrape;
  }
}

server::ServerConfig ScrapedConfig() {
  server::ServerConfig c = LoopbackConfig("fake");
  c.metrics_port = 0;
  return c;
}

FakeEngineOptions SlowEngine() {
  FakeEngineOptions o;
  o.token_grid = 16;  // 256 steps of 2 ms: far longer than the tests wait
  o.step_time = absl::Milliseconds(2);
  return o;
}

// Issue 15, defect 1: the rows gauge (an HPA metric) stayed at the cancelled
// request's rows until another step ran; every gauge must be right at once.
TEST(OperationsTest, GaugesReadZeroRightAfterCancel) {
  ASSERT_STARTED(t, StartFake(ScrapedConfig(), SlowEngine()));
  grpc::ClientContext context;
  v1::GenerateRequest r = Request("cancel me", 4);
  r.set_progress_interval_ms(1);
  auto reader = t.stub->Generate(&context, r);
  v1::GenerateEvent e;
  while (reader->Read(&e) && !e.has_progress()) {
  }
  const std::string busy = HttpGet(t.server->metrics_port(), "/metrics");
  EXPECT_EQ(Sample(busy, "argen_running_batch_rows"), 8) << busy;
  EXPECT_EQ(Sample(busy, "argen_running_requests"), 1) << busy;
  EXPECT_GT(Sample(busy, "argen_kv_cache_usage_ratio"), 0) << busy;
  context.TryCancel();
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::CANCELLED);
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().active_requests == 0; }));
  ExpectIdleGauges(t, "cancel");
}

TEST(OperationsTest, GaugesReadZeroRightAfterDeadline) {
  ASSERT_STARTED(t, StartFake(ScrapedConfig(), SlowEngine()));
  client::GenerateResult r = client::CallGenerate(*t.stub, Request("slow", 2), 0.1);
  EXPECT_EQ(r.status.error_code(), grpc::DEADLINE_EXCEEDED);
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().active_requests == 0; }));
  ExpectIdleGauges(t, "deadline");
}

TEST(OperationsTest, GaugesReadZeroRightAfterEngineFailure) {
  FakeEngineOptions o = SlowEngine();
  o.fail_step = 5;
  ASSERT_STARTED(t, StartFake(ScrapedConfig(), o));
  client::GenerateResult r = client::CallGenerate(*t.stub, Request("doomed", 3), 30);
  EXPECT_EQ(r.status.error_code(), grpc::INTERNAL);
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().active_requests == 0; }));
  ExpectIdleGauges(t, "engine failure");
}

TEST(OperationsTest, GaugesReadZeroRightAfterDrainTimeout) {
  server::ServerConfig c = ScrapedConfig();
  c.drain_timeout_s = 0.05;
  ASSERT_STARTED(t, StartFake(c, SlowEngine()));
  client::GenerateResult result;
  std::thread call([&] { result = client::CallGenerate(*t.stub, Request("long", 2), 30); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().running_rows > 0; }));
  EXPECT_FALSE(t.server->Shutdown());
  call.join();
  EXPECT_EQ(result.status.error_code(), grpc::UNAVAILABLE);
  ExpectIdleGauges(t, "drain");
}

// Issue 15, defect 2: ids were r0, r1, ... again in every server process.
TEST(OperationsTest, RequestIdsAreUniqueUlidsAcrossServers) {
  const std::regex ulid("[0-9A-HJKMNP-TV-Z]{26}");
  std::set<std::string> ids;
  for (int server = 0; server < 2; ++server) {
    ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
    for (int i = 0; i < 3; ++i) {
      client::GenerateResult r = client::CallGenerate(*t.stub, Request("id"), 30);
      ASSERT_TRUE(r.status.ok()) << r.status.error_message();
      EXPECT_TRUE(std::regex_match(r.accepted.request_id(), ulid)) << r.accepted.request_id();
      ids.insert(r.accepted.request_id());
    }
  }
  EXPECT_EQ(ids.size(), 6u);
  // A client-chosen id is kept as given.
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  v1::GenerateRequest mine = Request("mine");
  mine.set_request_id("my-id-7");
  EXPECT_EQ(client::CallGenerate(*t.stub, mine, 30).accepted.request_id(), "my-id-7");
}

// Issue 15, defect 3: reflection listed grpc.health.v1.Health but could not
// describe it, so stock grpcurl could not call Check without -proto. This
// does what grpcurl does: resolve the symbol through reflection, build the
// request type from the returned descriptors, call, decode the answer.
TEST(OperationsTest, ReflectionDescribesAndCallsHealthOnV1AndV1alpha) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  for (const char* method : {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                             "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    SCOPED_TRACE(method);
    grpc::reflection::v1::ServerReflectionRequest list;
    list.set_list_services("*");
    std::set<std::string> services;
    const grpc::reflection::v1::ServerReflectionResponse listed = Reflect(t.address, method, list);
    for (const auto& s : listed.list_services_response().service()) {
      services.insert(s.name());
    }
    for (const char* want : {"argen.v1.ArGen", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                             "grpc.reflection.v1alpha.ServerReflection"}) {
      EXPECT_EQ(services.count(want), 1u) << want;
    }

    grpc::reflection::v1::ServerReflectionRequest describe;
    describe.set_file_containing_symbol("grpc.health.v1.Health");
    grpc::reflection::v1::ServerReflectionResponse answer = Reflect(t.address, method, describe);
    ASSERT_FALSE(answer.has_error_response()) << answer.error_response().error_message();
    ASSERT_GT(answer.file_descriptor_response().file_descriptor_proto_size(), 0);
    google::protobuf::DescriptorPool pool;
    for (const std::string& bytes : answer.file_descriptor_response().file_descriptor_proto()) {
      google::protobuf::FileDescriptorProto file;
      ASSERT_TRUE(file.ParseFromString(bytes));
      ASSERT_NE(pool.BuildFile(file), nullptr) << file.name();
    }
    const google::protobuf::ServiceDescriptor* health = pool.FindServiceByName("grpc.health.v1.Health");
    ASSERT_NE(health, nullptr);
    ASSERT_NE(health->FindMethodByName("Check"), nullptr);
    EXPECT_NE(health->FindMethodByName("Watch"), nullptr);

    // Check, with messages built only from the reflected descriptors.
    google::protobuf::DynamicMessageFactory factory(&pool);
    const google::protobuf::MethodDescriptor* check = health->FindMethodByName("Check");
    std::unique_ptr<google::protobuf::Message> req(factory.GetPrototype(check->input_type())->New());
    req->GetReflection()->SetString(req.get(), check->input_type()->FindFieldByName("service"), "argen.v1.ArGen");
    grpc::GenericStub generic(client::MakeChannel(t.address, 1 << 20));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::CompletionQueue cq;
    const std::string request_bytes = req->SerializeAsString();
    grpc::Slice slice(request_bytes);
    grpc::ByteBuffer request(&slice, 1);
    auto rpc = generic.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &cq);
    rpc->StartCall();
    grpc::ByteBuffer reply;
    grpc::Status status;
    rpc->Finish(&reply, &status, reinterpret_cast<void*>(7));
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    ASSERT_TRUE(status.ok()) << status.error_message();
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(reply.Dump(&slices).ok());
    std::string data;
    for (const grpc::Slice& s : slices) data.append(reinterpret_cast<const char*>(s.begin()), s.size());
    std::unique_ptr<google::protobuf::Message> resp(factory.GetPrototype(check->output_type())->New());
    ASSERT_TRUE(resp->ParseFromString(data));
    const auto* field = check->output_type()->FindFieldByName("status");
    EXPECT_EQ(resp->GetReflection()->GetEnum(*resp, field)->name(), "SERVING");
  }
}

google::rpc::Status Details(const grpc::Status& status) {
  google::rpc::Status rich;
  EXPECT_TRUE(rich.ParseFromString(status.error_details())) << "no google.rpc.Status details";
  EXPECT_EQ(rich.code(), static_cast<int>(status.error_code()));
  return rich;
}

std::string Reason(const google::rpc::Status& rich) {
  for (const auto& any : rich.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info)) {
      EXPECT_EQ(info.domain(), "argen");
      return info.reason();
    }
  }
  return "";
}

TEST(OperationsTest, ErrorsCarryGoogleRpcStatusDetails) {
  FakeEngineOptions o = SlowEngine();
  // 1,024 steps of 2 ms an image: the first "busy" request runs long enough for
  // the second to be seen queued behind it on a loaded machine (at 256 steps it
  // could finish first under load, and "shed" was then admitted).
  o.token_grid = 32;
  o.max_batch_rows = 2;  // one image at a time: the engine owns the batch cap, not the config
  server::ServerConfig c = LoopbackConfig("fake");
  c.queue_limit = 1;
  c.max_batch_rows = 2;
  ASSERT_STARTED(t, StartFake(c, o));

  v1::GenerateRequest bad = Request("x");
  bad.mutable_policy()->set_name("diagonal");
  bad.mutable_policy()->set_sparsity(1.5);
  client::GenerateResult r = client::CallGenerate(*t.stub, bad, 30);
  ASSERT_EQ(r.status.error_code(), grpc::INVALID_ARGUMENT);
  google::rpc::Status rich = Details(r.status);
  EXPECT_EQ(Reason(rich), "INVALID_FIELD");
  bool violation = false;
  for (const auto& any : rich.details()) {
    google::rpc::BadRequest br;
    if (!any.UnpackTo(&br)) continue;
    ASSERT_EQ(br.field_violations_size(), 1);
    EXPECT_EQ(br.field_violations(0).field(), "policy.sparsity");
    EXPECT_NE(br.field_violations(0).description().find("[0, 1)"), std::string::npos);
    violation = true;
  }
  EXPECT_TRUE(violation);

  // Queue full: one running, one queued, the third shed with RetryInfo.
  // The second call goes once the first runs: sent together, both could reach
  // the queue (limit 1) before the loop admits the first, and one is shed.
  std::vector<std::thread> calls;
  calls.emplace_back([&] { client::CallGenerate(*t.stub, Request("busy"), 10); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().running_rows > 0; }));
  calls.emplace_back([&] { client::CallGenerate(*t.stub, Request("busy"), 10); });
  ASSERT_TRUE(WaitFor([&] {
    const auto s = t.server->scheduler().snapshot();
    return s.running_rows > 0 && s.queue_depth > 0;
  }));
  r = client::CallGenerate(*t.stub, Request("shed"), 30);
  ASSERT_EQ(r.status.error_code(), grpc::RESOURCE_EXHAUSTED);
  rich = Details(r.status);
  EXPECT_EQ(Reason(rich), "QUEUE_FULL");
  bool retry = false;
  for (const auto& any : rich.details()) {
    google::rpc::RetryInfo ri;
    if (any.UnpackTo(&ri)) retry = ri.retry_delay().seconds() + ri.retry_delay().nanos() > 0;
  }
  EXPECT_TRUE(retry);
  for (auto& th : calls) th.join();

  // Draining (a request still running keeps the server up): UNAVAILABLE with
  // reason DRAINING and a retry delay.
  std::thread running([&] { client::CallGenerate(*t.stub, Request("running"), 30); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().running_rows > 0; }));
  std::thread stopper([&] { t.server->Shutdown(); });
  ASSERT_TRUE(WaitFor([&] { return t.server->scheduler().snapshot().draining; }));
  r = client::CallGenerate(*t.stub, Request("late"), 30);
  ASSERT_EQ(r.status.error_code(), grpc::UNAVAILABLE);
  EXPECT_EQ(Reason(Details(r.status)), "DRAINING");
  stopper.join();
  running.join();
}

std::map<std::string, std::string> PngText(const std::string& png) {
  absl::StatusOr<image::TextEntries> entries = image::ReadPngText(png);
  EXPECT_TRUE(entries.ok()) << entries.status();
  std::map<std::string, std::string> m;
  if (entries.ok()) m.insert(entries->begin(), entries->end());
  return m;
}

// Captures the server log in `out` as JSON lines for the test's lifetime.
class CapturedLog {
 public:
  explicit CapturedLog(server::log::Format format) {
    server::log::Configure(format, spdlog::level::info, std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
  }
  ~CapturedLog() { server::log::Configure(server::log::Format::kText, spdlog::level::info); }
  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }

 private:
  std::ostringstream out_;
};

TEST(OperationsTest, OneStructuredLogLinePerRequest) {
  CapturedLog log(server::log::Format::kJson);
  {
    ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
    v1::GenerateRequest ok = Request("fine", 2);
    ok.set_request_id("log-ok");
    ok.mutable_policy()->set_name("diagonal");
    ok.mutable_policy()->set_sparsity(0.5);
    ASSERT_TRUE(client::CallGenerate(*t.stub, ok, 30).status.ok());
    v1::GenerateRequest bad = Request("");
    bad.set_request_id("log-bad");
    EXPECT_EQ(client::CallGenerate(*t.stub, bad, 30).status.error_code(), grpc::INVALID_ARGUMENT);
  }
  std::map<std::string, nlohmann::json> by_id;
  for (const std::string& line : log.Lines()) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    ASSERT_TRUE(j.contains("time") && j.contains("level") && j.contains("event")) << line;
    if (j["event"] == "request") by_id[j["request_id"]] = j;
  }
  ASSERT_EQ(by_id.size(), 2u);
  const nlohmann::json& ok = by_id["log-ok"];
  EXPECT_EQ(ok["status"], "OK");
  EXPECT_EQ(ok["level"], "info");
  EXPECT_EQ(ok["policy"], "diagonal");
  EXPECT_EQ(ok["params"]["sparsity"], 0.5);
  EXPECT_GT(ok["params"]["n_att"].get<int>(), 0);
  EXPECT_EQ(ok["images"], 2);
  EXPECT_GE(ok["queue_wait_s"].get<double>(), 0);
  EXPECT_GT(ok["total_s"].get<double>(), 0);
  EXPECT_NE(ok["peer"].get<std::string>().find("127.0.0.1"), std::string::npos);
  EXPECT_TRUE(std::regex_match(ok["time"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z)")));
  const nlohmann::json& bad = by_id["log-bad"];
  EXPECT_EQ(bad["status"], "INVALID_ARGUMENT");
  EXPECT_NE(bad["error"].get<std::string>().find("prompt"), std::string::npos);
}

// The HTTP API shares the log line and the PNG metadata.
TEST(OperationsTest, HttpRequestsAreLoggedAndTheirPngsTagged) {
  CapturedLog log(server::log::Format::kJson);
  {
    server::ServerConfig c = LoopbackConfig("fake");
    c.http_address = "127.0.0.1";
    c.http_port = 0;
    ASSERT_STARTED(t, StartFake(c));
    auto http = HttpClient(t.server->http_port());
    httplib::Result r = PostImages(*http, {{"prompt", "over http"}, {"n", 1}, {"seed", 3}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const nlohmann::json body = nlohmann::json::parse(r->body);
    std::map<std::string, std::string> text = PngText(Base64Decode(body["data"][0]["b64_json"]));
    EXPECT_EQ(text["prompt"], "over http");
    EXPECT_EQ(text["seed"], "3");
    r = PostImages(*http, {{"prompt", ""}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
  }
  std::vector<nlohmann::json> lines;
  for (const std::string& line : log.Lines()) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j["event"] == "request") lines.push_back(j);
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["transport"], "http");
  EXPECT_EQ(lines[0]["status"], "OK");
  EXPECT_EQ(lines[0]["seed"], 3);
  EXPECT_EQ(lines[0]["request_id"].get<std::string>().size(), 26u);
  EXPECT_NE(lines[0]["peer"].get<std::string>().find("127.0.0.1"), std::string::npos);
  EXPECT_EQ(lines[1]["status"], "INVALID_ARGUMENT");
}

TEST(OperationsTest, TextLogLineNamesTheRequest) {
  CapturedLog log(server::log::Format::kText);
  {
    ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
    v1::GenerateRequest ok = Request("fine");
    ok.set_request_id("text-log");
    ASSERT_TRUE(client::CallGenerate(*t.stub, ok, 30).status.ok());
  }
  int found = 0;
  for (const std::string& line : log.Lines()) {
    if (line.find("request_id=text-log") == std::string::npos) continue;
    ++found;
    EXPECT_TRUE(std::regex_search(line, std::regex(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info request: )")))
        << line;
    EXPECT_NE(line.find("status=OK"), std::string::npos) << line;
    EXPECT_NE(line.find("policy=dense"), std::string::npos) << line;
  }
  EXPECT_EQ(found, 1);
}

TEST(OperationsTest, EveryImageCarriesItsGenerationMetadata) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  v1::GenerateRequest r = Request("a red cube, naïve", 2);
  r.set_seed(42);
  r.set_cfg_weight(3.5f);
  r.mutable_policy()->set_name("diagonal");
  r.mutable_policy()->set_sparsity(0.5);
  client::GenerateResult result = client::CallGenerate(*t.stub, r, 30);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.images.size(), 2u);
  for (const v1::Image& img : result.images) {
    std::map<std::string, std::string> text = PngText(img.png());
    EXPECT_EQ(text["prompt"], "a red cube, naïve");  // UTF-8 through iTXt
    EXPECT_EQ(text["seed"], "42");
    EXPECT_EQ(text["image_index"], std::to_string(img.index()));
    EXPECT_EQ(text["policy"].rfind("diagonal sparsity=0.5 n_att=", 0), 0u) << text["policy"];
    EXPECT_EQ(text["guidance"], "3.5");
    EXPECT_EQ(text["model"], "fake");
    EXPECT_FALSE(text["argen_version"].empty());
    EXPECT_NE(text["sampling"].find("temperature="), std::string::npos);
    // Still a valid PNG.
    EXPECT_TRUE(
        image::DecodePng(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(img.png().data()), img.png().size()))
            .ok());
  }
}

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  return dir;
}

// An encoder whose second image fails: the stream sends image 0, then INTERNAL.
scheduler::ImageEncoder FailingSecondImage() {
  auto calls = std::make_shared<std::atomic<int>>(0);
  return [calls](const engine::RgbImage& rgb) -> absl::StatusOr<std::string> {
    if (calls->fetch_add(1) == 1) return absl::InternalError("injected encoder failure");
    return image::EncodePng(rgb.rgb, rgb.width, rgb.height);
  };
}

// Issue 15, defect 6: images were written only after the stream ended, so a
// late error lost the ones already received.
TEST(OperationsTest, ClientWritesEachImageAsItArrives) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake"), {}, FailingSecondImage()));
  const fs::path dir = FreshDir("argen_ops_partial");
  std::ostringstream out, err;
  EXPECT_EQ(client::RunClient({"--server=" + t.address, "generate", "--prompt", "two", "--count", "2", "--request_id",
                               "partial", "--out", dir.string(), "--quiet"},
                              out, err),
            client::kServerError)
      << err.str();
  EXPECT_NE(err.str().find("INTERNAL"), std::string::npos) << err.str();
  EXPECT_TRUE(fs::exists(dir / "partial_0.png")) << out.str() << err.str();
  EXPECT_FALSE(fs::exists(dir / "partial_1.png"));
  EXPECT_EQ(PngText(Slurp(dir / "partial_0.png"))["prompt"], "two");
  // No temporary files left behind.
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string()[0] == '.', false) << entry.path();
  }
}

// Defect 6 too: a failed run left an empty output folder.
TEST(OperationsTest, FailedRunLeavesNoOutputFolder) {
  const fs::path dir = FreshDir("argen_ops_nothing") / "nested";
  std::ostringstream out, err;
  EXPECT_EQ(client::RunClient(
                {"--server=127.0.0.1:1", "--timeout=5", "generate", "--prompt", "x", "--out", dir.string()}, out, err),
            client::kUnreachable);
  EXPECT_FALSE(fs::exists(dir)) << dir;
  EXPECT_FALSE(fs::exists(dir.parent_path())) << dir.parent_path();
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  EXPECT_EQ(client::RunClient({"--server=" + t.address, "generate", "--prompt", "", "--out", dir.string()}, out, err),
            client::kServerError);
  EXPECT_FALSE(fs::exists(dir.parent_path()));
}

// Defect 2: a second run with the same id silently replaced the first's images.
TEST(OperationsTest, ClientNeverOverwritesUnlessAsked) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  const fs::path dir = FreshDir("argen_ops_overwrite");
  const std::string server = "--server=" + t.address;
  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient(
                {server, "generate", "--prompt", "first", "--request_id", "same", "--out", dir.string(), "--quiet"},
                out, err),
            client::kOk)
      << err.str();
  const std::string first = Slurp(dir / "same_0.png");
  err.str("");
  EXPECT_EQ(client::RunClient(
                {server, "generate", "--prompt", "second", "--request_id", "same", "--out", dir.string(), "--quiet"},
                out, err),
            client::kLocalError);
  EXPECT_NE(err.str().find("same_0.png exists"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("--overwrite"), std::string::npos) << err.str();
  EXPECT_EQ(Slurp(dir / "same_0.png"), first);
  EXPECT_EQ(client::RunClient({server, "generate", "--prompt", "second", "--request_id", "same", "--out", dir.string(),
                               "--quiet", "--overwrite"},
                              out, err),
            client::kOk);
  EXPECT_EQ(PngText(Slurp(dir / "same_0.png"))["prompt"], "second");
  // Without --request_id the server's unique ids never collide.
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(client::RunClient({server, "generate", "--prompt", "anon", "--out", dir.string(), "--quiet"}, out, err),
              client::kOk);
  }
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.path().extension() == ".png";
  EXPECT_EQ(files, 3);
}

// Defect 2: --request_id ../escaped wrote outside --out.
TEST(OperationsTest, RequestIdsAreSanitisedInFileNames) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  const fs::path root = FreshDir("argen_ops_escape");
  const fs::path dir = root / "out";
  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({"--server=" + t.address, "generate", "--prompt", "x", "--request_id", "../escaped",
                               "--out", dir.string(), "--quiet"},
                              out, err),
            client::kOk)
      << err.str();
  EXPECT_FALSE(fs::exists(root / "escaped_0.png"));
  EXPECT_TRUE(fs::exists(dir / "___escaped_0.png")) << out.str();
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) {
      EXPECT_EQ(entry.path().parent_path(), dir) << entry.path();
    }
  }
}

TEST(OperationsTest, GenerateJsonAndBatchMode) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  const fs::path dir = FreshDir("argen_ops_json");
  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({"--server=" + t.address, "generate", "--prompt", "json please", "--count", "2", "--seed",
                               "5", "--out", dir.string(), "--json", "--quiet"},
                              out, err),
            client::kOk)
      << err.str();
  nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["status"], "OK");
  EXPECT_EQ(j["seed"], 5);
  EXPECT_EQ(j["prompt"], "json please");
  ASSERT_EQ(j["images"].size(), 2u);
  EXPECT_TRUE(fs::exists(j["images"][0]["path"].get<std::string>()));
  EXPECT_GT(j["metrics"]["tokens_per_second"].get<double>(), 0);

  const fs::path prompts = dir / "prompts.jsonl";
  fs::create_directories(dir);
  {
    std::ofstream f(prompts);
    f << "# a comment\n"
      << "a plain prompt\n"
      << "\n"
      << R"({"prompt": "from json", "count": 2, "seed": 11, "policy": "diagonal:0.5", "tag": "x"})"
      << "\n"
      << R"({"prompt": "", "request_id": "empty-one"})"
      << "\n";
  }
  out.str("");
  err.str("");
  EXPECT_EQ(client::RunClient({"--server=" + t.address, "generate", "--prompts-file", prompts.string(), "--out",
                               (dir / "batch").string(), "--json"},
                              out, err),
            client::kServerError);  // the empty prompt fails; the others are written
  EXPECT_NE(err.str().find("ignoring unknown fields"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("prompts.jsonl:5"), std::string::npos) << err.str();
  j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["ok"], 2);
  EXPECT_EQ(j["failed"], 1);
  ASSERT_EQ(j["requests"].size(), 3u);
  EXPECT_EQ(j["requests"][0]["line"], 2);
  EXPECT_EQ(j["requests"][0]["prompt"], "a plain prompt");
  EXPECT_EQ(j["requests"][1]["seed"], 11);
  EXPECT_EQ(j["requests"][1]["policy"]["name"], "diagonal");
  EXPECT_EQ(j["requests"][1]["images"].size(), 2u);
  EXPECT_EQ(j["requests"][2]["status"], "INVALID_ARGUMENT");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir / "batch")) files += entry.path().extension() == ".png";
  EXPECT_EQ(files, 3);
}

TEST(OperationsTest, InfoJsonIsModelInfo) {
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake")));
  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({"--server=" + t.address, "info", "--json"}, out, err), client::kOk) << err.str();
  nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["model"], "fake");
  EXPECT_EQ(j["image_tokens"], 16);
  std::set<std::string> policies;
  for (const auto& p : j["policies"]) policies.insert(p["name"].get<std::string>());
  EXPECT_GE(policies.size(), 8u);
  EXPECT_EQ(policies.count("dense"), 1u);
  EXPECT_EQ(policies.count("diagonal"), 1u);
}

TEST(OperationsTest, LoadIsAServingBenchmark) {
  FakeEngineOptions o;
  o.step_time = absl::Microseconds(200);
  ASSERT_STARTED(t, StartFake(LoopbackConfig("fake"), o));
  const fs::path dir = FreshDir("argen_ops_load");
  fs::create_directories(dir);
  const std::string result_file = (dir / "result.json").string();
  std::ostringstream out, err;
  // Open loop: Poisson arrivals for at most 1.5 s or 12 requests.
  ASSERT_EQ(client::RunClient(
                {"--server=" + t.address, "load", "--rate", "40", "--requests", "12", "--count", "2", "--duration",
                 "10", "--policies", "dense,diagonal:0.5", "--save-result", result_file, "--json"},
                out, err),
            client::kOk)
      << err.str();
  nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j, nlohmann::json::parse(Slurp(result_file)));
  EXPECT_EQ(j["mode"], "poisson");
  EXPECT_EQ(j["requests"]["ok"], 12);
  EXPECT_EQ(j["images"], 24);
  EXPECT_EQ(j["time_to_first_image_seconds"]["n"], 12);
  EXPECT_EQ(j["image_latency_seconds"]["n"], 24);
  EXPECT_LE(j["time_to_first_image_seconds"]["p50"].get<double>(), j["latency_seconds"]["p50"].get<double>());
  EXPECT_GT(j["throughput"]["tokens_per_second"].get<double>(), 0);
  EXPECT_EQ(j["latency_seconds_by_policy"].size(), 2u);

  // Closed loop for a duration, with failures counted by code name.
  out.str("");
  EXPECT_EQ(client::RunClient({"--server=" + t.address, "load", "--concurrency", "2", "--duration", "0.5", "--policies",
                               "dense,nonsense"},
                              out, err),
            client::kServerError);
  EXPECT_NE(out.str().find("failed by code: INVALID_ARGUMENT x"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("time to first image"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("per-image latency"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace argen::serving_test
