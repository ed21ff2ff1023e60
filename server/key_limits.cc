#include "server/key_limits.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace argen::server {

KeyLease& KeyLease::operator=(KeyLease&& other) noexcept {
  if (this == &other) return *this;
  Release();
  limiter_ = std::exchange(other.limiter_, nullptr);
  key_ = std::move(other.key_);
  images_ = other.images_;
  started_ = other.started_;
  return *this;
}

void KeyLease::Started() {
  if (limiter_ == nullptr || started_) return;
  started_ = true;
  limiter_->Started(key_, images_);
}

void KeyLease::Release() {
  if (limiter_ == nullptr) return;
  limiter_->Release(key_, images_, started_);
  limiter_ = nullptr;
}

absl::StatusOr<KeyLease> KeyLimiter::Acquire(const ApiKey* key, int32_t images) {
  KeyLease lease;
  if (key == nullptr) return lease;
  absl::MutexLock lock(&mu_);
  Usage& u = usage_[key->name];
  if (key->max_concurrent_requests > 0 && u.requests + 1 > key->max_concurrent_requests) {
    return absl::ResourceExhaustedError(absl::StrCat("API key '", key->name, "' has ", u.requests,
                                                     " requests in flight (its max_concurrent_requests is ",
                                                     key->max_concurrent_requests, "); retry later"));
  }
  if (key->max_queued_images > 0 && u.queued_images + images > key->max_queued_images) {
    return absl::ResourceExhaustedError(
        absl::StrCat("API key '", key->name, "' has ", u.queued_images, " images waiting; ", images,
                     " more would exceed its max_queued_images of ", key->max_queued_images, "; retry later"));
  }
  ++u.requests;
  u.queued_images += images;
  lease.limiter_ = this;
  lease.key_ = key->name;
  lease.images_ = images;
  return lease;
}

KeyLimiter::Usage KeyLimiter::usage(const std::string& key_name) const {
  absl::MutexLock lock(&mu_);
  auto it = usage_.find(key_name);
  return it == usage_.end() ? Usage{} : it->second;
}

void KeyLimiter::Started(const std::string& key, int32_t images) {
  absl::MutexLock lock(&mu_);
  usage_[key].queued_images -= images;
}

void KeyLimiter::Release(const std::string& key, int32_t images, bool started) {
  absl::MutexLock lock(&mu_);
  Usage& u = usage_[key];
  --u.requests;
  if (!started) u.queued_images -= images;
}

}  // namespace argen::server
