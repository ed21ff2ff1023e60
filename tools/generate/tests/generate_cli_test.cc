// Runs the argen_generate binary: a tiny checkpoint gives a valid PNG of the
// model's image size; --size picks one of a Lumina-mGPT model's sizes (the
// PNG has that size), an unsupported size fails listing the sizes and a
// malformed one is bad usage; a bad model directory gives a clear message and
// a non-zero exit status.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "engine/image/png.h"
#include "engine/image/png_text.h"
#include "gtest/gtest.h"
#include "tests/support/lumina_sizes.h"

namespace {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

RunResult RunCommand(const std::string& args) {
  const std::string cmd = std::string(ARGEN_GENERATE_BINARY) + " " + args + " 2>&1";
  RunResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string SourceDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return dir ? dir : ".";
}

uint32_t BigEndian32(const std::vector<unsigned char>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | b[at + 3];
}

TEST(GenerateCliTest, WritesPngsOfTheModelImageSize) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("argen_generate_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const RunResult r = RunCommand("--model " + SourceDir() + "/tests/goldens/tiny/tiny-gqa-sharded" +
                                 " --prompt 'a red cube' --seed 3 --images 2 --top_k 40 --policy diagonal"
                                 " --sparsity 0.5 --out " +
                                 (dir / "img.png").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"img_0.png", "img_1.png"}) {
    std::ifstream in(dir / name, std::ios::binary);
    ASSERT_TRUE(in.good()) << name << "\n" << r.output;
    const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), {});
    ASSERT_GT(bytes.size(), 33u);
    const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    EXPECT_TRUE(std::equal(signature, signature + 8, bytes.begin())) << name;
    EXPECT_EQ(std::string(bytes.begin() + 12, bytes.begin() + 16), "IHDR");
    EXPECT_EQ(BigEndian32(bytes, 16), 32u) << "width";
    EXPECT_EQ(BigEndian32(bytes, 20), 32u) << "height";
    EXPECT_EQ(bytes[24], 8) << "bit depth";
    EXPECT_EQ(bytes[25], 2) << "colour type RGB";
    absl::StatusOr<argen::image::Rgb8Image> decoded = argen::image::DecodePng(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->rgb.size(), 32u * 32u * 3u);
    // The generation metadata, as PNG text chunks.
    absl::StatusOr<argen::image::TextEntries> text = argen::image::ReadPngText(std::string(bytes.begin(), bytes.end()));
    ASSERT_TRUE(text.ok()) << text.status();
    std::map<std::string, std::string> meta(text->begin(), text->end());
    EXPECT_EQ(meta["prompt"], "a red cube");
    EXPECT_EQ(meta["seed"], "3");
    EXPECT_EQ(meta["image_index"], std::string(name) == "img_0.png" ? "0" : "1");
    EXPECT_EQ(meta["policy"].rfind("diagonal sparsity=0.5 n_att=", 0), 0u) << meta["policy"];
    EXPECT_EQ(meta["guidance"], "5");
    EXPECT_EQ(meta["sampling"], "temperature=1 top_k=40 top_p=1");
    EXPECT_FALSE(meta["model"].empty());
    EXPECT_FALSE(meta["argen_version"].empty());
  }
  std::filesystem::remove_all(dir);
}

