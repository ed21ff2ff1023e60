#include "server/generate_wire.h"

#include <cstdio>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "server/prompt_limits.h"

namespace argen::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Nesting deeper than this is not worth walking (GenerateRequest has 2 levels).
constexpr int kMaxDepth = 8;

std::string FindIn(const Descriptor* type, const UnknownFieldSet& fields, const std::string& prefix, int depth,
                   size_t* offset) {
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    if (f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const FieldDescriptor* fd = type->FindFieldByNumber(f.number());
    if (fd == nullptr) continue;
    const std::string name = prefix.empty() ? fd->name() : absl::StrCat(prefix, ".", fd->name());
    if (fd->type() == FieldDescriptor::TYPE_STRING) {
      const size_t bad = FirstInvalidUtf8(f.length_delimited());
      if (bad != std::string_view::npos) {
        if (offset != nullptr) *offset = bad;
        return name;
      }
    } else if (fd->type() == FieldDescriptor::TYPE_MESSAGE && depth < kMaxDepth) {
      UnknownFieldSet nested;
      if (!nested.ParseFromString(f.length_delimited())) continue;
      std::string found = FindIn(fd->message_type(), nested, name, depth + 1, offset);
      if (!found.empty()) return found;
    }
  }
  return "";
}

absl::Status Diagnose(std::string_view wire) {
  size_t offset = 0;
  const std::string field = FirstInvalidUtf8Field(v1::GenerateRequest::descriptor(), wire, &offset);
  if (!field.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": not valid UTF-8 (byte ", offset, ")"));
  }
  return absl::InvalidArgumentError("request: not a valid argen.v1.GenerateRequest (malformed protobuf encoding)");
}

void FilteredProtobufLog(google::protobuf::LogLevel level, const char* filename, int line, const std::string& message) {
  // Counted and answered as INVALID_ARGUMENT instead (ParseGenerateRequest).
  if (level == google::protobuf::LOGLEVEL_ERROR &&
      message.find("contains invalid UTF-8 data when parsing") != std::string::npos) {
    return;
  }
  static const char* const kLevels[] = {"INFO", "WARNING", "ERROR", "FATAL"};
  std::fprintf(stderr, "[libprotobuf %s %s:%d] %s\n", kLevels[level], filename, line, message.c_str());
  std::fflush(stderr);
}

}  // namespace

void QuietInvalidUtf8ParseLogs() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&FilteredProtobufLog); });
}

std::string FirstInvalidUtf8Field(const Descriptor* type, std::string_view wire, size_t* offset) {
  UnknownFieldSet fields;
  if (!fields.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) return "";
  return FindIn(type, fields, "", 0, offset);
}

absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(std::string_view wire) {
  v1::GenerateRequest request;
  if (wire.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("request: larger than 2 GiB");
  }
  if (request.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) return request;
  return Diagnose(wire);
}

absl::StatusOr<v1::GenerateRequest> ParseGenerateRequest(const grpc::ByteBuffer& wire) {
  // Parsed straight from gRPC's slices (the copy shares them); only a
  // request that fails to parse is joined into one string to diagnose it.
  grpc::ByteBuffer shared(wire);
  v1::GenerateRequest request;
  {
    grpc::ProtoBufferReader reader(&shared);
    if (request.ParseFromZeroCopyStream(&reader)) return request;
  }
  std::vector<grpc::Slice> slices;
  if (!wire.Dump(&slices).ok()) return absl::InvalidArgumentError("request: unreadable message");
  std::string joined;
  joined.reserve(wire.Length());
  for (const grpc::Slice& s : slices) joined.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return Diagnose(joined);
}

}  // namespace argen::server
