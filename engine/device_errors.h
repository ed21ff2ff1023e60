// Errors after which a backend's device cannot be used again.
//
// Most step failures (a CUDA launch error, NaN/Inf logits, a bad batch)
// end that step's requests and the next step runs normally. A few leave the
// device unusable: a CUDA error that corrupts the context (an illegal
// address, an ECC error, a lost device) fails every later call. A backend
// (engine/model/fault_guard.h) reports those with FatalDeviceError; the scheduler then fails everything
// it holds and refuses new work, and argen_server exits non-zero (3) so that
// its orchestrator restarts it (docs/operations.md, "Failure behaviour").
#pragma once

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace argen::engine {

inline constexpr char kFatalDeviceErrorPayload[] = "type.argen.dev/fatal-device-error";

// INTERNAL with the fatal marker (a status payload, so it survives being
// passed along unchanged).
inline absl::Status FatalDeviceError(absl::string_view message) {
  absl::Status status = absl::InternalError(message);
  status.SetPayload(kFatalDeviceErrorPayload, absl::Cord("1"));
  return status;
}

inline bool IsFatalDeviceError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kFatalDeviceErrorPayload).has_value();
}

}  // namespace argen::engine
