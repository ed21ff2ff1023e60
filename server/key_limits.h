// Per-key limits on what one API key may have in the server at once:
// requests in flight (accepted and not finished) and images waiting for
// admission (of its requests not yet in the running batch). Over a limit:
// RESOURCE_EXHAUSTED naming the key's name (never the key) and the limit.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/auth.h"

namespace argen::server {

class KeyLimiter;

// One request's share of its key's limits; given back when destroyed.
class KeyLease {
 public:
  KeyLease() = default;
  KeyLease(KeyLease&& other) noexcept { *this = std::move(other); }
  KeyLease& operator=(KeyLease&& other) noexcept;
  ~KeyLease() { Release(); }

  // The request joined the running batch: its images no longer wait.
  void Started();
  void Release();

 private:
  friend class KeyLimiter;
  KeyLimiter* limiter_ = nullptr;
  std::string key_;
  int32_t images_ = 0;
  bool started_ = false;
};

class KeyLimiter {
 public:
  // `key` null (no key file): an empty lease, never refused.
  absl::StatusOr<KeyLease> Acquire(const ApiKey* key, int32_t images);

  struct Usage {
    int32_t requests = 0;       // in flight
    int32_t queued_images = 0;  // of requests not yet started
  };
  Usage usage(const std::string& key_name) const;

 private:
  friend class KeyLease;
  void Started(const std::string& key, int32_t images);
  void Release(const std::string& key, int32_t images, bool started);

  mutable absl::Mutex mu_;
  std::map<std::string, Usage> usage_ ABSL_GUARDED_BY(mu_);
};

}  // namespace argen::server
