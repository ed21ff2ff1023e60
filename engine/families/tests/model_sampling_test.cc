// A checkpoint's own sampling defaults (config.json "argen_sampling_defaults",
// engine/families/model_sampling.h): applied over the family's, absent key
// changes nothing, bad values are errors naming the field; the shipped model
// states the cfg 3 it was tuned for (docs/model.md), the tiny ones nothing.
#include "engine/families/model_sampling.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/families/registry.h"

namespace argen::families {
namespace {

namespace fs = std::filesystem;

std::string SourceDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return dir ? dir : ".";
}

fs::path ConfigDir(const std::string& name, const std::string& json) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("argen_model_sampling_" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << json;
  return dir;
}

TEST(CheckpointSamplingDefaultsTest, AppliedOverTheFamilysOnlyWhereStated) {
  engine::SamplingParams d;  // Janus-Pro's published: cfg 5, temperature 1, top_k 0, top_p 1
  ASSERT_TRUE(ApplyCheckpointSamplingDefaults(ConfigDir("none", R"({"model_type": "x"})").string(), d).ok());
  EXPECT_FLOAT_EQ(d.cfg_weight, 5);
  ASSERT_TRUE(ApplyCheckpointSamplingDefaults(
                  ConfigDir("some", R"({"argen_sampling_defaults": {"cfg_weight": 3, "top_k": 40}})").string(), d)
                  .ok());
  EXPECT_FLOAT_EQ(d.cfg_weight, 3);
  EXPECT_EQ(d.top_k, 40);
  EXPECT_FLOAT_EQ(d.temperature, 1);
  EXPECT_FLOAT_EQ(d.top_p, 1);
  for (const auto& [json, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"argen_sampling_defaults": 3})", "argen_sampling_defaults'"},
           {R"({"argen_sampling_defaults": {"cfg": 3}})", "argen_sampling_defaults.cfg'"},
           {R"({"argen_sampling_defaults": {"cfg_weight": -1}})", "argen_sampling_defaults.cfg_weight'"},
           {R"({"argen_sampling_defaults": {"top_p": 0}})", "argen_sampling_defaults.top_p'"},
           {R"({"argen_sampling_defaults": {"top_k": 1.5}})", "argen_sampling_defaults.top_k'"}}) {
    engine::SamplingParams before;
    const absl::Status s = ApplyCheckpointSamplingDefaults(ConfigDir("bad", json).string(), before);
    ASSERT_FALSE(s.ok()) << json;
    EXPECT_NE(s.message().find(field), std::string::npos) << s;
    EXPECT_FLOAT_EQ(before.cfg_weight, 5) << json;  // unchanged on error
  }
}

TEST(CheckpointSamplingDefaultsTest, TheShippedModelStatesItsCfg) {
  absl::StatusOr<FamilyModel> shipped = LoadFamilyModel(SourceDir() + "/models/argen-scenes-v1");
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_FLOAT_EQ(shipped->default_sampling.cfg_weight, 3);
  absl::StatusOr<FamilyModel> tiny = LoadFamilyModel(SourceDir() + "/tests/goldens/tiny/tiny-mha");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_FLOAT_EQ(tiny->default_sampling.cfg_weight, 5);  // the family's
}

}  // namespace
}  // namespace argen::families
