// Byte sizes as operators write them: 1073741824, "8GiB", "40Gi", "4G",
// "4GB", "512MiB", "512Mi", "1.5GB".
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argen::server {

// Units, case-sensitive, optional space before them: none or B (bytes);
// binary Ki Mi Gi Ti Pi (Kubernetes) and KiB MiB GiB TiB PiB; decimal
// k K M G T P (Kubernetes, and K) and kB KB MB GB TB PB. A lowercase "m" is an
// error (Kubernetes' milli), not mega.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

}  // namespace argen::server
