// Device faults: FatalIfDeviceUnusable turns errors that leave the device
// unusable into FatalDeviceError (engine/device_errors.h; the CUDA backend
// applies it to every step), and WithFaultGuard is the testing-only fault
// injection decorator.
//
// Fault injection (never set it in production): the environment variable
//   ARGEN_FAULT_INJECTION=<kind>@<call>[,<kind>@<call>...]
// makes the <call>-th step (Backend::Forward) call of the process's backend
// (1-based) fail:
//   step_error   a recoverable step failure; on CUDA a real CUDA error (a
//                kernel launch with an invalid configuration)
//   device_lost  a failure that leaves the device unusable; on CUDA a kernel
//                writing to an illegal address (the context is lost)
//   nan_logits   (CUDA only) the step's output-stage logits are overwritten
//                with NaN, which the per-step non-finite check must catch
// An unparsable value is an error at engine creation, naming the variable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/backend.h"

namespace argen::model {

enum class FaultKind { kNone, kStepError, kDeviceLost, kNanLogits };

struct FaultPlan {
  struct Fault {
    FaultKind kind = FaultKind::kNone;
    int64_t call = 0;  // 1-based step call
  };
  std::vector<Fault> faults;
  FaultKind At(int64_t call) const;
  bool empty() const { return faults.empty(); }
};

inline constexpr char kFaultInjectionEnv[] = "ARGEN_FAULT_INJECTION";

// Parses the variable's value ("" or unset: no faults).
absl::StatusOr<FaultPlan> ParseFaultPlan(const std::string& text);
// The plan in the environment now (read at every call, so tests can set it).
absl::StatusOr<FaultPlan> FaultPlanFromEnv();

// What a backend provides for faults; both may be empty.
struct FaultHooks {
  // Injects `kind` into the coming call; a non-OK status is that call's result.
  std::function<absl::Status(FaultKind)> inject;
  // After a failed call: false when the device can no longer be used.
  std::function<bool()> device_usable;
};

// `status` unchanged, or FatalDeviceError (engine/device_errors.h) when it
// is an error and `device_usable()` says the device no longer works.
absl::Status FatalIfDeviceUnusable(absl::Status status, const std::function<bool()>& device_usable);

// Wraps `inner` for fault injection (returned as is when the plan is empty). Without an
// inject hook, step_error and device_lost return synthetic errors (CPU).
std::unique_ptr<Backend> WithFaultGuard(std::unique_ptr<Backend> inner, FaultPlan plan, FaultHooks hooks);

}  // namespace argen::model
