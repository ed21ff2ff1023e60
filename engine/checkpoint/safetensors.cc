#include "engine/checkpoint/safetensors.h"

#include <cstdint>
#include <limits>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/checkpoint/dtype.h"
#include "nlohmann/json.hpp"

namespace argen::checkpoint {
namespace {

using nlohmann::json;

// The format's own limit; a larger value means a corrupt or foreign file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

absl::StatusOr<DType> ParseDType(const std::string& name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  return absl::UnimplementedError(name);
}

// BatchNorm's integer step counter (Emu3's vision tokenizer has them): no
// inference reads it, so it is left out rather than refusing the file.
bool IsBatchNormCounter(const std::string& name, const json& entry) {
  static constexpr std::string_view kSuffix = ".num_batches_tracked";
  const auto dt = entry.is_object() ? entry.find("dtype") : entry.end();
  return name.size() > kSuffix.size() && name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0 &&
         dt != entry.end() && *dt == "I64";
}

absl::Status Bad(const std::string& path, const std::string& tensor, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", tensor, "': ", what));
}

// Parses one header entry and checks it against the data region [0, data_size).
absl::StatusOr<TensorInfo> ParseEntry(const std::string& path, const std::string& name, const json& entry,
                                      const unsigned char* data, uint64_t data_size) {
  if (!entry.is_object()) return Bad(path, name, "header entry is not an object");
  const auto dt = entry.find("dtype");
  const auto sh = entry.find("shape");
  const auto off = entry.find("data_offsets");
  if (dt == entry.end() || !dt->is_string()) return Bad(path, name, "missing string field 'dtype'");
  if (sh == entry.end() || !sh->is_array()) return Bad(path, name, "missing array field 'shape'");
  if (off == entry.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned()) {
    return Bad(path, name, "field 'data_offsets' must be two non-negative integers");
  }

  TensorInfo info;
  info.name = name;
  info.file = path;
  const std::string dtype_name = dt->get<std::string>();
  auto dtype = ParseDType(dtype_name);
  if (!dtype.ok()) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": tensor '", name, "': unsupported dtype '", dtype_name, "' (supported: F32, F16, BF16)"));
  }
  info.dtype = *dtype;

  uint64_t elements = 1;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) return Bad(path, name, "shape entries must be non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    if (v != 0 && elements > std::numeric_limits<uint64_t>::max() / 16 / v) {
      return Bad(path, name, "shape is too large");
    }
    elements *= v;
    info.shape.push_back(static_cast<int64_t>(v));
  }

  const uint64_t begin = (*off)[0].get<uint64_t>();
  const uint64_t end = (*off)[1].get<uint64_t>();
  if (begin > end) return Bad(path, name, absl::StrCat("data_offsets [", begin, ", ", end, ") are reversed"));
  if (end > data_size) {
    return absl::OutOfRangeError(absl::StrCat(path, ": tensor '", name, "': data_offsets [", begin, ", ", end,
                                              ") run past the end of the data (", data_size,
                                              " bytes): the file is truncated or corrupt"));
  }
  const uint64_t expected = elements * DTypeSize(info.dtype);
  if (end - begin != expected) {
    return Bad(path, name,
               absl::StrCat("shape [", absl::StrJoin(info.shape, ", "), "] of ", dtype_name, " needs ", expected,
                            " bytes but data_offsets span ", end - begin));
  }
  info.data = data + begin;
  info.nbytes = static_cast<size_t>(expected);
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  auto mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  const unsigned char* bytes = (*mapped)->data();
  const uint64_t size = (*mapped)->size();

  if (size < 8) {
    return absl::OutOfRangeError(absl::StrCat(path, ": ", size, " bytes, too short for a safetensors header"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian
  if (header_len > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": header length ", header_len, " is implausible: not a safetensors file"));
  }
  if (header_len > size - 8) {
    return absl::OutOfRangeError(absl::StrCat(path, ": header of ", header_len, " bytes runs past the end of the ",
                                              size, "-byte file: the file is truncated"));
  }

  json header = json::parse(bytes + 8, bytes + 8 + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": malformed JSON in the safetensors header"));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": safetensors header is not a JSON object"));
  }

  const unsigned char* data = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::vector<TensorInfo> tensors;
  tensors.reserve(header.size());
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form strings, nothing we need
    if (IsBatchNormCounter(name, entry)) continue;
    auto info = ParseEntry(path, name, entry, data, data_size);
    if (!info.ok()) return info.status();
    tensors.push_back(std::move(*info));
  }
  return std::unique_ptr<SafetensorsFile>(new SafetensorsFile(std::move(*mapped), std::move(tensors)));
}

}  // namespace argen::checkpoint
