// Issue #16 defect 1: a second SIGTERM (or a SIGINT) during the drain must not
// kill argen_server by the signal. Every thread blocks the stop signals (the
// OpenBLAS pool, started by a library constructor before main, included), the
// repeated signal is logged and ignored, in-flight requests complete and the
// process exits 0.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/generate_call.h"
#include "grpcpp/client_context.h"
#include "tests/reliability/process_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::reliability_test {
namespace {

TEST(SignalsProcessTest, EveryThreadButTheWaiterBlocksTheStopSignals) {
  ServerProcess p = SpawnProcess(TinyServerArgs(), ::testing::TempDir() + "/argen_sigmask.log");
  ASSERT_TRUE(WaitServing(p)) << ReadFile(p.log_path);
  // The main thread sits in sigwait(), which unblocks the waited-for signals
  // while it waits (that is how sigwait receives them); every other thread
  // must block them.
  std::vector<int> unblocked = ThreadsNotBlockingStopSignals(p.pid);
  unblocked.erase(std::remove(unblocked.begin(), unblocked.end(), p.pid), unblocked.end());
  EXPECT_TRUE(unblocked.empty()) << unblocked.size() << " threads would die of a SIGTERM, first tid " << unblocked[0];
  EXPECT_EQ(ReadFile(p.log_path).find("does not block"), std::string::npos) << ReadFile(p.log_path);
  kill(p.pid, SIGTERM);
  EXPECT_EQ(WaitExit(p.pid, 60), 0) << ReadFile(p.log_path);
}

// Requests long enough (16 images each, one engine thread) that the drain is
// still running when the second and third signals arrive.
void RepeatedSignalsDuringDrain(int first, int second, int third) {
  // A log of its own per test and process: WaitServing reads the port from it,
  // and ctest runs the two tests using this at the same time.
  const std::string log_path =
      absl::StrCat(::testing::TempDir(), "/argen_sigrepeat_",
                   ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_", getpid(), ".log");
  ServerProcess p = SpawnProcess(TinyServerArgs(), log_path);
  ASSERT_TRUE(WaitServing(p)) << ReadFile(p.log_path);
  auto stub = v1::ArGen::NewStub(client::MakeChannel("127.0.0.1:" + std::to_string(p.port), 64 << 20));

  constexpr int kRequests = 6;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>>> readers;
  for (int i = 0; i < kRequests; ++i) {
    v1::GenerateRequest r;
    r.set_prompt("a red circle above a blue square");
    r.set_num_images(16);
    r.set_seed(i);
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub->Generate(contexts.back().get(), r));
  }
  // Every request is accepted (its first event read) before the first signal.
  std::vector<int> images(kRequests, 0);
  for (int i = 0; i < kRequests; ++i) {
    v1::GenerateEvent e;
    ASSERT_TRUE(readers[i]->Read(&e)) << readers[i]->Finish().error_message();
    ASSERT_TRUE(e.has_accepted());
  }
  ASSERT_EQ(kill(p.pid, first), 0);
  usleep(200 * 1000);
  ASSERT_EQ(kill(p.pid, second), 0) << "the drain ended before the second signal";
  usleep(100 * 1000);
  kill(p.pid, third);

  for (int i = 0; i < kRequests; ++i) {
    v1::GenerateEvent e;
    while (readers[i]->Read(&e)) images[i] += e.has_image() ? 1 : 0;
    const grpc::Status status = readers[i]->Finish();
    EXPECT_TRUE(status.ok()) << "request " << i << ": " << status.error_code() << " " << status.error_message();
    EXPECT_EQ(images[i], 16) << "request " << i;
  }
  const int rc = WaitExit(p.pid, 120);
  const std::string log = ReadFile(p.log_path);
  EXPECT_EQ(rc, 0) << "exit " << rc << " (negative: killed by that signal)\n" << log;
  EXPECT_NE(log.find("again while draining: ignored"), std::string::npos) << log;
  EXPECT_NE(log.find("drained, exiting"), std::string::npos) << log;
}

TEST(SignalsProcessTest, SecondSigtermDuringDrainIsIgnoredAndRequestsComplete) {
  RepeatedSignalsDuringDrain(SIGTERM, SIGTERM, SIGTERM);
}

TEST(SignalsProcessTest, SigintDuringSigtermDrainIsIgnoredToo) { RepeatedSignalsDuringDrain(SIGTERM, SIGINT, SIGINT); }

}  // namespace
}  // namespace argen::reliability_test
