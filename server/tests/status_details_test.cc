// google.rpc.Status details for each error the server returns.
#include "server/status_details.h"

#include <gtest/gtest.h>

#include "google/rpc/error_details.pb.h"
#include "server/request_mapping.h"

namespace argen::server {
namespace {

google::rpc::Status Decode(const grpc::Status& s) {
  google::rpc::Status rich;
  EXPECT_TRUE(rich.ParseFromString(s.error_details()));
  return rich;
}

TEST(StatusDetailsTest, InvalidArgumentNamesTheFieldInBadRequest) {
  const grpc::Status s = ToGrpcStatus(absl::InvalidArgumentError("policy.sparsity: must be in [0, 1), got 2"));
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "policy.sparsity: must be in [0, 1), got 2");
  const google::rpc::Status rich = Decode(s);
  EXPECT_EQ(rich.code(), 3);
  ASSERT_EQ(rich.details_size(), 2);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(rich.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "INVALID_FIELD");
  EXPECT_EQ(info.domain(), "argen");
  EXPECT_EQ(info.metadata().at("field"), "policy.sparsity");
  google::rpc::BadRequest bad;
  ASSERT_TRUE(rich.details(1).UnpackTo(&bad));
  ASSERT_EQ(bad.field_violations_size(), 1);
  EXPECT_EQ(bad.field_violations(0).field(), "policy.sparsity");
  EXPECT_EQ(bad.field_violations(0).description(), "must be in [0, 1), got 2");
  // A message that names no field: ErrorInfo only.
  EXPECT_EQ(Decode(ToGrpcStatus(absl::InvalidArgumentError("Something odd"))).details_size(), 1);
}

TEST(StatusDetailsTest, RetryableCodesCarryRetryInfo) {
  for (const absl::Status& s : {absl::ResourceExhaustedError("queue full: 3 requests waiting"),
                                absl::UnavailableError("server is draining: not accepting new requests"),
                                absl::UnavailableError("server shut down before the request finished")}) {
    const google::rpc::Status rich = Decode(ToGrpcStatus(s));
    bool retry = false;
    for (const auto& any : rich.details()) {
      google::rpc::RetryInfo r;
      if (any.UnpackTo(&r)) retry = r.retry_delay().seconds() == 1;
    }
    EXPECT_TRUE(retry) << s;
  }
  EXPECT_EQ(ErrorReason(absl::ResourceExhaustedError("queue full")), "QUEUE_FULL");
  EXPECT_EQ(ErrorReason(absl::UnavailableError("server is draining: ...")), "DRAINING");
  EXPECT_EQ(ErrorReason(absl::UnavailableError("server shut down before ...")), "SHUT_DOWN");
  EXPECT_EQ(ErrorReason(absl::FailedPreconditionError("request can never fit")), "REQUEST_NEVER_FITS");
  EXPECT_EQ(ErrorReason(absl::InternalError("engine step failed")), "ENGINE_FAILURE");
  EXPECT_EQ(ErrorReason(absl::CancelledError("x")), "CANCELLED");
  EXPECT_EQ(ErrorReason(absl::DeadlineExceededError("x")), "DEADLINE_EXCEEDED");
  EXPECT_EQ(RetryDelay(absl::InternalError("x")), absl::ZeroDuration());
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace argen::server
