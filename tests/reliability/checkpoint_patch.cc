#include "tests/reliability/checkpoint_patch.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/dtype.h"
#include "nlohmann/json.hpp"

namespace argen::reliability_test {
namespace {

uint16_t ToHalfBits(float f, bool bf16) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (bf16) return static_cast<uint16_t>(u >> 16);  // truncation keeps NaN/Inf as they are
  // f16: enough for NaN, Inf, 0 and moderate values (tests only).
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((u >> 23) & 0xff) - 127 + 15;
  const uint32_t mant = u & 0x7fffffu;
  if (((u >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (exp << 10) | (mant >> 13));
}

}  // namespace

absl::Status CopyCheckpoint(const std::string& dir, const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::remove_all(out_dir, ec);
  std::filesystem::copy(dir, out_dir, std::filesystem::copy_options::recursive, ec);
  if (ec) return absl::InternalError(absl::StrCat("copy ", dir, " -> ", out_dir, ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status PatchTensor(const std::string& file, const std::string& name,
                         const std::function<float(int64_t, float)>& value) {
  std::vector<char> bytes;
  {
    std::ifstream in(file, std::ios::binary);
    if (!in) return absl::NotFoundError(file);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (bytes.size() < 8) return absl::InvalidArgumentError(file + ": too short");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
  const nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len);
  if (!header.contains(name)) return absl::NotFoundError(absl::StrCat(file, ": no tensor ", name));
  const nlohmann::json& t = header[name];
  const std::string dtype = t["dtype"];
  const size_t begin = 8 + header_len + t["data_offsets"][0].get<size_t>();
  const size_t end = 8 + header_len + t["data_offsets"][1].get<size_t>();
  char* data = bytes.data() + begin;
  if (dtype == "F32") {
    for (size_t i = 0; i < (end - begin) / 4; ++i) {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      v = value(static_cast<int64_t>(i), v);
      std::memcpy(data + 4 * i, &v, 4);
    }
  } else if (dtype == "BF16" || dtype == "F16") {
    const bool bf16 = dtype == "BF16";
    for (size_t i = 0; i < (end - begin) / 2; ++i) {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * i, 2);
      const float old = bf16 ? checkpoint::Bf16ToF32(bits) : checkpoint::F16ToF32(bits);
      bits = ToHalfBits(value(static_cast<int64_t>(i), old), bf16);
      std::memcpy(data + 2 * i, &bits, 2);
    }
  } else {
    return absl::UnimplementedError(dtype);
  }
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("write ", file));
}

}  // namespace argen::reliability_test