TEST(GenerateCliTest, SizePicksOneOfTheModelsSizes) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("argen_generate_size_" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  const std::filesystem::path model = argen::test_support::LuminaModelWithSizes(root, {{128, 64}, {64, 128}});
  const std::string out = (root / "tall.png").string();
  const RunResult r =
      RunCommand("--model " + model.string() + " --prompt 'a red cube' --size 64x128 --threads 2 --out " + out +
                 " --policy diagonal --sparsity 0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out, std::ios::binary);
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(bytes.size(), 33u) << r.output;
  EXPECT_EQ(BigEndian32(bytes, 16), 64u) << "width";
  EXPECT_EQ(BigEndian32(bytes, 20), 128u) << "height";
  // The policy recorded is the one resolved for this size's decode length: 8 rows of 4 codes + 7 breaks.
  absl::StatusOr<argen::image::TextEntries> text = argen::image::ReadPngText(std::string(bytes.begin(), bytes.end()));
  ASSERT_TRUE(text.ok()) << text.status();
  std::map<std::string, std::string> meta(text->begin(), text->end());
  EXPECT_NE(meta["policy"].find("l_dec=39"), std::string::npos) << meta["policy"];
  EXPECT_NE(r.output.find("39 tokens x 1 images"), std::string::npos) << r.output;

  // A size the model does not make: exit 1, the message lists the sizes.
  const RunResult unsupported =
      RunCommand("--model " + model.string() + " --prompt 'x' --size 96x96 --out " + (root / "no.png").string());
  EXPECT_EQ(unsupported.exit_code, 1) << unsupported.output;
  EXPECT_NE(unsupported.output.find("96x96"), std::string::npos) << unsupported.output;
  EXPECT_NE(unsupported.output.find("128x64"), std::string::npos) << unsupported.output;
  EXPECT_NE(unsupported.output.find("64x128"), std::string::npos) << unsupported.output;
  EXPECT_FALSE(std::filesystem::exists(root / "no.png"));
  // Not WxH at all: bad usage.
  const RunResult malformed =
      RunCommand("--model " + model.string() + " --prompt 'x' --size 64x --out " + (root / "bad.png").string());
  EXPECT_EQ(malformed.exit_code, 2) << malformed.output;
  EXPECT_NE(malformed.output.find("--size"), std::string::npos) << malformed.output;
  std::filesystem::remove_all(root);
}

// A path no other test or process writes (the shared /tmp once held a stale never.png).
std::string NeverWrittenPath() {
  return (std::filesystem::path(::testing::TempDir()) / ("argen_generate_never_" + std::to_string(::getpid()) + ".png"))
      .string();
}

TEST(GenerateCliTest, BadModelDirectoryFailsWithAMessage) {
  const std::string never = NeverWrittenPath();
  std::filesystem::remove(never);
  const RunResult r = RunCommand("--model /nonexistent/model-dir --prompt 'x' --out " + never);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent/model-dir"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(never));
}

TEST(GenerateCliTest, HelpAndVersion) {
  RunResult r = RunCommand("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--images INT=1"), std::string::npos) << r.output;  // defaults shown
  EXPECT_EQ(r.output.find("No flags matched"), std::string::npos) << r.output;
  r = RunCommand("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output.rfind("argen_generate ", 0), 0u) << r.output;
  r = RunCommand("--model m --prompt x --out o.png --bogus 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown flag --bogus"), std::string::npos) << r.output;
}

TEST(GenerateCliTest, MissingFlagsAreUsageErrors) {
  const RunResult r = RunCommand("--prompt 'x'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--model is required"), std::string::npos) << r.output;
}

// Issue 34: a negative seed is usage (it ran as 2^64 - 1); a sparse policy
// without a sparsity is refused naming --sparsity (it ran dense), as on the
// server; unset sampling flags are the family's defaults (Janus: cfg 5), and a
// negative prompt reaches the PNG's metadata.
TEST(GenerateCliTest, SeedPolicyAndSamplingDefaultsAsTheServer) {
  const std::string model = "--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha";
  RunResult r = RunCommand(model + " --prompt x --seed -1 --out " + NeverWrittenPath());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--seed"), std::string::npos) << r.output;
  r = RunCommand(model + " --prompt x --policy diagonal --out " + NeverWrittenPath());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--sparsity: diagonal is a sparse policy"), std::string::npos) << r.output;
  r = RunCommand(model + " --prompt x --policy diagnoal --sparsity 0.5 --out " + NeverWrittenPath());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("did you mean \"diagonal\""), std::string::npos) << r.output;

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("argen_generate_defaults_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  r = RunCommand(model + " -p 'a red cube' --negative-prompt 'a blue cube' --seed 3 -o " + (dir / "img.png").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir / "img.png", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  absl::StatusOr<argen::image::TextEntries> text = argen::image::ReadPngText(bytes);
  ASSERT_TRUE(text.ok()) << text.status();
  std::map<std::string, std::string> meta(text->begin(), text->end());
  EXPECT_EQ(meta["guidance"], "5");  // Janus-Pro's published cfg
  EXPECT_EQ(meta["negative_prompt"], "a blue cube");
  std::filesystem::remove_all(dir);
}

TEST(GenerateCliTest, BadSamplingParameterNamesTheField) {
  const RunResult r = RunCommand("--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha" +
                                 " --prompt 'x' --temperature -1 --out " + NeverWrittenPath());  // 0 is greedy
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("temperature"), std::string::npos) << r.output;
}

// --vq_precision is parsed where the engine parses it (engine/vq/vq_precision.h):
// a value it does not know is usage (exit 2), one the CPU decoder cannot run
// reaches the engine's message (exit 1).
TEST(GenerateCliTest, BadVqPrecisionIsUsage) {
  RunResult r = RunCommand("--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha" +
                           " --prompt 'x' --vq_precision fp16 --out " + NeverWrittenPath());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--vq_precision"), std::string::npos) << r.output;
  r = RunCommand("--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha" +
                 " --prompt 'x' --vq_backend cpu --vq_precision bf16 --out " + NeverWrittenPath());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("needs the GPU VQ decoder"), std::string::npos) << r.output;
}

