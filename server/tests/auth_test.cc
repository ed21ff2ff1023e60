// API keys (server/auth.h): the key file format and its errors, bearer
// tokens, rights, priority caps (server/request_gate.h) and per-key limits
// (server/key_limits.h).
#include "server/auth.h"

#include <gtest/gtest.h>

#include "server/key_limits.h"
#include "server/request_gate.h"

namespace argen::server {
namespace {

TEST(AuthTest, Sha256HexIsTheStandardDigest) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

std::string KeyFile() {
  return "# argen keys\n"
         "\n"
         "alice " +
         Sha256Hex("alice-secret") + "   # default rights\n" + "ops\t" + Sha256Hex("ops-secret") +
         " rights=all max_priority=high\n" + "batch " + Sha256Hex("batch-secret") +
         " rights=generate max_priority=low max_concurrent_requests=2 max_queued_images=3\n";
}

TEST(AuthTest, ParsesNamesHashesRightsAndLimits) {
  absl::StatusOr<ApiKeys> keys = ApiKeys::Parse(KeyFile(), "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->keys().size(), 3u);
  const ApiKey& alice = keys->keys()[0];
  EXPECT_EQ(alice.name, "alice");
  EXPECT_TRUE(alice.has(Right::kGenerate));
  EXPECT_TRUE(alice.has(Right::kInfo));
  EXPECT_FALSE(alice.has(Right::kMetrics));
  EXPECT_EQ(alice.max_priority, scheduler::Priority::kNormal);
  const ApiKey& ops = keys->keys()[1];
  EXPECT_TRUE(ops.has(Right::kMetrics) && ops.has(Right::kHealth));
  EXPECT_EQ(ops.max_priority, scheduler::Priority::kHigh);
  const ApiKey& batch = keys->keys()[2];
  EXPECT_FALSE(batch.has(Right::kInfo));
  EXPECT_EQ(batch.max_concurrent_requests, 2);
  EXPECT_EQ(batch.max_queued_images, 3);
  // Upper-case hex is the same hash.
  std::string upper = Sha256Hex("u");
  for (char& c : upper) c = static_cast<char>(toupper(c));
  EXPECT_TRUE(ApiKeys::Parse("u " + upper, "k").ok());
}

TEST(AuthTest, BadKeyFilesNameTheLineAndTheProblem) {
  const std::string h = Sha256Hex("x");
  struct Case {
    std::string text;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"", "no keys"},
      {"# only a comment\n", "no keys"},
      {"alice\n", "keys:1: want NAME SHA256_HEX"},
      {"alice my-plain-key\n", "never the key itself"},
      {"alice " + h + "\nbob " + h + "\n", "keys:2: key \"bob\": the same hash"},
      {"alice " + h + "\nalice " + Sha256Hex("y") + "\n", "appears twice"},
      {"al/ice " + h, "use 1-64 of"},
      {"alice " + h + " rights=generate,admin", "unknown right \"admin\""},
      {"alice " + h + " max_priority=urgent", "max_priority"},
      {"alice " + h + " max_concurrent_requests=-1", "integer >= 0"},
      {"alice " + h + " colour=blue", "unknown option \"colour\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ApiKeys> keys = ApiKeys::Parse(c.text, "keys");
    ASSERT_FALSE(keys.ok()) << c.text;
    EXPECT_NE(keys.status().message().find(c.says), std::string::npos) << keys.status();
  }
  absl::StatusOr<ApiKeys> missing = ApiKeys::Load("/nonexistent/keys");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("auth.api_keys_file"), std::string::npos);
}

TEST(AuthTest, BearerTokens) {
  EXPECT_EQ(BearerToken("Bearer abc").value(), "abc");
  EXPECT_EQ(BearerToken("bearer   abc  ").value(), "abc");
  EXPECT_FALSE(BearerToken("").has_value());
  EXPECT_FALSE(BearerToken("Basic abc").has_value());
  EXPECT_FALSE(BearerToken("Bearer ").has_value());
  EXPECT_FALSE(BearerToken("abc").has_value());
}

TEST(AuthTest, AuthorizeChecksTheKeyThenTheRightAndNeverEchoesTheKey) {
  const ApiKeys keys = ApiKeys::Parse(KeyFile(), "k").value();
  EXPECT_EQ(Authorize(&keys, "Bearer alice-secret", Right::kGenerate).value()->name, "alice");
  EXPECT_EQ(Authorize(&keys, "Bearer ops-secret", Right::kMetrics).value()->name, "ops");
  for (const char* header : {"", "Bearer wrong", "Token alice-secret", "Bearer alice-secre"}) {
    absl::StatusOr<const ApiKey*> k = Authorize(&keys, header, Right::kGenerate);
    ASSERT_FALSE(k.ok()) << header;
    EXPECT_EQ(k.status().code(), absl::StatusCode::kUnauthenticated) << header;
    EXPECT_EQ(k.status().message().find("alice-secre"), std::string::npos) << k.status();
  }
  absl::StatusOr<const ApiKey*> denied = Authorize(&keys, "Bearer alice-secret", Right::kMetrics);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(denied.status().message().find("'alice'"), std::string::npos);
  EXPECT_EQ(denied.status().message().find("alice-secret"), std::string::npos);
  // No key file: everyone passes, with no key.
  EXPECT_EQ(Authorize(nullptr, "", Right::kGenerate).value(), nullptr);
}

TEST(AuthTest, PriorityIsCappedPerKey) {
  const ApiKeys keys = ApiKeys::Parse(KeyFile(), "k").value();
  const ApiKey* alice = &keys.keys()[0];  // max normal
  const ApiKey* batch = &keys.keys()[2];  // max low
  EXPECT_EQ(ResolvePriority(v1::PRIORITY_UNSPECIFIED, nullptr).value(), scheduler::Priority::kNormal);
  EXPECT_EQ(ResolvePriority(v1::PRIORITY_HIGH, nullptr).value(), scheduler::Priority::kHigh);
  EXPECT_EQ(ResolvePriority(v1::PRIORITY_NORMAL, alice).value(), scheduler::Priority::kNormal);
  EXPECT_EQ(ResolvePriority(v1::PRIORITY_UNSPECIFIED, batch).value(), scheduler::Priority::kLow);
  absl::StatusOr<scheduler::Priority> high = ResolvePriority(v1::PRIORITY_HIGH, alice);
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(high.status().message(), "priority: API key 'alice' may ask for at most normal, not high");
  absl::StatusOr<scheduler::Priority> unknown = ResolvePriority(static_cast<v1::Priority>(9), nullptr);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KeyLimiterTest, ConcurrentRequestsAndQueuedImagesPerKey) {
  const ApiKeys keys = ApiKeys::Parse(KeyFile(), "k").value();
  const ApiKey* batch = &keys.keys()[2];  // 2 requests, 3 queued images
  KeyLimiter limiter;
  absl::StatusOr<KeyLease> a = limiter.Acquire(batch, 2);
  ASSERT_TRUE(a.ok());
  absl::StatusOr<KeyLease> too_many_images = limiter.Acquire(batch, 2);
  ASSERT_FALSE(too_many_images.ok());
  EXPECT_EQ(too_many_images.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_many_images.status().message().find("max_queued_images of 3"), std::string::npos);
  a->Started();  // its images no longer wait
  absl::StatusOr<KeyLease> b = limiter.Acquire(batch, 3);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<KeyLease> third = limiter.Acquire(batch, 1);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("max_concurrent_requests is 2"), std::string::npos);
  EXPECT_EQ(limiter.usage("batch").requests, 2);
  EXPECT_EQ(limiter.usage("batch").queued_images, 3);
  *a = KeyLease();  // released
  EXPECT_EQ(limiter.usage("batch").requests, 1);
  b->Release();
  EXPECT_EQ(limiter.usage("batch").requests, 0);
  EXPECT_EQ(limiter.usage("batch").queued_images, 0);
  // Other keys and no key are not affected.
  EXPECT_TRUE(limiter.Acquire(&keys.keys()[0], 16).ok());
  EXPECT_TRUE(limiter.Acquire(nullptr, 1000).ok());
}

}  // namespace
}  // namespace argen::server
