// argen_client's --parallel_window and --speculative_window (generate,
// load): sent as given, unset leaves the server's default, and a negative
// value is a usage error naming the flag (the server checks the upper bound,
// naming the field).
#include <gtest/gtest.h>

#include <sstream>

#include "client/commands.h"

namespace argen::client {
namespace {

TEST(ParallelWindowFlagTest, SentAsGivenOrLeftToTheServer) {
  RequestFlags flags;
  flags.prompt = "x";
  absl::StatusOr<v1::GenerateRequest> r = RequestFromFlags(flags);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_parallel_window());
  flags.parallel_window = 8;
  r = RequestFromFlags(flags);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->parallel_window(), 8);
}

TEST(ParallelWindowFlagTest, BadValuesAreUsageErrorsNamingTheFlag) {
  for (const char* command : {"generate", "load"}) {
    for (const char* bad : {"-1", "two"}) {
      std::ostringstream out, err;
      EXPECT_EQ(RunClient({"--server=127.0.0.1:1", command, "--prompt=x", "--parallel_window", bad}, out, err), kUsage)
          << command << " " << bad;
      EXPECT_NE(err.str().find("parallel"), std::string::npos) << err.str();
    }
  }
}

// --speculative_window, the same way.
TEST(SpeculativeWindowFlagTest, SentAsGivenOrLeftToTheServer) {
  RequestFlags flags;
  flags.prompt = "x";
  absl::StatusOr<v1::GenerateRequest> r = RequestFromFlags(flags);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_speculative_window());
  flags.speculative_window = 4;
  r = RequestFromFlags(flags);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->speculative_window(), 4);
}

TEST(SpeculativeWindowFlagTest, BadValuesAreUsageErrorsNamingTheFlag) {
  for (const char* command : {"generate", "load"}) {
    for (const char* bad : {"-1", "two"}) {
      std::ostringstream out, err;
      EXPECT_EQ(RunClient({"--server=127.0.0.1:1", command, "--prompt=x", "--speculative_window", bad}, out, err),
                kUsage)
          << command << " " << bad;
      EXPECT_NE(err.str().find("speculative"), std::string::npos) << err.str();
    }
  }
}

}  // namespace
}  // namespace argen::client
