// Up-front checks that an allocation fits the device, so running out of
// device memory at load is an error naming what asked for how much, next to
// what the device has free, instead of a bare "out of memory"; and whether
// the device still works after an error.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace argen::cuda {

// "1.5 GiB" style, for messages.
std::string GiB(int64_t bytes);

// RESOURCE_EXHAUSTED "<what> needs <bytes> but the device has <free> of
// <total> free; <advice>" when `bytes` exceeds the free device memory.
absl::Status CheckDeviceMemoryFits(int64_t bytes, absl::string_view what, absl::string_view advice);

// True when the device still works after an error: clears a pending
// non-sticky error and synchronizes; a sticky error (an illegal address, a
// lost device) fails the synchronize.
bool DeviceUsable();

}  // namespace argen::cuda
