// The registry recognises a NextStep-1 checkpoint and loads it as a
// continuous-token model (its size from config.json's latent_size, a token
// head, the VAE decoder on the CPU), checking its whole published layout
// first; the GPU VAE decoder is refused with UNIMPLEMENTED.
#include <filesystem>
#include <fstream>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/registry.h"
#include "engine/vq/vq_precision.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::nextstep {
namespace {

namespace fs = std::filesystem;
using test_support::SourceDir;

const std::string kDir = SourceDir() + "/tests/goldens/tiny/tiny-nextstep";

TEST(NextStepFamilyTest, TinyCheckpointLoadsAsAContinuousTokenModel) {
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(kDir, {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->family, "nextstep");
  EXPECT_TRUE(m->spec.vector_tokens());
  EXPECT_EQ(m->token_grid, 3);  // config.json's latent_size
  EXPECT_EQ(m->image_tokens, 9);
  EXPECT_EQ(m->image_size, 12);  // 3 tokens of patch 2 through a 2x VAE
  EXPECT_TRUE(m->forced_tokens.empty());
  ASSERT_TRUE(m->make_token_head);
  ASSERT_TRUE(m->make_decoder);
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(kDir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<std::shared_ptr<const model::TokenHead>> head = m->make_token_head(**ckpt);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ((*head)->token_dim(), m->spec.output.token_dim);
  // The GPU VAE decoder (nextstep_vae_cuda_test, label gpu) is made where a
  // CUDA build finds a device; elsewhere it is a start-up error saying why (no
  // CUDA in the build: UNIMPLEMENTED; no device: FAILED_PRECONDITION).
  absl::StatusOr<model::ImageDecoder> gpu = m->make_decoder(**ckpt, {.gpu = true});
  if (!gpu.ok()) {
    EXPECT_TRUE(gpu.status().code() == absl::StatusCode::kUnimplemented ||
                gpu.status().code() == absl::StatusCode::kFailedPrecondition)
        << gpu.status();
  }
  // It has no bf16 path: refused by name wherever it runs.
  absl::StatusOr<model::ImageDecoder> bf16 =
      m->make_decoder(**ckpt, {.gpu = true, .precision = vq::DecoderPrecision::kBf16});
  ASSERT_FALSE(bf16.ok());
  EXPECT_EQ(bf16.status().code(), absl::StatusCode::kUnimplemented) << bf16.status();
}

TEST(NextStepFamilyTest, UnknownFamilyOptionIsNamed) {
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(kDir, {{"vqgan_dir", "x"}});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("vqgan_dir"), std::string::npos) << m.status();
}

TEST(NextStepFamilyTest, ABrokenLayoutIsNamed) {
  const fs::path dir = fs::temp_directory_path() / "argen-nextstep-family-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "tokenizer.json"}) fs::copy_file(fs::path(kDir) / f, dir / f);
  // No vae/ directory.
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(dir.string(), {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound) << m.status();
  EXPECT_NE(m.status().message().find("vae/config.json"), std::string::npos) << m.status();
  // A config id that is not the tokenizer's.
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  config["boi"] = config["eoi"];
  std::ofstream(dir / "config.json") << config.dump();
  m = families::LoadFamilyModel(dir.string(), {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("boi"), std::string::npos) << m.status();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace argen::nextstep
