// The LlamaGen text-to-image family (tests/goldens/tiny/tiny-llamagen-t2i,
// made by tools/goldens/make_llamagen_t2i_goldens.py from the official code):
// the published layout's rules (t2i_<size>_stage<k>_<px>.pt, vq_ds16_t2i.pt,
// the T5 directory and what is missing).
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine/families/llamagen/llamagen_config.h"
#include "gtest/gtest.h"
#include "tests/support/golden_files.h"

namespace argen::llamagen {
namespace {

namespace fs = std::filesystem;
using test_support::SourceDir;

std::string Dir() { return SourceDir() + "/tests/goldens/tiny/tiny-llamagen-t2i"; }

TEST(LlamaGenT2iConfigTest, TinyConfigIsTextConditional) {
  absl::StatusOr<LlamaGenConfig> c = LoadLlamaGenConfig(Dir());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->text_conditional);
  EXPECT_EQ(c->gpt_file, "t2i_tiny.pt");
  EXPECT_EQ(c->vq_file, "vq_ds16_t2i.pt");
  EXPECT_EQ(c->cls_token_num, 120);
  EXPECT_EQ(c->caption_dim, 32);
  EXPECT_EQ(c->t5_dir, Dir() + "/flan-t5-tiny");
  EXPECT_EQ(c->grid(), 5);
  EXPECT_TRUE(IsT2iFileName("t2i_XL_stage1_256.pt"));
  EXPECT_TRUE(IsT2iFileName("t2i_XL_stage2_512.pt"));
  EXPECT_FALSE(IsT2iFileName("t2i_XL_512.pt"));
  EXPECT_FALSE(IsC2iFileName("t2i_XL_stage2_512.pt"));
}

// The published layout: the file name gives GPT-XL at 512 px and t2i, the VQ
// file is vq_ds16_t2i.pt, and the T5 encoder is looked for in
// t5-ckpt/flan-t5-xl (the repository's pretrained_models layout) or
// flan-t5-xl; each missing piece is named.
TEST(LlamaGenT2iConfigTest, PublishedNamesAndEveryMissingFileIsNamed) {
  const fs::path dir = fs::temp_directory_path() / ("llamagen_t2i_layout_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(Dir() + "/t2i_tiny.pt", dir / "t2i_XL_stage2_512.pt");
  absl::StatusOr<LlamaGenConfig> c = LoadLlamaGenConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("vq_ds16_t2i.pt is missing"), std::string::npos) << c.status();
  fs::copy_file(Dir() + "/vq_ds16_t2i.pt", dir / "vq_ds16_t2i.pt");
  c = LoadLlamaGenConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("the T5 text encoder is missing"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("t5-ckpt/flan-t5-xl"), std::string::npos) << c.status();
  fs::create_directories(dir / "t5-ckpt");
  fs::copy(Dir() + "/flan-t5-tiny", dir / "t5-ckpt" / "flan-t5-xl");
  fs::remove(dir / "t5-ckpt" / "flan-t5-xl" / "spiece.model");
  c = LoadLlamaGenConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("spiece.model is missing"), std::string::npos) << c.status();
  fs::copy_file(Dir() + "/flan-t5-tiny/spiece.model", dir / "t5-ckpt" / "flan-t5-xl" / "spiece.model");
  c = LoadLlamaGenConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->text_conditional);
  EXPECT_EQ(c->gpt_model, "GPT-XL");
  EXPECT_EQ(c->dim, 1280);
  EXPECT_EQ(c->n_layer, 36);
  EXPECT_EQ(c->n_head, 20);
  EXPECT_EQ(c->ffn_hidden, 3584);
  EXPECT_EQ(c->grid(), 32);  // 512 px / 16
  EXPECT_EQ(c->cls_token_num, 120);
  EXPECT_EQ(c->t5_dir, (dir / "t5-ckpt" / "flan-t5-xl").string());
  // The family option t5_dir points elsewhere.
  c = LoadLlamaGenConfig(dir.string(), Dir() + "/flan-t5-tiny");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->t5_dir, Dir() + "/flan-t5-tiny");
  // A c2i and a t2i file side by side: which one is ambiguous.
  fs::copy_file(SourceDir() + "/tests/goldens/tiny/tiny-llamagen-c2i/c2i_tiny.pt", dir / "c2i_B_256.pt");
  c = LoadLlamaGenConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("found c2i_B_256.pt, t2i_XL_stage2_512.pt"), std::string::npos) << c.status();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace argen::llamagen
