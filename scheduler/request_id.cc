#include "scheduler/request_id.h"

#include <cstdint>
#include <random>

#include "absl/synchronization/mutex.h"

namespace argen::scheduler {
namespace {

constexpr char kCrockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

struct Source {
  absl::Mutex mu;
  std::mt19937_64 rng ABSL_GUARDED_BY(mu);
  Source() {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(), device(), device(), device(), device()};
    rng.seed(seed);
  }
};

Source& RandomSource() {
  static Source* source = new Source();
  return *source;
}

}  // namespace

std::string NewRequestId(absl::Time now) {
  const uint64_t ms = static_cast<uint64_t>(absl::ToUnixMillis(now)) & ((uint64_t{1} << 48) - 1);
  uint64_t hi = 0, lo = 0;  // 80 random bits: 16 in hi, 64 in lo
  {
    Source& s = RandomSource();
    absl::MutexLock lock(&s.mu);
    hi = s.rng() & 0xFFFF;
    lo = s.rng();
  }
  // 128 bits = 48 time + 80 random, written as 26 base32 digits (130 bits,
  // the top two always 0), most significant first.
  const unsigned __int128 value =
      (static_cast<unsigned __int128>(ms) << 80) | (static_cast<unsigned __int128>(hi) << 64) | lo;
  std::string id(26, '0');
  for (int i = 25; i >= 0; --i) {
    id[i] = kCrockford[static_cast<int>((value >> (5 * (25 - i))) & 31)];
  }
  return id;
}

std::string NewRequestId() { return NewRequestId(absl::Now()); }

}  // namespace argen::scheduler
