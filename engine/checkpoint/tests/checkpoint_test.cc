// Checkpoint::Open on the tiny checkpoints (single file and sharded) against the
// values PyTorch wrote to checkpoint_golden.json, and every directory-level error.
#include "engine/checkpoint/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/checkpoint/tests/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::checkpoint {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::ScratchDir;
using testing::TinyCheckpoint;
using testing::TinyDir;
using testing::WriteBytes;

const json& Golden() {
  static const json golden = json::parse(ReadBytes(TinyDir() + "/checkpoint_golden.json"));
  return golden;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

class TinyVariant : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyVariant, EveryTensorMatchesPyTorch) {
  auto ckpt = Checkpoint::Open(TinyCheckpoint(GetParam()));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const json& tensors = Golden()["variants"][GetParam()]["tensors"];
  ASSERT_GT(tensors.size(), 50u);
  for (const auto& [name, g] : tensors.items()) {
    SCOPED_TRACE(name);
    auto info = (*ckpt)->Find(name);
    ASSERT_TRUE(info.ok()) << info.status();
    const std::vector<int64_t> shape = g["shape"].get<std::vector<int64_t>>();
    EXPECT_EQ((*info)->shape, shape);
    const std::string dtype = g["dtype"];
    EXPECT_EQ((*info)->dtype, dtype == "F32" ? DType::kF32 : dtype == "F16" ? DType::kF16 : DType::kBF16);

    auto values = (*ckpt)->LoadF32(name, shape);
    ASSERT_TRUE(values.ok()) << values.status();
    double sum = 0, abs_sum = 0;
    for (float v : *values) {
      sum += v;
      abs_sum += std::fabs(v);
    }
    const double tol = 1e-9 * std::max(1.0, g["abs_sum"].get<double>());
    EXPECT_NEAR(sum, g["sum"].get<double>(), tol);
    EXPECT_NEAR(abs_sum, g["abs_sum"].get<double>(), tol);
    const std::vector<double> first = g["first"];
    for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ((*values)[i], static_cast<float>(first[i])) << i;
  }
}

TEST_P(TinyVariant, ReadRowsMatchesPyTorchRows) {
  auto ckpt = Checkpoint::Open(TinyCheckpoint(GetParam()));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  int checked = 0;
  for (const auto& [name, g] : Golden()["variants"][GetParam()]["tensors"].items()) {
    if (!g.contains("rows")) continue;
    SCOPED_TRACE(name);
    const int64_t width = g["shape"][1];
    std::vector<int32_t> rows;
    std::vector<std::vector<double>> want;
    for (const auto& [row, values] : g["rows"].items()) {
      rows.push_back(std::stoi(row));
      want.push_back(values.get<std::vector<double>>());
    }
    std::reverse(rows.begin(), rows.end());  // any order, repeated rows allowed
    std::reverse(want.begin(), want.end());
    rows.push_back(rows.front());
    want.push_back(want.front());
    std::vector<float> out(rows.size() * width, NAN);
    ASSERT_TRUE((*ckpt)->ReadRowsF32(name, rows.data(), static_cast<int64_t>(rows.size()), out.data()).ok());
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int64_t c = 0; c < width; ++c) {
        ASSERT_EQ(out[r * width + c], static_cast<float>(want[r][c])) << "row " << rows[r] << " col " << c;
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

INSTANTIATE_TEST_SUITE_P(Tiny, TinyVariant, ::testing::Values("tiny-mha", "tiny-gqa-sharded"));

TEST(Checkpoint, ShardedTensorsKnowTheirShard) {
  const std::string dir = TinyCheckpoint("tiny-gqa-sharded");
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto layer = (*ckpt)->Find("language_model.model.layers.0.self_attn.k_proj.weight");
  ASSERT_TRUE(layer.ok());
  EXPECT_EQ((*layer)->file, dir + "/model-00001-of-00003.safetensors");
  auto vq = (*ckpt)->Find("gen_vision_model.decoder.conv_out.weight");
  ASSERT_TRUE(vq.ok());
  EXPECT_EQ((*vq)->file, dir + "/model-00003-of-00003.safetensors");
  EXPECT_EQ((*ckpt)->dir(), dir);
}

TEST(Checkpoint, MissingTensorNamesTensorAndDirectory) {
  const std::string dir = TinyCheckpoint("tiny-mha");
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_FALSE((*ckpt)->Has("language_model.model.layers.7.mlp.up_proj.weight"));
  auto values = (*ckpt)->LoadF32("language_model.model.layers.7.mlp.up_proj.weight", {160, 64});
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(values.status()), AllOf(HasSubstr(dir), HasSubstr("layers.7.mlp.up_proj.weight")));
}

TEST(Checkpoint, MisShapedLoadNamesFileTensorAndBothShapes) {
  auto ckpt = Checkpoint::Open(TinyCheckpoint("tiny-mha"));
  ASSERT_TRUE(ckpt.ok());
  auto values = (*ckpt)->LoadF32("gen_embed.weight", {64, 16});
  ASSERT_FALSE(values.ok());
  EXPECT_THAT(Message(values.status()), AllOf(HasSubstr("model.safetensors"), HasSubstr("gen_embed.weight"),
                                              HasSubstr("[64, 8]"), HasSubstr("[64, 16]")));
}

TEST(Checkpoint, ReadRowsRejectsBadRowAndNon2DTensor) {
  auto ckpt = Checkpoint::Open(TinyCheckpoint("tiny-mha"));
  ASSERT_TRUE(ckpt.ok());
  std::vector<float> out(64 * 2);
  const int32_t rows[2] = {3, 512};
  absl::Status s = (*ckpt)->ReadRowsF32("language_model.model.embed_tokens.weight", rows, 2, out.data());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr("embed_tokens.weight"), HasSubstr("row 512")));
  const int32_t negative[1] = {-1};
  EXPECT_FALSE((*ckpt)->ReadRowsF32("gen_embed.weight", negative, 1, out.data()).ok());
  s = (*ckpt)->ReadRowsF32("language_model.model.norm.weight", rows, 1, out.data());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr("norm.weight"), HasSubstr("2-D")));
}

