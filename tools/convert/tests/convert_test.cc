// argen_convert: PyTorch checkpoints (torch.save goldens, the official .bin
// layout, Lightning) become safetensors that read back to the same bytes;
// sharding, copied files, refusals and the CLI's exit codes.
#include "tools/convert/convert.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_join.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/dtype.h"
#include "engine/checkpoint/tests/test_files.h"
#include "engine/checkpoint/tests/torch_writer.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/checkpoint/zip_archive.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::convert {
namespace {

namespace fs = std::filesystem;
using checkpoint::testing::ReadBytes;
using checkpoint::testing::ScratchDir;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Goldens() { return checkpoint::testing::SourceDir() + "/tests/goldens/torch"; }
std::string Message(const absl::Status& s) { return std::string(s.message()); }

// Every tensor of `a` has the same name, dtype, shape and bytes in `b`.
void ExpectSameTensors(const std::string& a_dir, const std::string& b_dir, size_t expected_count) {
  auto a = checkpoint::OpenModelWeights(a_dir);
  auto b = checkpoint::Checkpoint::Open(b_dir);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  size_t n = 0;
  for (const auto& f : *a) {
    for (size_t i = 0; i < f->size(); ++i, ++n) {
      SCOPED_TRACE(f->name(i));
      auto want = f->Tensor(i);
      auto got = (*b)->Find(f->name(i));
      ASSERT_TRUE(want.ok() && got.ok());
      EXPECT_EQ((*got)->dtype, (*want)->dtype);
      EXPECT_EQ((*got)->shape, (*want)->shape);
      ASSERT_EQ((*got)->nbytes, (*want)->nbytes);
      EXPECT_EQ(std::string_view(static_cast<const char*>((*got)->data), (*got)->nbytes),
                std::string_view(static_cast<const char*>((*want)->data), (*want)->nbytes));
    }
  }
  EXPECT_EQ(n, expected_count);
}

TEST(Convert, TorchGoldensBecomeOneSafetensorsFileWithTheSameTensors) {
  ScratchDir out;
  auto report = Convert({Goldens() + "/sharded", out.path()});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->tensors, 16);
  EXPECT_THAT(report->shards, ::testing::ElementsAre("model.safetensors"));
  EXPECT_TRUE(report->copied.empty());
  ExpectSameTensors(Goldens() + "/sharded", out.path(), 16);
  // F64 and I64 are written as the F32 values the Checkpoint API gives (argen reads F32 / F16 / BF16 safetensors).
  auto ckpt = checkpoint::Checkpoint::Open(out.path());
  EXPECT_EQ((*(*ckpt)->Find("gen_vision_model.decoder.norm_out.num_batches_tracked"))->dtype, checkpoint::DType::kF32);
  EXPECT_EQ((*(*ckpt)->Find("language_model.model.layers.0.self_attn.q_proj.weight"))->dtype, checkpoint::DType::kBF16);
}

TEST(Convert, SmallShardSizeWritesShardsAndAnIndex) {
  ScratchDir out;
  auto report = Convert({Goldens() + "/state", out.path(), 300});
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_GT(report->shards.size(), 3u);
  EXPECT_EQ(report->shards.back(), "model.safetensors.index.json");
  EXPECT_THAT(report->shards.front(), ::testing::MatchesRegex("model-00001-of-000[0-9][0-9].safetensors"));
  const json index = json::parse(ReadBytes(out.File("model.safetensors.index.json")));
  EXPECT_EQ(index["weight_map"].size(), 16u);
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), report->bytes);
  for (const std::string& s : report->shards) {
    if (s == "model.safetensors.index.json") continue;
    EXPECT_LE(fs::file_size(out.File(s)), 300u + 1024u) << s;  // data <= 300 bytes unless one tensor is larger
  }
  ExpectSameTensors(Goldens() + "/state", out.path(), 16);
}

TEST(Convert, OfficialBinLayoutKeepsItsOtherFiles) {
  ScratchDir in, out;
  const std::string tiny = checkpoint::testing::TinyCheckpoint("tiny-mha");
  auto tensors = checkpoint::testing::ReadAll(tiny + "/model.safetensors");
  checkpoint::testing::WriteTorchCheckpointDir(tensors, tiny, in.path(), 2);
  auto report = Convert({in.path(), out.path()});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->copied, ::testing::UnorderedElementsAre("config.json", "tokenizer.json"));
  EXPECT_EQ(ReadBytes(out.File("config.json")), ReadBytes(tiny + "/config.json"));
  ExpectSameTensors(tiny, out.path(), tensors.size());
}

