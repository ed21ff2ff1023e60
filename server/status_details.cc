#include "server/status_details.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "google/rpc/error_details.pb.h"

namespace argen::server {
namespace {

bool IsFieldPath(absl::string_view s) {
  if (s.empty() || s.front() == '.' || s.back() == '.') return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '.')) return false;
  }
  return true;
}

}  // namespace

std::string ErrorReason(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return "OK";
    case absl::StatusCode::kInvalidArgument:
      return "INVALID_FIELD";
    case absl::StatusCode::kFailedPrecondition:
      return "REQUEST_NEVER_FITS";
    case absl::StatusCode::kResourceExhausted:
      return "QUEUE_FULL";
    case absl::StatusCode::kUnavailable:
      return absl::StrContains(status.message(), "draining") ? "DRAINING" : "SHUT_DOWN";
    case absl::StatusCode::kCancelled:
      return "CANCELLED";
    case absl::StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kInternal:
      return "ENGINE_FAILURE";
    default:
      return absl::StatusCodeToString(status.code());
  }
}

std::string ViolatedField(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return "";
  const absl::string_view message = status.message();
  const size_t colon = message.find(": ");
  if (colon == absl::string_view::npos) return "";
  const absl::string_view field = message.substr(0, colon);
  return IsFieldPath(field) ? std::string(field) : "";
}

absl::Duration RetryDelay(const absl::Status& status) {
  switch (status.code()) {
    // Queue full: a running request frees its rows within seconds.
    case absl::StatusCode::kResourceExhausted:
      return absl::Seconds(1);
    // Draining or shut down: another replica (or this one, restarted) takes it.
    case absl::StatusCode::kUnavailable:
      return absl::Seconds(1);
    default:
      return absl::ZeroDuration();
  }
}

google::rpc::Status RichStatus(const absl::Status& status) {
  google::rpc::Status rich;
  rich.set_code(static_cast<int32_t>(status.code()));
  rich.set_message(std::string(status.message()));
  if (status.ok()) return rich;
  google::rpc::ErrorInfo info;
  info.set_reason(ErrorReason(status));
  info.set_domain(kErrorDomain);
  const std::string field = ViolatedField(status);
  if (!field.empty()) (*info.mutable_metadata())["field"] = field;
  rich.add_details()->PackFrom(info);
  if (!field.empty()) {
    google::rpc::BadRequest bad;
    google::rpc::BadRequest::FieldViolation* v = bad.add_field_violations();
    v->set_field(field);
    v->set_description(std::string(status.message().substr(field.size() + 2)));
    v->set_reason(info.reason());
    rich.add_details()->PackFrom(bad);
  }
  if (const absl::Duration delay = RetryDelay(status); delay > absl::ZeroDuration()) {
    google::rpc::RetryInfo retry;
    const int64_t ns = absl::ToInt64Nanoseconds(delay);
    retry.mutable_retry_delay()->set_seconds(ns / 1000000000);
    retry.mutable_retry_delay()->set_nanos(static_cast<int32_t>(ns % 1000000000));
    rich.add_details()->PackFrom(retry);
  }
  return rich;
}

grpc::Status ToGrpcStatusWithDetails(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()),
                      RichStatus(status).SerializeAsString());
}

}  // namespace argen::server
