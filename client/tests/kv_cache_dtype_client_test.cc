// argen_client's --kv-cache-dtype: flag and prompts-file parsing, and what
// generate, load and info send and show, against a recording ArGen service.
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "client/commands.h"
#include "client/prompts_file.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "nlohmann/json.hpp"

namespace argen::client {
namespace {

TEST(KvCacheDtypeFlagTest, ValuesAreCheckedAndSentAsGiven) {
  EXPECT_EQ(*ParseKvCacheDtype("fp8"), "fp8");
  EXPECT_EQ(*ParseKvCacheDtype("FP8"), "fp8");
  EXPECT_EQ(*ParseKvCacheDtype("fp8_e4m3"), "fp8_e4m3");
  EXPECT_EQ(*ParseKvCacheDtype("auto"), "auto");
  for (const char* bad : {"", "fp16", "int8", "fp8x"}) {
    absl::StatusOr<std::string> d = ParseKvCacheDtype(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("kv_cache_dtype"), std::string::npos) << d.status();
  }
  RequestFlags flags;
  flags.prompt = "x";
  flags.policy = "diagonal:0.9";
  flags.kv_cache_dtype = "fp8";
  absl::StatusOr<v1::GenerateRequest> r = RequestFromFlags(flags);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->policy().name(), "diagonal");
  EXPECT_EQ(r->policy().kv_cache_dtype(), "fp8");
  flags.kv_cache_dtype.clear();
  r = RequestFromFlags(flags);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->policy().has_kv_cache_dtype());  // the server's default
  flags.kv_cache_dtype = "bf16";
  EXPECT_FALSE(RequestFromFlags(flags).ok());
}

TEST(KvCacheDtypeFlagTest, BadFlagValueIsAUsageError) {
  for (const char* command : {"generate", "load"}) {
    std::ostringstream out, err;
    EXPECT_EQ(RunClient({"--server=127.0.0.1:1", command, "--prompt=x", "--kv-cache-dtype", "fp16"}, out, err), kUsage)
        << command;
    EXPECT_NE(err.str().find("kv-cache-dtype"), std::string::npos) << err.str();
  }
}

TEST(KvCacheDtypeFlagTest, PromptsFileLinesSetOrInheritIt) {
  v1::GenerateRequest base;
  base.mutable_policy()->set_kv_cache_dtype("fp8");
  absl::StatusOr<PromptsFile> f = ParsePrompts(
      "plain\n"
      "{\"prompt\": \"own\", \"kv_cache_dtype\": \"auto\"}\n"
      "{\"prompt\": \"renamed\", \"policy\": \"diagonal:0.9\"}\n"
      "{\"prompt\": \"both\", \"policy\": \"dense\", \"kv_cache_dtype\": \"auto\"}\n",
      "p.jsonl", base);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->lines.size(), 4u);
  EXPECT_EQ(f->lines[0].request.policy().kv_cache_dtype(), "fp8");  // the flag's
  EXPECT_EQ(f->lines[1].request.policy().kv_cache_dtype(), "auto");
  EXPECT_EQ(f->lines[2].request.policy().name(), "diagonal");
  EXPECT_EQ(f->lines[2].request.policy().kv_cache_dtype(), "fp8");   // "policy" keeps it
  EXPECT_EQ(f->lines[3].request.policy().kv_cache_dtype(), "auto");  // the line's own wins
  EXPECT_TRUE(f->ignored_fields.empty());
  for (const char* bad :
       {"{\"prompt\": \"x\", \"kv_cache_dtype\": \"fp16\"}", "{\"prompt\": \"x\", \"kv_cache_dtype\": 8}"}) {
    absl::StatusOr<PromptsFile> b = ParsePrompts(bad, "p.jsonl", base);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("p.jsonl:1"), std::string::npos) << b.status();
    EXPECT_NE(b.status().message().find("kv_cache_dtype"), std::string::npos) << b.status();
  }
}

// Records every request; answers Accepted echoing the dtype as a server
// resolves it ("fp8_e4m3" -> "fp8", unset -> the default "fp8"), then ends.
class RecordingArGen final : public v1::ArGen::Service {
 public:
  grpc::Status Generate(grpc::ServerContext*, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateEvent>* writer) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      requests.push_back(*request);
    }
    v1::GenerateEvent e;
    v1::Accepted* a = e.mutable_accepted();
    a->set_request_id("r1");
    a->mutable_policy()->set_name(request->policy().name().empty() ? "dense" : request->policy().name());
    const std::string& d = request->policy().kv_cache_dtype();
    a->mutable_policy()->set_kv_cache_dtype(d == "auto" ? "auto" : "fp8");
    writer->Write(e);
    return grpc::Status::OK;
  }
  grpc::Status GetModelInfo(grpc::ServerContext*, const v1::GetModelInfoRequest*, v1::ModelInfo* info) override {
    info->set_model("m");
    info->add_kv_cache_dtypes("auto");
    info->add_kv_cache_dtypes("fp8");
    info->mutable_default_policy()->set_name("dense");
    info->mutable_default_policy()->set_kv_cache_dtype("fp8");
    info->set_weight_dtype("fp8");
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::vector<v1::GenerateRequest> requests;
};

