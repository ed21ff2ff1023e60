// Runs the argen_sweep binary on the tiny checkpoint: 2 prompts x 1 image x
// (dense, diagonal at 0 and 50%). Checks the folder layout, valid PNGs of the
// model's size, the manifest (counts, the same seeds for every
// configuration), determinism (dense == diagonal at 0%, and the same bytes
// whatever the batch size), --resume, --n-recent, --size (on a Lumina-format
// model with two sizes), exit status 2 for bad arguments, and --format
// geneval / dpg (the official evaluators' layouts).
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
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/lumina_sizes.h"

namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

RunResult RunSweep(const std::string& args) {
  const std::string cmd = std::string(ARGEN_SWEEP_BINARY) + " " + args + " 2>&1";
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

std::string TinyModel() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return std::string(dir ? dir : ".") + "/tests/goldens/tiny/tiny-mha";
}

std::string ReadBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::vector<nlohmann::json> ReadManifest(const fs::path& p) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

class SweepCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("argen_sweep_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "prompts.jsonl")
        << R"({"tag": "colors", "prompt": "a photo of a red circle", "include": [{"class": "circle", "count": 1, "color": "red"}]})"
        << "\n"
        << R"({"tag": "counting", "prompt": "a photo of two squares", "include": [{"class": "square", "count": 2}]})"
        << "\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Args(const fs::path& out, const std::string& extra = "") const {
    return "--model " + TinyModel() + " --prompts " + (dir_ / "prompts.jsonl").string() + " --out " + out.string() +
           " --images-per-prompt 1 --policies dense,diagonal --sparsities 0,50 --threads 1" + " --seed 5 --top_k 20 " +
           extra;
  }

  fs::path dir_;
};

