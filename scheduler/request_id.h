// Request ids unique across restarts and replicas: ULIDs (26 characters of
// Crockford base32: a 48-bit millisecond timestamp, then 80 random bits), so
// ids sort by creation time and are safe in file names and log queries.
#pragma once

#include <string>

#include "absl/time/time.h"

namespace argen::scheduler {

// Thread-safe. The random part comes from a generator seeded once per
// process from std::random_device.
std::string NewRequestId();

// The same with a given time (tests).
std::string NewRequestId(absl::Time now);

}  // namespace argen::scheduler