TEST(Checkpoint, DirectoryWithoutWeightsNamesDirectory) {
  ScratchDir dir;
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(Message(ckpt.status()), AllOf(HasSubstr(dir.path()), HasSubstr("model.safetensors")));
  ckpt = Checkpoint::Open(dir.File("no-such-dir"));
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(Message(ckpt.status()), HasSubstr("no-such-dir"));
}

TEST(Checkpoint, TruncatedWeightsNameFileAndTensor) {
  ScratchDir dir;
  testing::CopyDir(TinyCheckpoint("tiny-mha"), dir.path());
  const std::string path = dir.File("model.safetensors");
  const std::string bytes = ReadBytes(path);
  WriteBytes(path, bytes.substr(0, bytes.size() / 2));
  auto ckpt = Checkpoint::Open(dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(Message(ckpt.status()), AllOf(HasSubstr(path), HasSubstr("tensor '"), HasSubstr("truncated")));
}

// --- sharded checkpoints --------------------------------------------------

class ShardedErrors : public ::testing::Test {
 protected:
  void SetUp() override { testing::CopyDir(TinyCheckpoint("tiny-gqa-sharded"), dir_.path()); }
  std::string Index() const { return dir_.File("model.safetensors.index.json"); }
  json ReadIndex() const { return json::parse(ReadBytes(Index())); }
  void WriteIndex(const json& j) const { WriteBytes(Index(), j.dump()); }
  absl::Status OpenStatus() const { return Checkpoint::Open(dir_.path()).status(); }

  ScratchDir dir_;
};

TEST_F(ShardedErrors, MissingShardNamesIndexShardAndTensor) {
  std::filesystem::remove(dir_.File("model-00002-of-00003.safetensors"));
  absl::Status s = OpenStatus();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(s),
              AllOf(HasSubstr(Index()), HasSubstr("model-00002-of-00003.safetensors"), HasSubstr("tensor '")));
}

TEST_F(ShardedErrors, MalformedIndexJsonNamesIndex) {
  WriteBytes(Index(), "{\"weight_map\": {\"a\": ");
  absl::Status s = OpenStatus();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr(Index()), HasSubstr("malformed JSON")));
}

TEST_F(ShardedErrors, IndexWithoutWeightMapNamesField) {
  WriteIndex({{"metadata", {{"total_size", 1}}}});
  absl::Status s = OpenStatus();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr(Index()), HasSubstr("weight_map")));
}

TEST_F(ShardedErrors, NonStringShardNamesTensor) {
  json index = ReadIndex();
  index["weight_map"]["gen_embed.weight"] = 3;
  WriteIndex(index);
  absl::Status s = OpenStatus();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr(Index()), HasSubstr("gen_embed.weight")));
}

TEST_F(ShardedErrors, ShardPathOutsideDirectoryIsRefused) {
  json index = ReadIndex();
  index["weight_map"]["gen_embed.weight"] = "../elsewhere.safetensors";
  WriteIndex(index);
  absl::Status s = OpenStatus();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr("gen_embed.weight"), HasSubstr("../elsewhere.safetensors")));
}

TEST_F(ShardedErrors, TensorMissingFromItsShardNamesTensorAndShard) {
  json index = ReadIndex();
  index["weight_map"]["language_model.model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00003.safetensors";
  WriteIndex(index);
  absl::Status s = OpenStatus();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr("layers.9.mlp.up_proj.weight"), HasSubstr("model-00001-of-00003")));
}

TEST_F(ShardedErrors, TensorInTheWrongShardNamesBoth) {
  json index = ReadIndex();
  index["weight_map"]["gen_embed.weight"] = "model-00001-of-00003.safetensors";  // it lives in shard 2
  WriteIndex(index);
  absl::Status s = OpenStatus();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr("gen_embed.weight"), HasSubstr("model-00001-of-00003"),
                                HasSubstr("model-00002-of-00003")));
}

TEST_F(ShardedErrors, TruncatedShardNamesShardAndTensor) {
  const std::string shard = dir_.File("model-00003-of-00003.safetensors");
  const std::string bytes = ReadBytes(shard);
  WriteBytes(shard, bytes.substr(0, bytes.size() - 1));
  absl::Status s = OpenStatus();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr(shard), HasSubstr("tensor 'gen_vision_model.")));
}

TEST_F(ShardedErrors, DuplicateTensorAcrossShardsNamesBothFiles) {
  // Copy one tensor of shard 1 into shard 2 as well.
  std::vector<testing::RawTensor> shard1 = testing::ReadAll(dir_.File("model-00001-of-00003.safetensors"));
  std::vector<testing::RawTensor> shard2 = testing::ReadAll(dir_.File("model-00002-of-00003.safetensors"));
  shard2.push_back(shard1.front());
  WriteBytes(dir_.File("model-00002-of-00003.safetensors"), testing::SafetensorsBytes(shard2));
  absl::Status s = OpenStatus();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), AllOf(HasSubstr(shard1.front().name), HasSubstr("model-00001-of-00003"),
                                HasSubstr("model-00002-of-00003")));
}

}  // namespace
}  // namespace argen::checkpoint