struct FakeServer {
  RecordingArGen service;
  std::unique_ptr<grpc::Server> server;
  std::string flag;  // --server=...
};

void Start(FakeServer& f) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&f.service);
  f.server = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  f.flag = "--server=127.0.0.1:" + std::to_string(port);
}

TEST(KvCacheDtypeFlagTest, GenerateSendsItAndShowsTheResolvedValue) {
  FakeServer f;
  Start(f);
  std::ostringstream out, err;
  ASSERT_EQ(RunClient({f.flag, "generate", "--prompt=x", "--kv-cache-dtype=fp8_e4m3", "--json", "--out",
                       ::testing::TempDir() + "/kv_dtype_generate"},
                      out, err),
            kOk)
      << err.str();
  ASSERT_EQ(f.service.requests.size(), 1u);
  EXPECT_EQ(f.service.requests[0].policy().kv_cache_dtype(), "fp8_e4m3");
  const nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j.at("policy").at("kv_cache_dtype"), "fp8") << out.str();
  // The text form's accepted line names it too.
  std::ostringstream text_out, text_err;
  ASSERT_EQ(RunClient({f.flag, "generate", "--prompt=x", "--kv_cache_dtype=auto", "--out",
                       ::testing::TempDir() + "/kv_dtype_generate"},
                      text_out, text_err),
            kOk)
      << text_err.str();
  EXPECT_NE(text_err.str().find(" bytes auto, queue position"), std::string::npos) << text_err.str();
  EXPECT_EQ(f.service.requests[1].policy().kv_cache_dtype(), "auto");
}

TEST(KvCacheDtypeFlagTest, LoadSendsItWithEveryPolicyOfTheMix) {
  FakeServer f;
  Start(f);
  std::ostringstream out, err;
  RunClient(
      {f.flag, "load", "--requests=4", "--concurrency=2", "--policies=dense,diagonal:0.9", "--kv-cache-dtype=fp8"}, out,
      err);
  ASSERT_EQ(f.service.requests.size(), 4u) << err.str();
  std::set<std::string> names;
  for (const v1::GenerateRequest& r : f.service.requests) {
    EXPECT_EQ(r.policy().kv_cache_dtype(), "fp8");
    names.insert(r.policy().name());
  }
  EXPECT_EQ(names, (std::set<std::string>{"dense", "diagonal"}));
}

// load --prompts-file: the requests cycle through the file's captions (a
// line's fields apply, the seeds still count up); a missing file is a local
// error, an empty one a usage error.
TEST(KvCacheDtypeFlagTest, LoadCyclesThroughAPromptsFile) {
  const std::string path = ::testing::TempDir() + "/load_prompts.txt";
  {
    std::ofstream f(path);
    f << "a red fox\n# a comment\n{\"prompt\": \"two owls\", \"count\": 2, \"policy\": \"dense\"}\nblue sky\n";
  }
  FakeServer f;
  Start(f);
  std::ostringstream out, err;
  ASSERT_EQ(
      RunClient({f.flag, "load", "--requests=6", "--concurrency=1", "--prompts-file", path, "--seed=10"}, out, err),
      kOk)
      << err.str();
  ASSERT_EQ(f.service.requests.size(), 6u) << err.str();
  std::multiset<std::string> prompts;
  std::set<uint64_t> seeds;
  for (const v1::GenerateRequest& r : f.service.requests) {
    prompts.insert(r.prompt());
    seeds.insert(r.seed());
    if (r.prompt() == "two owls") {
      EXPECT_EQ(r.num_images(), 2);
      EXPECT_EQ(r.policy().name(), "dense");
    } else {
      EXPECT_EQ(r.num_images(), 1);
    }
  }
  EXPECT_EQ(prompts,
            (std::multiset<std::string>{"a red fox", "a red fox", "two owls", "two owls", "blue sky", "blue sky"}));
  EXPECT_EQ(seeds, (std::set<uint64_t>{10, 11, 12, 13, 14, 15}));
  std::ostringstream out2, err2;
  EXPECT_EQ(RunClient({f.flag, "load", "--prompts-file", path + ".missing"}, out2, err2), kLocalError) << err2.str();
  EXPECT_NE(err2.str().find("cannot be read"), std::string::npos) << err2.str();
  const std::string empty = ::testing::TempDir() + "/load_prompts_empty.txt";
  {
    std::ofstream e(empty);
    e << "# nothing\n";
  }
  std::ostringstream out3, err3;
  EXPECT_EQ(RunClient({f.flag, "load", "--prompts-file", empty}, out3, err3), kUsage) << err3.str();
  EXPECT_NE(err3.str().find(": no prompts"), std::string::npos) << err3.str();
}

TEST(KvCacheDtypeFlagTest, InfoListsTheAcceptedValuesAndTheDefault) {
  FakeServer f;
  Start(f);
  std::ostringstream out, err;
  ASSERT_EQ(RunClient({f.flag, "info"}, out, err), kOk) << err.str();
  EXPECT_NE(out.str().find("KV dtypes      auto fp8 (default fp8; --kv-cache-dtype)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("weights        fp8 (the server's weight_dtype)"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace argen::client
