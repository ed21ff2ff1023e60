// ULID request ids: format, time order, uniqueness under concurrency.
#include "scheduler/request_id.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace argen::scheduler {
namespace {

TEST(RequestIdTest, UlidFormatAndTimePrefix) {
  const std::regex crockford("[0-9A-HJKMNP-TV-Z]{26}");
  const std::string id = NewRequestId();
  EXPECT_TRUE(std::regex_match(id, crockford)) << id;
  // The Unix epoch encodes as ten zeros; 2**48 - 1 ms as 7ZZZZZZZZZ (the ULID maximum).
  EXPECT_EQ(NewRequestId(absl::FromUnixMillis(0)).substr(0, 10), "0000000000");
  EXPECT_EQ(NewRequestId(absl::FromUnixMillis((int64_t{1} << 48) - 1)).substr(0, 10), "7ZZZZZZZZZ");
  // 1 ms later sorts later.
  const absl::Time t = absl::FromUnixMillis(1700000000000);
  EXPECT_LT(NewRequestId(t).substr(0, 10), NewRequestId(t + absl::Milliseconds(1)).substr(0, 10));
}

TEST(RequestIdTest, UniqueAcrossThreads) {
  absl::Mutex mu;
  std::set<std::string> ids;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        std::string id = NewRequestId();
        absl::MutexLock lock(&mu);
        ids.insert(std::move(id));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ids.size(), 20000u);
}

}  // namespace
}  // namespace argen::scheduler
