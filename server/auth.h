// API keys: bearer tokens checked against a file of SHA-256 hashes.
//
// File format (auth.api_keys_file; docs/serving.md, "API keys"): one key per
// line, '#' starts a comment, fields separated by spaces or tabs:
//
//   NAME  SHA256_HEX  [rights=R1,R2,...] [max_priority=P]
//                     [max_concurrent_requests=N] [max_queued_images=N]
//
// NAME ([A-Za-z0-9_.-], at most 64, unique) is what logs and metrics show;
// the key itself is never stored or shown. SHA256_HEX is the hex SHA-256 of
// the key's bytes (`printf %s "$KEY" | sha256sum`). Rights: generate, info,
// health, metrics, or all (default: generate,info). max_priority: low,
// normal or high (default normal). Limits: 0 or absent means unlimited.
//
// A request carries `authorization: Bearer <key>` (gRPC metadata or HTTP
// header). Its SHA-256 is compared with every entry in constant time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "scheduler/priority.h"

namespace argen::server {

enum class Right : uint32_t { kGenerate = 1, kInfo = 2, kHealth = 4, kMetrics = 8 };
absl::string_view RightName(Right right);

struct ApiKey {
  std::string name;
  std::array<uint8_t, 32> sha256{};
  uint32_t rights = static_cast<uint32_t>(Right::kGenerate) | static_cast<uint32_t>(Right::kInfo);
  scheduler::Priority max_priority = scheduler::Priority::kNormal;
  int32_t max_concurrent_requests = 0;  // 0: unlimited
  int32_t max_queued_images = 0;        // 0: unlimited
  bool has(Right right) const { return (rights & static_cast<uint32_t>(right)) != 0; }
};

class ApiKeys {
 public:
  // Errors name `source` and the line.
  static absl::StatusOr<ApiKeys> Parse(absl::string_view text, const std::string& source);
  static absl::StatusOr<ApiKeys> Load(const std::string& path);

  // The entry whose hash is SHA-256(token), or null. Takes the same time
  // whichever entry matches (every entry is compared, with CRYPTO_memcmp).
  const ApiKey* Find(absl::string_view token) const;
  const std::vector<ApiKey>& keys() const { return keys_; }

 private:
  std::vector<ApiKey> keys_;
};

// The token of "Bearer <token>" (scheme case-insensitive), or nullopt.
std::optional<absl::string_view> BearerToken(absl::string_view authorization);

// The caller's key for `right`: UNAUTHENTICATED when the header is missing,
// not a bearer token or not a known key; PERMISSION_DENIED when the key lacks
// the right. `keys` null (no key file): every caller passes, with no key.
absl::StatusOr<const ApiKey*> Authorize(const ApiKeys* keys, absl::string_view authorization, Right right);

// Hex SHA-256 of `data` (OpenSSL).
std::string Sha256Hex(absl::string_view data);

}  // namespace argen::server
