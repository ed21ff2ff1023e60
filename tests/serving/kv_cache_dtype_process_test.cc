// kv_cache_dtype end to end: the argen_server binary on the shipped model
// (models/argen-scenes-v1, CPU backend: KV rounded through e4m3) serves an
// fp8 request sent by argen_client generate; Accepted echoes "fp8", so do the
// PNG's metadata and the JSON request log; info lists the values; bad values
// are refused over gRPC (INVALID_ARGUMENT) and HTTP (400), naming the field.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "argen/v1/argen.grpc.pb.h"
#include "client/commands.h"
#include "client/generate_call.h"
#include "engine/image/png_text.h"
#include "nlohmann/json.hpp"
#include "tests/reliability/process_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

namespace fs = std::filesystem;
using reliability_test::ReadFile;

class KvCacheDtypeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("kv_dtype_process_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (server_.pid > 0) {
      kill(server_.pid, SIGTERM);
      reliability_test::WaitExit(server_.pid, 60);
    }
    fs::remove_all(dir_);
  }
  fs::path dir_;
  reliability_test::ServerProcess server_;
};

TEST_F(KvCacheDtypeProcessTest, Fp8GenerationOnTheShippedModel) {
  const std::string log = (dir_ / "server.log").string();
  server_ = reliability_test::SpawnProcess(
      reliability_test::TinyServerArgs({"--model_dir", SourceDir() + "/models/argen-scenes-v1", "--threads=2",
                                        "--log_format=json", "--http_address=127.0.0.1", "--http_port=0"}),
      log);
  ASSERT_GT(server_.pid, 0);
  ASSERT_TRUE(reliability_test::WaitServing(server_, 120)) << ReadFile(log);
  std::smatch m;
  const std::string started = ReadFile(log);
  ASSERT_TRUE(std::regex_search(started, m, std::regex("HTTP API on 127\\.0\\.0\\.1:([0-9]+)"))) << started;
  const int http_port = std::stoi(m[1]);
  const std::string address = "127.0.0.1:" + std::to_string(server_.port);
  const std::string server_flag = "--server=" + address;

  // info: the accepted values and the default (configs/argen.yaml: auto).
  {
    std::ostringstream out, err;
    ASSERT_EQ(client::RunClient({server_flag, "info"}, out, err), client::kOk) << err.str();
    EXPECT_NE(out.str().find("KV dtypes      auto fp8 (default auto;"), std::string::npos) << out.str();
  }
  // A bad value over gRPC: INVALID_ARGUMENT naming the field, before anything runs.
  {
    auto stub = v1::ArGen::NewStub(client::MakeChannel(address, int64_t{64} << 20));
    v1::GenerateRequest bad;
    bad.set_prompt("a red circle");
    bad.mutable_policy()->set_kv_cache_dtype("fp16");
    const client::GenerateResult r = client::CallGenerate(*stub, bad, 30.0);
    EXPECT_EQ(r.status.error_code(), grpc::INVALID_ARGUMENT) << r.status.error_message();
    EXPECT_EQ(r.status.error_message().rfind("policy.kv_cache_dtype: ", 0), 0u) << r.status.error_message();
  }
  // And over HTTP: a 400 whose param is the JSON field.
  {
    const std::string body = R"({"prompt": "a red circle", "policy": {"name": "dense", "kv_cache_dtype": "int4"}})";
    const std::string response =
        HttpExchange(http_port,
                     "POST /v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Connection: close\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_NE(response.find("HTTP/1.1 400"), std::string::npos) << response;
    EXPECT_NE(response.find("\"param\":\"policy.kv_cache_dtype\""), std::string::npos) << response;
  }
  // The fp8 generation: succeeds, and every echo says fp8.
  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({server_flag, "--timeout=240", "generate", "--prompt", "a red circle above a blue square",
                               "--seed=3", "--kv-cache-dtype", "fp8", "--request_id", "kv-fp8", "--json", "--quiet",
                               "--out", (dir_ / "out").string()},
                              out, err),
            client::kOk)
      << err.str() << ReadFile(log);
  const nlohmann::json result = nlohmann::json::parse(out.str());
  EXPECT_EQ(result.at("status"), "OK");
  EXPECT_EQ(result.at("policy").at("kv_cache_dtype"), "fp8") << out.str();
  EXPECT_EQ(result.at("policy").at("name"), "dense") << out.str();
  ASSERT_EQ(result.at("images").size(), 1u) << out.str();
  std::ifstream png(result.at("images")[0].at("path").get<std::string>(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(png)), {});
  absl::StatusOr<image::TextEntries> text = image::ReadPngText(bytes);
  ASSERT_TRUE(text.ok()) << text.status();
  const std::map<std::string, std::string> meta(text->begin(), text->end());
  EXPECT_NE(meta.at("policy").find(" kv_cache_dtype=fp8"), std::string::npos) << meta.at("policy");
  // The request's log line carries the resolved value.
  bool logged = false;
  std::istringstream lines(ReadFile(log));
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"request_id\":\"kv-fp8\"") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    EXPECT_EQ(j.at("params").at("kv_cache_dtype"), "fp8") << line;
    logged = true;
  }
  EXPECT_TRUE(logged) << ReadFile(log);
}

}  // namespace
}  // namespace argen::serving_test
