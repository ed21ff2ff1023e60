// SafetensorsFile: header parsing and every malformed-file error, built at test
// time from the good tiny checkpoint.
#include "engine/checkpoint/safetensors.h"

#include <cstring>

#include "engine/checkpoint/tests/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace argen::checkpoint {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::RawTensor;
using testing::ReadAll;
using testing::SafetensorsBytes;
using testing::ScratchDir;
using testing::TinyCheckpoint;
using testing::WriteBytes;

std::string GoodFile() { return TinyCheckpoint("tiny-mha") + "/model.safetensors"; }

TEST(Safetensors, ReadsHeaderOfTinyCheckpoint) {
  auto file = SafetensorsFile::Open(GoodFile());
  ASSERT_TRUE(file.ok()) << file.status();
  bool saw_bf16 = false, saw_f16 = false, saw_f32 = false;
  for (const TensorInfo& t : (*file)->tensors()) {
    EXPECT_EQ(t.file, GoodFile());
    EXPECT_NE(t.name, "__metadata__");
    saw_bf16 |= t.dtype == DType::kBF16;
    saw_f16 |= t.dtype == DType::kF16;
    saw_f32 |= t.dtype == DType::kF32;
  }
  EXPECT_TRUE(saw_bf16 && saw_f16 && saw_f32);
}

TEST(Safetensors, RoundTripsThroughTestWriter) {
  // The writer used to build bad files must itself produce files the reader accepts unchanged.
  ScratchDir dir;
  std::vector<RawTensor> tensors = ReadAll(GoodFile());
  WriteBytes(dir.File("copy.safetensors"), SafetensorsBytes(tensors));
  std::vector<RawTensor> again = ReadAll(dir.File("copy.safetensors"));
  ASSERT_EQ(again.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(again[i].name, tensors[i].name);
    EXPECT_EQ(again[i].shape, tensors[i].shape);
    EXPECT_EQ(again[i].bytes, tensors[i].bytes);
  }
}

TEST(Safetensors, TruncatedFileNamesFileAndTensor) {
  ScratchDir dir;
  const std::string bytes = testing::ReadBytes(GoodFile());
  std::vector<RawTensor> tensors = ReadAll(GoodFile());
  // Cut inside the last tensor's data: that tensor (the last by offset) is reported.
  const std::string path = dir.File("model.safetensors");
  WriteBytes(path, bytes.substr(0, bytes.size() - 10));
  auto file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()),
              AllOf(HasSubstr(path), HasSubstr("tensor '"), HasSubstr("truncated")));
}

TEST(Safetensors, TruncatedHeaderNamesFile) {
  ScratchDir dir;
  const std::string path = dir.File("model.safetensors");
  WriteBytes(path, testing::ReadBytes(GoodFile()).substr(0, 100));
  auto file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()), AllOf(HasSubstr(path), HasSubstr("truncated")));
  WriteBytes(path, "abc");
  file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()), AllOf(HasSubstr(path), HasSubstr("too short")));
}

TEST(Safetensors, UnknownDtypeNamesFileTensorAndDtype) {
  ScratchDir dir;
  std::vector<RawTensor> tensors = {{"ok.weight", "F32", {2}, std::string(8, '\0')},
                                    {"quantized.weight", "I8", {4}, std::string(4, '\1')}};
  const std::string path = dir.File("model.safetensors");
  WriteBytes(path, SafetensorsBytes(tensors));
  auto file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(file.status().message()),
              AllOf(HasSubstr(path), HasSubstr("quantized.weight"), HasSubstr("'I8'")));
}

TEST(Safetensors, BatchNormCountersAreLeftOutAndOtherIntegersStillRefused) {
  ScratchDir dir;
  const std::string path = dir.File("model.safetensors");
  WriteBytes(path, SafetensorsBytes({{"ok.weight", "F32", {2}, std::string(8, '\0')},
                                     {"norm1.num_batches_tracked", "I64", {}, std::string(8, '\0')}}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().size(), 1u);
  WriteBytes(path, SafetensorsBytes({{"ok.weight", "F32", {2}, std::string(8, '\0')},
                                     {"norm1.steps", "I64", {}, std::string(8, '\0')}}));
  file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("norm1.steps"));
}

TEST(Safetensors, MalformedHeaderJsonNamesFile) {
  ScratchDir dir;
  const std::string path = dir.File("model.safetensors");
  std::string bad = SafetensorsBytes({{"a", "F32", {1}, std::string(4, '\0')}});
  bad[8] = '[';  // the header's opening brace
  bad[9] = '}';
  WriteBytes(path, bad);
  auto file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()), AllOf(HasSubstr(path), HasSubstr("malformed JSON")));
}

TEST(Safetensors, ShapeThatDisagreesWithByteSizeNamesTensor) {
  ScratchDir dir;
  const std::string path = dir.File("model.safetensors");
  WriteBytes(path, SafetensorsBytes({{"w", "BF16", {3, 4}, std::string(20, '\0')}}));  // needs 24 bytes
  auto file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("[3, 4]"), HasSubstr("24 bytes")));
}

TEST(Safetensors, BadEntryFieldsNameTensor) {
  ScratchDir dir;
  const std::string path = dir.File("model.safetensors");
  for (const std::string header :
       {R"({"t":{"dtype":"F32","shape":[1]}})", R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
        R"({"t":{"shape":[1],"data_offsets":[0,4]}})", R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})",
        R"({"t":7})"}) {
    std::string bytes(8, '\0');
    bytes[0] = static_cast<char>(header.size());
    WriteBytes(path, bytes + header + std::string(4, '\0'));
    auto file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok()) << header;
    EXPECT_THAT(std::string(file.status().message()), AllOf(HasSubstr(path), HasSubstr("tensor 't'"))) << header;
  }
}

TEST(Safetensors, MissingFileIsNotFound) {
  auto file = SafetensorsFile::Open("/nonexistent/model.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("/nonexistent/model.safetensors"));
}

}  // namespace
}  // namespace argen::checkpoint
