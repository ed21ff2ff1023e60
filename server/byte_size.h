// Byte sizes as operators write them: 1073741824, "8GiB", "512MiB", "1.5GB".
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argen::server {

// Binary (KiB, MiB, GiB, TiB) and decimal (kB, KB, MB, GB, TB) units, "B" or
// none for bytes; case-sensitive units, optional space before the unit.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

}  // namespace argen::server
