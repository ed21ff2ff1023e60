// The registry recognises a NextStep-1 checkpoint, checks its whole published
// layout, and refuses to serve it with UNIMPLEMENTED (no vector-token decode
// loop in the engine yet) rather than calling it unknown.
#include <filesystem>
#include <fstream>

#include "engine/families/registry.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::nextstep {
namespace {

namespace fs = std::filesystem;
using test_support::SourceDir;

const std::string kDir = SourceDir() + "/tests/goldens/tiny/tiny-nextstep";

TEST(NextStepFamilyTest, TinyCheckpointIsRecognisedAndRefusedAsNotYetServable) {
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(kDir, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented) << m.status();
  EXPECT_NE(m.status().message().find("NextStep-1"), std::string::npos) << m.status();
}

TEST(NextStepFamilyTest, UnknownFamilyOptionIsNamed) {
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(kDir, {{"vqgan_dir", "x"}});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("vqgan_dir"), std::string::npos) << m.status();
}

TEST(NextStepFamilyTest, ABrokenLayoutIsNamedBeforeTheRefusal) {
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