TEST_F(SweepCliTest, WritesEveryConfigurationWithPairedSeeds) {
  const fs::path out = dir_ / "out";
  const RunResult r = RunSweep(Args(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const std::vector<std::string> configs = {"dense_0", "diagonal_0", "diagonal_50"};
  for (const std::string& c : configs) {
    for (const char* name : {"0000_0.png", "0001_0.png"}) {
      const std::string bytes = ReadBytes(out / c / name);
      ASSERT_FALSE(bytes.empty()) << c << "/" << name << "\n" << r.output;
      absl::StatusOr<argen::image::Rgb8Image> img = argen::image::DecodePng(
          absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
      ASSERT_TRUE(img.ok()) << c << "/" << name << ": " << img.status();
      EXPECT_EQ(img->width, 32);
      EXPECT_EQ(img->height, 32);
    }
    EXPECT_EQ(std::distance(fs::directory_iterator(out / c), fs::directory_iterator{}), 2) << c;
  }

  const std::vector<nlohmann::json> manifest = ReadManifest(out / "manifest.jsonl");
  ASSERT_EQ(manifest.size(), 6u) << r.output;
  std::map<int, std::vector<uint64_t>> seeds_by_prompt;
  std::map<std::string, int> images_by_config;
  for (const nlohmann::json& e : manifest) {
    const std::string config = e.at("config");
    ++images_by_config[config];
    seeds_by_prompt[e.at("prompt_index").get<int>()].push_back(e.at("seed").get<uint64_t>());
    EXPECT_TRUE(fs::is_regular_file(out / e.at("path").get<std::string>())) << e.dump();
    EXPECT_EQ(e.at("image").get<int>(), 0);
    EXPECT_GT(e.at("decode_s").get<double>(), 0.0);
    const int prompt = e.at("prompt_index").get<int>();
    EXPECT_EQ(e.at("tag").get<std::string>(), prompt == 0 ? "colors" : "counting");
    if (config == "diagonal_50") {
      EXPECT_EQ(e.at("policy").get<std::string>(), "diagonal");
      EXPECT_DOUBLE_EQ(e.at("sparsity").get<double>(), 50.0);
    }
  }
  for (const std::string& c : configs) EXPECT_EQ(images_by_config[c], 2) << c;
  ASSERT_EQ(seeds_by_prompt.size(), 2u);
  for (const auto& [prompt, seeds] : seeds_by_prompt) {
    ASSERT_EQ(seeds.size(), 3u);
    for (uint64_t s : seeds) EXPECT_EQ(s, 5u + prompt) << "prompt " << prompt;
  }

  // Diagonal at 0% attends every key: the same images as dense.
  for (const char* name : {"0000_0.png", "0001_0.png"}) {
    EXPECT_EQ(ReadBytes(out / "dense_0" / name), ReadBytes(out / "diagonal_0" / name)) << name;
  }

  // One request at a time (max 2 rows) gives the same bytes as the batched run.
  const fs::path serial = dir_ / "serial";
  const RunResult r2 = RunSweep(Args(serial, "--max-batch-rows 2"));
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  for (const std::string& c : configs) {
    for (const char* name : {"0000_0.png", "0001_0.png"}) {
      EXPECT_EQ(ReadBytes(out / c / name), ReadBytes(serial / c / name)) << c << "/" << name;
    }
  }
}

// The wave-3 code models in their published layouts: LlamaGen c2i (class-
// conditional: prompt p asks for class p mod 10, recorded in the manifest,
// and a negative prompt is refused naming the flag) and Anole (Meta layout,
// 32 x 32 codes) run every configuration of the grid.
TEST_F(SweepCliTest, LlamaGenClassModelAndAnoleRunTheGrid) {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  const std::string tiny = std::string(src ? src : ".") + "/tests/goldens/tiny/";
  const std::string common = " --prompts " + (dir_ / "prompts.jsonl").string() +
                             " --images-per-prompt 1 --policies dense,diagonal --sparsities 0,50 --threads 1 --seed 5";
  const fs::path c2i = dir_ / "c2i";
  const RunResult r = RunSweep("--model " + tiny + "tiny-llamagen-c2i --out " + c2i.string() + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> manifest = ReadManifest(c2i / "manifest.jsonl");
  ASSERT_EQ(manifest.size(), 6u) << r.output;
  for (const nlohmann::json& e : manifest) {
    EXPECT_EQ(e.at("class_id").get<int>(), e.at("prompt_index").get<int>() % 10) << e.dump();
    const std::string bytes = ReadBytes(c2i / e.at("path").get<std::string>());
    absl::StatusOr<argen::image::Rgb8Image> img = argen::image::DecodePng(
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    ASSERT_TRUE(img.ok()) << e.dump() << ": " << img.status();
    EXPECT_EQ(img->width, 20);
  }
  const RunResult negative = RunSweep("--model " + tiny + "tiny-llamagen-c2i --out " + (dir_ / "neg").string() +
                                      common + " --negative-prompt blurry");
  EXPECT_EQ(negative.exit_code, 2) << negative.output;
  EXPECT_NE(negative.output.find("--negative-prompt: model"), std::string::npos) << negative.output;

  const fs::path anole = dir_ / "anole";
  const RunResult a = RunSweep("--model " + tiny + "tiny-anole-meta --out " + anole.string() + common);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const std::vector<nlohmann::json> anole_manifest = ReadManifest(anole / "manifest.jsonl");
  ASSERT_EQ(anole_manifest.size(), 6u) << a.output;
  for (const nlohmann::json& e : anole_manifest) {
    EXPECT_FALSE(e.contains("class_id")) << e.dump();
    EXPECT_TRUE(fs::is_regular_file(anole / e.at("path").get<std::string>())) << e.dump();
  }
}

TEST_F(SweepCliTest, ResumeRunsOnlyWhatIsMissing) {
  const fs::path out = dir_ / "out";
  ASSERT_EQ(RunSweep(Args(out)).exit_code, 0);
  const std::string before = ReadBytes(out / "diagonal_50" / "0001_0.png");

  RunResult r = RunSweep(Args(out, "--resume"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0 requests to run, 6 already done"), std::string::npos) << r.output;
  EXPECT_EQ(ReadManifest(out / "manifest.jsonl").size(), 6u);

  fs::remove(out / "diagonal_50" / "0001_0.png");
  r = RunSweep(Args(out, "--resume"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 requests to run, 5 already done"), std::string::npos) << r.output;
  EXPECT_EQ(ReadBytes(out / "diagonal_50" / "0001_0.png"), before);
  EXPECT_EQ(ReadManifest(out / "manifest.jsonl").size(), 6u);

  // Other sampling settings into the same folder are refused.
  r = RunSweep(Args(out, "--resume --cfg 2"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("\"cfg\""), std::string::npos) << r.output;
}

TEST_F(SweepCliTest, ADeadlineStopsCleanlyAndResumeFinishes) {
  // A deadline that passes while the model loads: nothing is admitted, exit 0
  // with the count left; --resume then runs everything.
  const fs::path out = dir_ / "out";
  RunResult r = RunSweep(Args(out, "--deadline-seconds 0.000001"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stopped at deadline, 6 requests left"), std::string::npos) << r.output;
  EXPECT_EQ(ReadManifest(out / "manifest.jsonl").size(), 0u);
  r = RunSweep(Args(out, "--resume --deadline-seconds 600 --image-threads 3 --png-level 6"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("6 requests to run"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("stopped at deadline"), std::string::npos) << r.output;
  EXPECT_EQ(ReadManifest(out / "manifest.jsonl").size(), 6u);
}

TEST_F(SweepCliTest, ShardsAndExcludeSplitTheGridWithoutChangingImages) {
  const fs::path full = dir_ / "full";
  ASSERT_EQ(RunSweep(Args(full, "--image-threads 1")).exit_code, 0);
  // --shard i/2: prompt line i only, every configuration of it; the two shards
  // together are the full run, image for image (PNG bytes too, on the CPU).
  std::map<std::string, int> seen;
  for (int shard : {0, 1}) {
    const fs::path part = dir_ / ("shard" + std::to_string(shard));
    const RunResult r = RunSweep(Args(part, "--image-threads 4 --shard " + std::to_string(shard) + "/2"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("3 requests to run (shard " + std::to_string(shard) + "/2)"), std::string::npos)
        << r.output;
    for (const nlohmann::json& e : ReadManifest(part / "manifest.jsonl")) {
      EXPECT_EQ(e.at("prompt_index").get<int>(), shard) << e.dump();
      const std::string path = e.at("path");
      ++seen[path];
      EXPECT_EQ(ReadBytes(part / path), ReadBytes(full / path)) << path;
    }
  }
  EXPECT_EQ(seen.size(), 6u);
  // --exclude: the listed (config, prompt) pairs are skipped.
  std::ofstream(dir_ / "done.txt") << "# done elsewhere\ndense_0 0\n\ndiagonal_50 1\nnot_a_config 7\n";
  const fs::path rest = dir_ / "rest";
  const RunResult r = RunSweep(Args(rest, "--exclude " + (dir_ / "done.txt").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("4 requests to run, 2 excluded"), std::string::npos) << r.output;
  const std::vector<nlohmann::json> m = ReadManifest(rest / "manifest.jsonl");
  EXPECT_EQ(m.size(), 4u);
  for (const nlohmann::json& e : m) {
    const std::string path = e.at("path");
    EXPECT_NE(path, "dense_0/0000_0.png");
    EXPECT_NE(path, "diagonal_50/0001_0.png");
  }
}

// The tiny model decodes 64 image tokens: the default N_r is 32 (diagonal at
// 50% attends 32 keys, at 75% 16).
TEST_F(SweepCliTest, NRecentChangesOnlyTheDiagonalImages) {
  const std::string grid = " --policies dense,diagonal,diagonal_sink4";
  const std::vector<std::string> names = {"0000_0.png", "0001_0.png"};
  const fs::path plain = dir_ / "plain";
  RunResult r = RunSweep(Args(plain, "--sparsities 50,75" + grid));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // --n-recent at the family's default (2 2/3 rows of the 8-wide grid: 22; at 50% N_att 32 widens
  // it, so only 75% runs): the same bytes; the settings record it.
  const fs::path same = dir_ / "same";
  r = RunSweep(Args(same, "--sparsities 75 --n-recent 22" + grid));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string c : {"dense_0", "diagonal_75", "diagonal_sink4_75"}) {
    for (const std::string& name : names) {
      EXPECT_EQ(ReadBytes(plain / c / name), ReadBytes(same / c / name)) << c << "/" << name;
    }
  }
  const nlohmann::json plain_settings = nlohmann::json::parse(ReadBytes(plain / "sweep_settings.json"));
  EXPECT_FALSE(plain_settings.contains("n_recent")) << plain_settings.dump();
  EXPECT_EQ(nlohmann::json::parse(ReadBytes(same / "sweep_settings.json")).at("n_recent"), 22);

  // A smaller window (16 = diagonal_75's n_att): diagonal images change, dense ones do not.
  const fs::path narrow = dir_ / "narrow";
  r = RunSweep(Args(narrow, "--sparsities 75 --n-recent 16" + grid));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int differing = 0;
  for (const std::string& name : names) {
    EXPECT_EQ(ReadBytes(plain / "dense_0" / name), ReadBytes(narrow / "dense_0" / name)) << name;
    for (const char* c : {"diagonal_75", "diagonal_sink4_75"}) {
      const std::string bytes = ReadBytes(narrow / c / name);
      ASSERT_FALSE(bytes.empty()) << c << "/" << name;
      differing += bytes != ReadBytes(plain / c / name);
    }
  }
  EXPECT_EQ(differing, 4);  // every diagonal image (2 prompts x 2 policies)

  // --resume checks it: the same value resumes, another (or none) is refused.
  r = RunSweep(Args(narrow, "--sparsities 75 --n-recent 16 --resume" + grid));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0 requests to run, 6 already done"), std::string::npos) << r.output;
  for (const std::string extra : {"--n-recent 20", ""}) {
    r = RunSweep(Args(narrow, "--sparsities 75 --resume " + extra + grid));
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.output;
    EXPECT_NE(r.output.find("\"n_recent\" was 16"), std::string::npos) << r.output;
  }
  r = RunSweep(Args(plain, "--sparsities 50,75 --resume --n-recent 32" + grid));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("\"n_recent\" was absent"), std::string::npos) << r.output;
}

TEST_F(SweepCliTest, BadArgumentsExitTwoWithAMessage) {
  const fs::path out = dir_ / "bad";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Args(out, "--bogus 3"), "unknown argument \"--bogus\""},
      {Args(out, "--images-per-prompt 0"), "--images-per-prompt must be >= 1"},
      {Args(out, "--policies nope"), "unknown sparsity policy"},
      {Args(out, "--sparsities 120"), "--sparsities: 120"},
      {"--prompts x --out " + out.string(), "--model is required"},
      {Args(out, "--prompts " + (dir_ / "missing.jsonl").string()), "missing.jsonl"},
      {"--model /nonexistent/model --out " + out.string(), "/nonexistent/model"},
      // 96% of the tiny model's 64 decode tokens leaves 3 keys: fewer than streaming_llm's 4 sinks.
      {Args(out, "--policies streaming_llm --sparsities 96"), "configuration streaming_llm_96"},
      {Args(out, "--temperature -1"), "temperature"},  // 0 is greedy, valid
      {Args(out, "--shard 2/2"), "--shard: \"2/2\" is not i/n"},
      {Args(out, "--shard 1"), "--shard: \"1\" is not i/n"},
      {Args(out, "--png-level 10"), "--png-level must be 0..9"},
      {Args(out, "--deadline-seconds -1"), "--deadline-seconds must be >= 0"},
      {Args(out, "--exclude " + (dir_ / "missing.txt").string()), "missing.txt"},
      {Args(out, "--shard 2/3"), "no prompt left"},
      // --n-recent: every diagonal configuration must accept it (n_att <= N_r <= L_dec = 64).
      {Args(out, "--n-recent 16"), "configuration diagonal_0 on model"},
      {Args(out, "--sparsities 75,50 --n-recent 16"), "configuration diagonal_50 on model"},
      {Args(out, "--sparsities 75,50 --n-recent 16"), "policy.n_att: (32) must be <= n_recent (16)"},
      {Args(out, "--sparsities 50 --n-recent 65"), "policy.n_recent: (65) must be <= L_dec (64)"},
      {Args(out, "--policies diagonal_sink4 --sparsities 90 --n-recent 5"), "configuration diagonal_sink4_90"},
      {Args(out, "--policies dense,sliding_window --n-recent 32"), "but --policies dense,sliding_window has none"},
      {Args(out, "--n-recent -2"), "--n-recent must be >= 0"},
      // ssd needs the model's head classification (ssd_heads.json); the tiny model has none.
      {Args(out, "--policies ssd --sparsities 50"), "has no head classification"},
      {Args(out, "--policies tova:8"), "tova has no n_recent"},
      {Args(out, "--size 64x"), "--size: \"64x\" is not WxH"},
      // The tiny model makes 32 x 32 only: the configurations are refused naming the sizes.
      {Args(out, "--size 64x64"), "32x32"},
  };
  for (const auto& [args, message] : cases) {
    const RunResult r = RunSweep(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(out / "manifest.jsonl"));
}

TEST_F(SweepCliTest, SizeRunsTheSweepAtOneOfTheModelsSizes) {
  const fs::path model = argen::test_support::LuminaModelWithSizes(dir_ / "model", {{128, 64}, {64, 128}});
  const fs::path out = dir_ / "tall";
  const std::string args = "--model " + model.string() + " --prompts " + (dir_ / "prompts.jsonl").string() + " --out " +
                           out.string() + " --images-per-prompt 1 --policies dense,diagonal --sparsities 0,50" +
                           " --threads 2 --seed 5 --top_k 0 --cfg 4 --size 64x128";
  const RunResult r = RunSweep(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* c : {"dense_0", "diagonal_50"}) {
    const std::string bytes = ReadBytes(out / c / "0000_0.png");
    absl::StatusOr<argen::image::Rgb8Image> img = argen::image::DecodePng(
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    ASSERT_TRUE(img.ok()) << c << ": " << img.status() << "\n" << r.output;
    EXPECT_EQ(img->width, 64) << c;
    EXPECT_EQ(img->height, 128) << c;
  }
  std::ifstream settings(out / "sweep_settings.json");
  const nlohmann::json saved = nlohmann::json::parse(settings);
  EXPECT_EQ(saved.at("size"), "64x128") << saved.dump();
  // Resuming at another size is refused: the images would not be comparable.
  const RunResult other = RunSweep(args.substr(0, args.find(" --size")) + " --resume");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("setting \"size\" was \"64x128\", now absent"), std::string::npos) << other.output;
}

// The grid policies run on the tiny model's 8 x 8 grid, next to diagonal with
// its own window (diagonal:24) in the same sweep; at 0% they equal dense.
TEST_F(SweepCliTest, GridPoliciesAndPerEntryWindowsRun) {
  const fs::path out = dir_ / "grid";
  const RunResult r = RunSweep(Args(out, "--policies dense,grid_window,diagonal_grid,diagonal:24 --sparsities 75,90"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* c : {"grid_window_75", "diagonal_grid_90", "diagonal_nr24_75", "diagonal_nr24_90"}) {
    EXPECT_TRUE(fs::exists(out / c / "0000_0.png")) << c << "\n" << r.output;
  }
  const fs::path zero = dir_ / "grid0";
  const RunResult z = RunSweep(Args(zero, "--policies dense,grid_window,diagonal_grid --sparsities 0"));
  ASSERT_EQ(z.exit_code, 0) << z.output;
  for (const char* c : {"grid_window_0", "diagonal_grid_0"}) {
    EXPECT_EQ(ReadBytes(zero / c / "0001_0.png"), ReadBytes(zero / "dense_0" / "0001_0.png")) << c;
  }
  bool named = false;
  for (const nlohmann::json& e : ReadManifest(out / "manifest.jsonl")) named |= e.at("policy") == "diagonal_nr24";
  EXPECT_TRUE(named);
  // diagonal:24 at 50% (N_att 32 > 24) is invalid: exit 2, or left out with --skip-invalid.
  const fs::path skip = dir_ / "skip";
  EXPECT_EQ(RunSweep(Args(skip, "--policies diagonal:24 --sparsities 50,75")).exit_code, 2);
  const RunResult k = RunSweep(Args(skip, "--policies diagonal:24 --sparsities 50,75 --skip-invalid"));
  ASSERT_EQ(k.exit_code, 0) << k.output;
  EXPECT_NE(k.output.find("skipped: configuration diagonal_nr24_50"), std::string::npos) << k.output;
  EXPECT_TRUE(fs::exists(skip / "diagonal_nr24_75" / "0000_0.png"));
  EXPECT_FALSE(fs::exists(skip / "diagonal_nr24_50"));
}

// --kv-cache-dtype fp8: the whole grid runs (the CPU backend rounds its KV
// through e4m3), the settings file records it and --resume with another
// dtype is refused, as with --size.
TEST_F(SweepCliTest, KvCacheDtypeFp8RunsTheGridAndIsASetting) {
  const fs::path out = dir_ / "fp8";
  const RunResult r = RunSweep(Args(out, "--kv-cache-dtype fp8"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("KV fp8"), std::string::npos) << r.output;
  EXPECT_EQ(ReadManifest(out / "manifest.jsonl").size(), 6u);  // 2 prompts x (dense, diagonal 0, diagonal 50)
  std::ifstream settings(out / "sweep_settings.json");
  const nlohmann::json saved = nlohmann::json::parse(settings);
  EXPECT_EQ(saved.at("kv_cache_dtype"), "fp8") << saved.dump();
  // Every image was made with fp8 KV: each differs from the auto run's (same
  // seeds; the CPU rounds its KV through e4m3), and the pairing still holds
  // (diagonal at 0% is dense, byte for byte).
  const fs::path plain = dir_ / "auto";
  const RunResult a = RunSweep(Args(plain));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  for (const char* c : {"dense_0", "diagonal_0", "diagonal_50"}) {
    for (const char* image : {"0000_0.png", "0001_0.png"}) {
      const std::string fp8_png = ReadBytes(out / c / image);
      ASSERT_FALSE(fp8_png.empty()) << c << "/" << image;
      EXPECT_NE(fp8_png, ReadBytes(plain / c / image)) << c << "/" << image << " is the same as auto's";
    }
  }
  EXPECT_EQ(ReadBytes(out / "dense_0" / "0000_0.png"), ReadBytes(out / "diagonal_0" / "0000_0.png"));
  const RunResult same = RunSweep(Args(out, "--kv-cache-dtype fp8 --resume"));
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("0 requests to run"), std::string::npos) << same.output;
  const RunResult other = RunSweep(Args(out, "--resume"));
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("setting \"kv_cache_dtype\" was \"fp8\", now absent"), std::string::npos) << other.output;
}

// --weight-dtype fp8: the engine loads fp8 layer weights (the CPU rounds them
// and every GEMM input through e4m3), every image differs from the auto
// run's, the settings file records it and --resume without it is refused.
TEST_F(SweepCliTest, WeightDtypeFp8ChangesEveryImageAndIsASetting) {
  const fs::path out = dir_ / "fp8w";
  const RunResult r = RunSweep(Args(out, "--weight-dtype fp8"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("weights fp8"), std::string::npos) << r.output;
  std::ifstream settings(out / "sweep_settings.json");
  const nlohmann::json saved = nlohmann::json::parse(settings);
  EXPECT_EQ(saved.at("weight_dtype"), "fp8") << saved.dump();
  const fs::path plain = dir_ / "auto_w";
  const RunResult a = RunSweep(Args(plain));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  for (const char* image : {"0000_0.png", "0001_0.png"}) {
    const std::string fp8_png = ReadBytes(out / "dense_0" / image);
    ASSERT_FALSE(fp8_png.empty()) << image;
    EXPECT_NE(fp8_png, ReadBytes(plain / "dense_0" / image)) << image << " is the same as auto's";
  }
  const RunResult other = RunSweep(Args(out, "--resume"));
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("setting \"weight_dtype\" was \"fp8\", now absent"), std::string::npos) << other.output;
}

}  // namespace

namespace {

argen::image::Rgb8Image DecodeFile(const fs::path& p) {
  const std::string bytes = ReadBytes(p);
  absl::StatusOr<argen::image::Rgb8Image> img =
      argen::image::DecodePng(absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  return img.ok() ? *img : argen::image::Rgb8Image{};
}

// GenEval's documented layout, as its evaluate_images.py finds images (a
// format check written from its README and reader, not its code): every
// subfolder of the image folder whose name is all digits is a prompt; its
// metadata.jsonl is one JSON document (read whole, not line by line); its
// images are the files of samples/ named <digits>.png.
struct GenevalPrompt {
  nlohmann::json metadata;
  std::string metadata_text;
  std::vector<std::string> samples;  // sorted
};
std::map<std::string, GenevalPrompt> ReadGenevalFolder(const fs::path& imagedir) {
  std::map<std::string, GenevalPrompt> prompts;
  for (const fs::directory_entry& e : fs::directory_iterator(imagedir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    GenevalPrompt p;
    p.metadata_text = ReadBytes(e.path() / "metadata.jsonl");
    p.metadata = nlohmann::json::parse(p.metadata_text, nullptr, /*allow_exceptions=*/false);
    for (const fs::directory_entry& s : fs::directory_iterator(e.path() / "samples")) {
      const std::string file = s.path().filename().string();
      const std::string stem = s.path().stem().string();
      if (s.is_regular_file() && s.path().extension() == ".png" && !stem.empty() &&
          std::all_of(stem.begin(), stem.end(), ::isdigit)) {
        p.samples.push_back(file);
      }
    }
    std::sort(p.samples.begin(), p.samples.end());
    prompts[name] = std::move(p);
  }
  return prompts;
}

}  // namespace

// --format geneval: per configuration, the folder GenEval's evaluator reads:
// a <index:05d> folder a prompt with its line of the prompt file copied
// verbatim and samples/<image:04d>.png; nothing else it would pick up.
TEST_F(SweepCliTest, GenevalFormatIsTheOfficialEvaluatorsLayout) {
  // GenEval's evaluation_metadata.jsonl shape (tag, include, prompt; exclude
  // for the position prompts), key order and spacing as in a hand-edited file.
  const std::vector<std::string> lines = {
      R"({"tag": "single_object", "include": [{"class": "bench", "count": 1}], "prompt": "a photo of a bench"})",
      R"({"tag":"color_attr","include":[{"class":"cup","count":1,"color":"red"}],"prompt":"a photo of a red cup"})",
      R"({"tag": "position", "include": [{"class": "cat", "count": 1}, {"class": "dog", "count": 1, "position": ["left of", 0]}], "prompt": "a photo of a dog left of a cat"})",
  };
  const fs::path meta = dir_ / "evaluation_metadata.jsonl";
  {
    std::ofstream f(meta);
    for (const std::string& l : lines) f << l << "\n";
  }
  const fs::path out = dir_ / "geneval";
  const std::string args = "--model " + TinyModel() + " --out " + out.string() +
                           " --format geneval --geneval-prompts " + meta.string() +
                           " --images-per-prompt 2 --policies dense,line_evict --sparsities 50 --threads 1 --seed 5";
  const RunResult r = RunSweep(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* config : {"dense_0", "line_evict_50"}) {
    SCOPED_TRACE(config);
    const std::map<std::string, GenevalPrompt> found = ReadGenevalFolder(out / config);
    ASSERT_EQ(found.size(), 3u) << r.output;
    for (size_t i = 0; i < lines.size(); ++i) {
      char folder[24];
      std::snprintf(folder, sizeof(folder), "%05zu", i);
      ASSERT_TRUE(found.contains(folder)) << folder;
      const GenevalPrompt& p = found.at(folder);
      EXPECT_EQ(p.metadata_text, lines[i] + "\n");  // verbatim
      EXPECT_EQ(p.metadata, nlohmann::json::parse(lines[i]));
      EXPECT_EQ(p.samples, (std::vector<std::string>{"0000.png", "0001.png"}));
      for (const std::string& s : p.samples) {
        const argen::image::Rgb8Image img = DecodeFile(out / config / folder / "samples" / s);
        EXPECT_EQ(img.width, 32);
        EXPECT_EQ(img.height, 32);
      }
    }
    // Only the prompt folders (the evaluator would skip others; none are left for it to skip).
    EXPECT_EQ(std::distance(fs::directory_iterator(out / config), fs::directory_iterator{}), 3);
  }
  // The manifest points at the same files; --resume finds them all done.
  const std::vector<nlohmann::json> manifest = ReadManifest(out / "manifest.jsonl");
  ASSERT_EQ(manifest.size(), 12u);
  for (const nlohmann::json& e : manifest) EXPECT_TRUE(fs::is_regular_file(out / e.at("path").get<std::string>()));
  for (const nlohmann::json& e : manifest) {
    char expect[96];
    std::snprintf(expect, sizeof(expect), "%s/%05d/samples/%04d.png", e.at("config").get<std::string>().c_str(),
                  e.at("prompt_index").get<int>(), e.at("image").get<int>());
    EXPECT_EQ(e.at("path").get<std::string>(), expect);
  }
  const RunResult again = RunSweep(args + " --resume");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("0 requests to run"), std::string::npos) << again.output;
  // Paired with the default layout: the same images under other names.
  const fs::path plain = dir_ / "plain";
  ASSERT_EQ(RunSweep("--model " + TinyModel() + " --out " + plain.string() + " --prompts " + meta.string() +
                     " --images-per-prompt 2 --policies dense --threads 1 --seed 5")
                .exit_code,
            0);
  EXPECT_EQ(DecodeFile(plain / "dense_0" / "0002_1.png").rgb, DecodeFile(out / "dense_0/00002/samples/0001.png").rgb);
}

// --format dpg: per configuration, the folder DPG-Bench's evaluator reads:
// one <prompt file name>.png a prompt (it keys an image by its name up to the
// first '.'), the 4 images in a 2 x 2 grid whose cells are the crops it takes
// at --resolution 32 (image i at column i % 2, row i / 2).
TEST_F(SweepCliTest, DpgFormatIsTheOfficialEvaluatorsLayout) {
  const fs::path prompts = dir_ / "dpg_prompts";
  fs::create_directories(prompts);
  // Published names are numbers; the order is numeric (2 before 10), then words.
  const std::vector<std::pair<std::string, std::string>> files = {
      {"2", "A red circle on a white table, seen from above."},
      {"10", "Two blue squares.\n"},
      {"0", "  A green triangle beside a yellow star.\n\n"},
      {"partiprompts7", "A small orange circle."},
  };
  for (const auto& [name, text] : files) std::ofstream(prompts / (name + ".txt")) << text;
  std::ofstream(prompts / "README.md") << "not a prompt";
  const fs::path out = dir_ / "dpg";
  const RunResult r = RunSweep("--model " + TinyModel() + " --out " + out.string() + " --format dpg --dpg-prompts " +
                               prompts.string() + " --images-per-prompt 4 --policies dense --threads 1 --seed 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(out / "dense_0")) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"0.png", "10.png", "2.png", "partiprompts7.png"}));

  // The same prompts in the default layout, in the dpg order (0, 2, 10, partiprompts7: indices 0..3, seeds 5..8).
  const fs::path jsonl = dir_ / "dpg_order.jsonl";
  {
    std::ofstream f(jsonl);
    for (const char* text :
         {"A green triangle beside a yellow star.", "A red circle on a white table, seen from above.",
          "Two blue squares.", "A small orange circle."}) {
      f << nlohmann::json{{"tag", "dpg"}, {"prompt", text}}.dump() << "\n";
    }
  }
  const fs::path plain = dir_ / "dpg_plain";
  ASSERT_EQ(RunSweep("--model " + TinyModel() + " --out " + plain.string() + " --prompts " + jsonl.string() +
                     " --images-per-prompt 4 --policies dense --threads 1 --seed 5")
                .exit_code,
            0);
  const std::vector<std::string> order = {"0", "2", "10", "partiprompts7"};
  const int res = 32;
  for (size_t p = 0; p < order.size(); ++p) {
    SCOPED_TRACE(order[p]);
    const argen::image::Rgb8Image grid = DecodeFile(out / "dense_0" / (order[p] + ".png"));
    ASSERT_EQ(grid.width, 2 * res);
    ASSERT_EQ(grid.height, 2 * res);
    for (int i = 0; i < 4; ++i) {
      // The evaluator's crop boxes (left, top, right, bottom) for --pic-num 4.
      const int left = (i % 2) * res, top = (i / 2) * res;
      std::vector<uint8_t> cell;
      for (int y = top; y < top + res; ++y) {
        const auto row = grid.rgb.begin() + (static_cast<size_t>(y) * grid.width + left) * 3;
        cell.insert(cell.end(), row, row + res * 3);
      }
      char name[32];
      std::snprintf(name, sizeof(name), "%04zu_%d.png", p, i);
      EXPECT_EQ(cell, DecodeFile(plain / "dense_0" / name).rgb) << "cell " << i;
    }
  }
  // More than 4 images do not fit the grid.
  const RunResult five = RunSweep("--model " + TinyModel() + " --out " + (dir_ / "dpg5").string() +
                                  " --format dpg --dpg-prompts " + prompts.string() + " --images-per-prompt 5");
  EXPECT_EQ(five.exit_code, 2) << five.output;
  EXPECT_NE(five.output.find("--format dpg tiles at most 4"), std::string::npos) << five.output;
}
