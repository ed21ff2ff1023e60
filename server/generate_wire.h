// The bytes of a Generate request, parsed in the service instead of by the
// generated gRPC handler. Protobuf refuses a proto3 `string` field holding
// invalid UTF-8 before any service code runs, and gRPC then answers INTERNAL
// with an empty message, uncounted. ArgenService registers Generate with a
// raw (ByteBuffer) request instead and calls ParseGenerateRequest, so every
// malformed request gets INVALID_ARGUMENT naming the field, and is counted.
// The proto and the wire format are unchanged (GenerateRequest.prompt stays
// `string`, so clients in every language are unaffected).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "argen/v1/argen.pb.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/support/byte_buffer.h"

namespace argen::server {

// Protobuf logs every string field with invalid UTF-8 that it refuses to
// parse; a client could flood the server's log that way. Installs (once) a
// protobuf log handler that drops exactly those parse messages and prints
// every other one as protobuf does. Call before serving.
void QuietInvalidUtf8ParseLogs();

// The request, or INVALID_ARGUMENT: "<field>: not valid UTF-8 (byte N)"
// naming the first string field at fault (e.g. "prompt", "policy.name"), or
// "request: not a valid argen.v1.GenerateRequest" for other malformed bytes.
absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(const grpc::ByteBuffer& wire);
absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(std::string_view wire);

// The dotted name of the first string field of `type` (nested messages
// included) whose bytes in `wire` are not valid UTF-8, with the offset
// within the field; "" when there is none or `wire` is not parseable.
std::string FirstInvalidUtf8Field(const google::protobuf::Descriptor* type, std::string_view wire,
                                  size_t* offset = nullptr);

}  // namespace argen::server
