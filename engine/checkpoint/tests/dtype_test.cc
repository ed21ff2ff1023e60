// f16 / bf16 -> f32 conversion against PyTorch's (dtype_probe.safetensors holds
// every f16 bit pattern, a bf16 sample, and PyTorch's f32 values for them).
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "engine/checkpoint/dtype.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/tests/test_files.h"
#include "gtest/gtest.h"

namespace argen::checkpoint {
namespace {

using testing::TinyDir;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class DTypeProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = SafetensorsFile::Open(TinyDir() + "/dtype_probe.safetensors");
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
    for (const TensorInfo& t : file_->tensors()) by_name_[t.name] = &t;
  }

  // Converts `source` with the code under test and compares with PyTorch's `expected` (f32).
  void ExpectSameAsTorch(const std::string& source, const std::string& expected, DType dtype) {
    const TensorInfo* src = by_name_.at(source);
    const TensorInfo* ref = by_name_.at(expected);
    ASSERT_EQ(src->dtype, dtype);
    ASSERT_EQ(ref->dtype, DType::kF32);
    ASSERT_EQ(src->shape, ref->shape);
    const size_t n = static_cast<size_t>(src->shape[0]);
    std::vector<float> got(n), want(n);
    ConvertToF32(dtype, src->data, n, got.data());
    std::memcpy(want.data(), ref->data, n * 4);
    size_t nans = 0;
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << source << "[" << i << "]";
        ++nans;
      } else {
        ASSERT_EQ(Bits(got[i]), Bits(want[i])) << source << "[" << i << "]: got " << got[i] << " want " << want[i];
      }
    }
    EXPECT_GT(nans, 0u) << "probe should cover NaN patterns";
  }

  std::unique_ptr<SafetensorsFile> file_;
  std::map<std::string, const TensorInfo*> by_name_;
};

TEST_F(DTypeProbe, EveryF16BitPatternMatchesPyTorch) {
  ASSERT_EQ(by_name_.at("f16_all")->shape, std::vector<int64_t>{65536});
  ExpectSameAsTorch("f16_all", "f16_all_as_f32", DType::kF16);
}

TEST_F(DTypeProbe, Bf16SampleMatchesPyTorch) { ExpectSameAsTorch("bf16_sample", "bf16_sample_as_f32", DType::kBF16); }

TEST(DType, KnownF16Values) {
  EXPECT_EQ(F16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(F16ToF32(0xC000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(F16ToF32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToF32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToF32(0x7E00)));
  EXPECT_EQ(Bits(F16ToF32(0x8000)), 0x80000000u);  // negative zero
}

TEST(DType, KnownBf16Values) {
  EXPECT_EQ(Bf16ToF32(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToF32(0xC040), -3.0f);
  EXPECT_EQ(Bf16ToF32(0x7F80), std::numeric_limits<float>::infinity());
}

TEST(DType, ConvertsFromUnalignedSource) {
  // Safetensors data may start at any byte offset; the converter must not assume alignment.
  const uint16_t halves[3] = {0x3C00, 0x4000, 0xC200};  // 1, 2, -3
  alignas(8) unsigned char buf[16] = {};
  std::memcpy(buf + 1, halves, sizeof(halves));
  float out[3];
  ConvertToF32(DType::kF16, buf + 1, 3, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_EQ(out[2], -3.0f);
  const float floats[2] = {1.5f, -0.25f};
  std::memcpy(buf + 3, floats, sizeof(floats));
  ConvertToF32(DType::kF32, buf + 3, 2, out);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -0.25f);
}

}  // namespace
}  // namespace argen::checkpoint
