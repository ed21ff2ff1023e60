// The engine makes the same images from a checkpoint in the official .bin
// layout (pytorch_model-0000N-of-00002.bin + pytorch_model.bin.index.json, as
// deepseek-ai/Janus-Pro-7B ships; or one pytorch_model.bin as Janus-Pro-1B)
// as from the safetensors form of the same weights: identical tokens and
// identical PNG bytes for the same seed on the CPU backend.
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/tests/test_files.h"
#include "engine/checkpoint/tests/torch_writer.h"
#include "engine/engine.h"
#include "engine/image/png.h"
#include "gtest/gtest.h"

namespace argen {
namespace {

using checkpoint::testing::RawTensor;

// Every tensor of tiny-mha as stored (mixed BF16 / F16 / F32).
std::vector<RawTensor> TinyTensors() {
  return checkpoint::testing::ReadAll(checkpoint::testing::TinyCheckpoint("tiny-mha") + "/model.safetensors");
}

struct Result {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> pngs;
};

Result Generate(const std::string& dir) {
  Result out;
  engine::EngineOptions options;
  options.model_dir = dir;
  options.backend = "cpu";
  options.threads = 1;
  auto engine = engine::CreateEngine(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return out;
  engine::GenerationRequest request;
  request.prompt = "a photo of a red cat on a hill";
  request.num_images = 2;
  request.sampling.seed = 11;
  auto prepared = (*engine)->Prepare(request);
  EXPECT_TRUE(prepared.ok()) << prepared.status();
  auto id = (*engine)->Add(*prepared);
  EXPECT_TRUE(id.ok());
  for (int step = 0; step < 1000; ++step) {
    auto report = (*engine)->Step();
    EXPECT_TRUE(report.ok()) << report.status();
    if (!report.ok() || !report->finished.empty()) break;
  }
  auto state = (*engine)->State(*id);
  EXPECT_TRUE(state.ok() && state->finished);
  out.tokens = state->tokens;
  auto images = (*engine)->DecodeImages(state->tokens);
  EXPECT_TRUE(images.ok()) << images.status();
  for (const engine::RgbImage& image : *images) {
    auto png = image::EncodePng(image.rgb, image.width, image.height);
    EXPECT_TRUE(png.ok());
    out.pngs.push_back(*png);
  }
  return out;
}

class OfficialBinLayout : public ::testing::TestWithParam<int> {};

TEST_P(OfficialBinLayout, SameImagesAsTheSafetensorsForm) {
  checkpoint::testing::ScratchDir dir;
  const std::string source = checkpoint::testing::TinyCheckpoint("tiny-mha");
  checkpoint::testing::WriteTorchCheckpointDir(TinyTensors(), source, dir.path(), GetParam());
  // The directory really is the .bin layout, read through the .bin reader.
  auto ckpt = checkpoint::Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const std::string file = (*(*ckpt)->Find("gen_embed.weight"))->file;
  EXPECT_NE(file.find(GetParam() == 1 ? "pytorch_model.bin" : "-of-0000"), std::string::npos) << file;

  const Result from_bin = Generate(dir.path());
  const Result from_safetensors = Generate(source);
  ASSERT_EQ(from_bin.tokens.size(), 2u);
  EXPECT_EQ(from_bin.tokens, from_safetensors.tokens);
  ASSERT_EQ(from_bin.pngs.size(), 2u);
  EXPECT_EQ(from_bin.pngs, from_safetensors.pngs);
  EXPECT_NE(from_bin.pngs[0], from_bin.pngs[1]);  // two draws, not one image twice
}

INSTANTIATE_TEST_SUITE_P(Layouts, OfficialBinLayout, ::testing::Values(1, 2),
                         [](const auto& info) { return info.param == 1 ? "Single" : "TwoShards"; });

}  // namespace
}  // namespace argen
