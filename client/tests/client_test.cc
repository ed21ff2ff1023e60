// argen_client pieces that need no server: policy specs,
// percentiles, command-line errors and the unreachable-server exit code.
#include <gtest/gtest.h>

#include <sstream>

#include "client/commands.h"
#include "client/latency_stats.h"

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

}  // namespace
}  // namespace argen::client