// --kv-cache-dtype fp8 reaches the engine: the PNG's policy line is the
// engine's resolved policy (Prepare), which says fp8; a bad value is usage.
TEST(GenerateCliTest, KvCacheDtypeFp8ReachesTheEngine) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("argen_generate_fp8_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const RunResult r =
      RunCommand("--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha" +
                 " --prompt 'a red cube' --seed 3 --kv-cache-dtype fp8 --out " + (dir / "img.png").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("KV fp8"), std::string::npos) << r.output;
  std::ifstream in(dir / "img.png", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  absl::StatusOr<argen::image::TextEntries> text = argen::image::ReadPngText(bytes);
  ASSERT_TRUE(text.ok()) << text.status();
  std::map<std::string, std::string> meta(text->begin(), text->end());
  EXPECT_NE(meta["policy"].find(" kv_cache_dtype=fp8"), std::string::npos) << meta["policy"];
  std::filesystem::remove_all(dir);

  const RunResult bad = RunCommand("--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha" +
                                   " --prompt 'x' --kv-cache-dtype fp16 --out " + NeverWrittenPath());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--kv-cache-dtype"), std::string::npos) << bad.output;
}

// --weight-dtype fp8 reaches the engine: the same seed makes another image
// (the weights and GEMM inputs are rounded through e4m3); a bad value is usage.
TEST(GenerateCliTest, WeightDtypeFp8ReachesTheEngine) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("argen_generate_fp8w_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string model = "--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha --prompt 'a red cube' --seed 3";
  const RunResult fp8 = RunCommand(model + " --weight-dtype fp8 --out " + (dir / "fp8.png").string());
  ASSERT_EQ(fp8.exit_code, 0) << fp8.output;
  EXPECT_NE(fp8.output.find("weights fp8"), std::string::npos) << fp8.output;
  const RunResult plain = RunCommand(model + " --out " + (dir / "auto.png").string());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  auto read = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  const std::string a = read(dir / "auto.png"), b = read(dir / "fp8.png");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_NE(a, b) << "fp8 weights made the same image as auto";
  std::filesystem::remove_all(dir);

  const RunResult bad = RunCommand("--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha" +
                                   " --prompt 'x' --weight-dtype int4 --out " + NeverWrittenPath());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--weight-dtype"), std::string::npos) << bad.output;
}

}  // namespace

namespace {

// --parallel_window reaches the engine: a window runs (the tiny grid is 8
// wide), one past the row is refused naming parallel_window (exit 1), as is
// a window with a sparse policy.
TEST(GenerateCliTest, ParallelWindowReachesTheEngine) {
  const std::string model = "--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("argen_generate_pw_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const RunResult ok =
      RunCommand(model + " --prompt 'a red cube' --seed 3 --parallel_window 2 --out " + (dir / "img.png").string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "img.png"));
  std::filesystem::remove_all(dir);
  for (const char* bad :
       {" --parallel_window 9", " --parallel_window -1", " --policy h2o --sparsity 0.5 --parallel_window 2"}) {
    const RunResult r = RunCommand(model + " --prompt 'x'" + bad + " --out " + NeverWrittenPath());
    EXPECT_EQ(r.exit_code, 1) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("parallel_window: "), std::string::npos) << r.output;
  }
}

// --speculative_window reaches the engine: a window runs and reports its
// steps and drafts; bad windows are refused naming speculative_window (exit 1),
// as are a sparse policy and parallel decoding with it.
TEST(GenerateCliTest, SpeculativeWindowReachesTheEngine) {
  const std::string model = "--model " + SourceDir() + "/tests/goldens/tiny/tiny-mha";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("argen_generate_sw_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const RunResult ok =
      RunCommand(model + " --prompt 'a red cube' --seed 3 --speculative_window 4 --out " + (dir / "img.png").string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "img.png"));
  EXPECT_NE(ok.output.find("speculative decoding: "), std::string::npos) << ok.output;
  std::filesystem::remove_all(dir);
  for (const char* bad :
       {" --speculative_window 33", " --speculative_window -1",
        " --policy diagonal --sparsity 0.5 --speculative_window 2", " --parallel_window 2 --speculative_window 2"}) {
    const RunResult r = RunCommand(model + " --prompt 'x'" + bad + " --out " + NeverWrittenPath());
    EXPECT_EQ(r.exit_code, 1) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("speculative_window: "), std::string::npos) << r.output;
  }
}

}  // namespace
