// Issue #16 defect 3: a 16 MiB prompt was tokenized before its length was
// checked (refused after 6.1 s with RSS +441 MiB on the shipped tokenizer).
// It must now be refused by its byte count: fast, and costing the server no
// more than a small multiple of the bytes it sent.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "client/generate_call.h"
#include "tests/reliability/process_util.h"

namespace argen::reliability_test {
namespace {

// A field of /proc/<pid>/status in KiB ("VmHWM", "VmRSS").
int64_t StatusKiB(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  return -1;
}

TEST(PromptCostProcessTest, SixteenMiBPromptIsRefusedQuicklyAndCheaply) {
  ServerProcess p = SpawnProcess(TinyServerArgs(), ::testing::TempDir() + "/argen_bigprompt.log");
  ASSERT_TRUE(WaitServing(p)) << ReadFile(p.log_path);
  auto stub = v1::ArGen::NewStub(client::MakeChannel("127.0.0.1:" + std::to_string(p.port), 64 << 20));
  v1::GenerateRequest warm;
  warm.set_prompt("warm up");
  ASSERT_TRUE(client::CallGenerate(*stub, warm, 30).status.ok());

  constexpr int64_t kPromptBytes = int64_t{16} << 20;
  v1::GenerateRequest big;
  big.set_prompt(std::string(kPromptBytes, 'a'));
  const int64_t peak_before = StatusKiB(p.pid, "VmHWM");
  const auto start = std::chrono::steady_clock::now();
  client::GenerateResult r = client::CallGenerate(*stub, big, 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t peak_after = StatusKiB(p.pid, "VmHWM");
  const int64_t rss_after = StatusKiB(p.pid, "VmRSS");

  EXPECT_EQ(r.status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("prompt: 16777216 bytes, over the limit of"), std::string::npos)
      << r.status.error_message();
  // Transfer over loopback plus one parse; tokenizing it took seconds.
  EXPECT_LT(seconds, 2.0);
  // gRPC's receive buffer plus the parsed message: about 2x the request.
  const double peak_growth = static_cast<double>(peak_after - peak_before) * 1024 / kPromptBytes;
  EXPECT_LT(peak_growth, 4.0) << "peak RSS grew by " << (peak_after - peak_before) / 1024 << " MiB";
  std::cout << "16 MiB prompt: refused in " << seconds << " s, peak RSS +" << (peak_after - peak_before) / 1024
            << " MiB (" << peak_growth << "x the request), RSS after " << rss_after / 1024 << " MiB\n";

  // The server still serves.
  EXPECT_TRUE(client::CallGenerate(*stub, warm, 30).status.ok());
  stub.reset();  // an idle open connection holds gRPC's shutdown for its 5 s grace
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p.pid, 60), 0);
}

}  // namespace
}  // namespace argen::reliability_test