TEST(Convert, LightningCheckpointWritesItsStateDictAndListsTheRest) {
  ScratchDir out;
  auto report = Convert({Goldens() + "/lightning_v1.ckpt", out.path()});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->tensors, 16);
  EXPECT_THAT(absl::StrJoin(report->skipped, "\n"),
              AllOf(HasSubstr("optimizer_states"), HasSubstr("pytorch_lightning.callbacks.model_checkpoint")));
}

TEST(Convert, InPlaceConversionIsPreferredOnTheNextOpen) {
  ScratchDir dir;
  checkpoint::testing::CopyDir(Goldens() + "/state", dir.path());
  ASSERT_TRUE(Convert({dir.path(), dir.path()}).ok());
  auto ckpt = checkpoint::Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ((*(*ckpt)->Find("gen_embed.weight"))->file, dir.File("model.safetensors"));
}

TEST(Convert, ExistingWeightsNeedForce) {
  ScratchDir out;
  ASSERT_TRUE(Convert({Goldens() + "/state", out.path(), 300}).ok());
  auto again = Convert({Goldens() + "/state", out.path()});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(Message(again.status()), HasSubstr("--force"));
  ConvertOptions forced{Goldens() + "/state", out.path()};
  forced.force = true;
  ASSERT_TRUE(Convert(forced).ok());
  // The old shards are gone: only the new single file remains.
  int weights = 0;
  for (const auto& e : fs::directory_iterator(out.path())) weights += e.path().extension() == ".safetensors";
  EXPECT_EQ(weights, 1);
  ExpectSameTensors(Goldens() + "/state", out.path(), 16);
}

TEST(Convert, CorruptStorageFailsNamingTheTensorAndLeavesNoWeights) {
  ScratchDir in, out;
  std::string bytes = ReadBytes(Goldens() + "/state/pytorch_model.bin");
  auto zip = checkpoint::ZipArchive::Parse("x", reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  ASSERT_TRUE(zip.ok());
  bytes[zip->Find("pytorch_model/data/2")->data_offset] ^= 0x40;
  checkpoint::testing::WriteBytes(in.File("pytorch_model.bin"), bytes);
  auto report = Convert({in.path(), out.path()});
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(report.status()), AllOf(HasSubstr("q_proj.weight"), HasSubstr("CRC-32")));
  EXPECT_TRUE(fs::is_empty(out.path()));
}

TEST(Convert, BadInputsAreErrors) {
  ScratchDir out;
  EXPECT_EQ(Convert({out.File("missing"), out.path()}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(Convert({Goldens() + "/legacy.bin", out.path()}).status()), HasSubstr("legacy"));
  EXPECT_FALSE(Convert({"", out.path()}).ok());
}

TEST(ParseByteSize, UnitsAndMalformedValues) {
  EXPECT_EQ(ParseByteSize("5GB"), 5'000'000'000u);
  EXPECT_EQ(ParseByteSize("500mb"), 500'000'000u);
  EXPECT_EQ(ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(ParseByteSize("1000"), 1000u);
  EXPECT_EQ(ParseByteSize("12KB"), 12'000u);
  EXPECT_EQ(ParseByteSize("GB"), 0u);
  EXPECT_EQ(ParseByteSize("5 GB"), 0u);
  EXPECT_EQ(ParseByteSize("5TB"), 0u);
  EXPECT_EQ(ParseByteSize(""), 0u);
}

int RunCli(const std::string& args) {
  const int rc = std::system((std::string(ARGEN_CONVERT_BIN) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(ConvertCli, ExitCodes) {
  ScratchDir out;
  EXPECT_EQ(RunCli("--out " + out.path()), 2);
  EXPECT_EQ(RunCli("--in x --out " + out.path() + " --max_shard_size lots"), 2);
  EXPECT_EQ(RunCli("--in " + out.File("missing") + " --out " + out.path()), 1);
  EXPECT_EQ(RunCli("--in " + Goldens() + "/state --out " + out.path() + " --max_shard_size 1KB"), 0);
  EXPECT_TRUE(fs::exists(out.File("model.safetensors.index.json")));
}

}  // namespace
}  // namespace argen::convert
