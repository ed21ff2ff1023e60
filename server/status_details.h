// google.rpc.Status details on every error the service returns (docs/serving.md,
// Errors): ErrorInfo with a stable reason in domain "argen", BadRequest with
// the field for INVALID_ARGUMENT, RetryInfo for RESOURCE_EXHAUSTED and
// UNAVAILABLE. gRPC carries the serialized google.rpc.Status in the
// grpc-status-details-bin trailer.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/support/status.h"

namespace argen::server {

inline constexpr char kErrorDomain[] = "argen";

// The stable ErrorInfo.reason of a status (UPPER_SNAKE_CASE), e.g.
// INVALID_FIELD, REQUEST_NEVER_FITS, QUEUE_FULL, DRAINING, SHUT_DOWN,
// CANCELLED, DEADLINE_EXCEEDED, ENGINE_FAILURE.
std::string ErrorReason(const absl::Status& status);

// The request field an INVALID_ARGUMENT message starts with ("policy.sparsity:
// must be ..." -> "policy.sparsity"), or "" when it names none.
std::string ViolatedField(const absl::Status& status);

// How long a client should wait before retrying, for the codes that say
// "try again" (RESOURCE_EXHAUSTED, UNAVAILABLE); zero for the others.
absl::Duration RetryDelay(const absl::Status& status);

// The google.rpc.Status for `status` (code, message, details).
google::rpc::Status RichStatus(const absl::Status& status);

// `status` as a grpc::Status carrying RichStatus() as its binary details.
grpc::Status ToGrpcStatusWithDetails(const absl::Status& status);

}  // namespace argen::server
