// argen_sweep's parts without the engine: argument parsing (every usage error
// names its flag), the grid, prompt loading and subsampling, the manifest
// round trip and what --resume keeps.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/sweep/manifest.h"
#include "tools/sweep/prompt_set.h"
#include "tools/sweep/resume.h"
#include "tools/sweep/sweep_args.h"
#include "tools/sweep/sweep_grid.h"
#include "tools/sweep/sweep_runner.h"

namespace argen::sweep {
namespace {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(SweepArgsTest, DefaultsAreThePaperGrid) {
  absl::StatusOr<SweepArgs> a = ParseSweepArgs({"--model", "m", "--out=o"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->images_per_prompt, 4);
  EXPECT_EQ(a->policies.size(), 8u);
  EXPECT_EQ(a->sparsities, (std::vector<double>{80, 90, 92.5, 95, 96}));
  EXPECT_EQ(BuildGrid(a->policies, a->sparsities).size(), 1u + 7u * 5u);
}

TEST(SweepArgsTest, ParsesEveryOption) {
  absl::StatusOr<SweepArgs> a = ParseSweepArgs({"--model",
                                                "m",
                                                "--out",
                                                "o",
                                                "--prompts=p.jsonl",
                                                "--backend",
                                                "cuda",
                                                "--images-per-prompt",
                                                "2",
                                                "--policies",
                                                "diagonal,h2o",
                                                "--sparsities",
                                                "90, 95%",
                                                "--subsample",
                                                "10",
                                                "--per-category",
                                                "2",
                                                "--max-prompts",
                                                "3",
                                                "--max-batch-rows",
                                                "64",
                                                "--threads",
                                                "2",
                                                "--seed",
                                                "7",
                                                "--cfg",
                                                "3.5",
                                                "--temperature",
                                                "0.9",
                                                "--top_k",
                                                "100",
                                                "--top_p",
                                                "0.95",
                                                "--resume"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->prompts, "p.jsonl");
  EXPECT_EQ(a->backend, "cuda");
  EXPECT_EQ(a->images_per_prompt, 2);
  EXPECT_EQ(a->policies, (std::vector{sparse::PolicyKind::kDiagonal, sparse::PolicyKind::kH2O}));
  EXPECT_EQ(a->sparsities, (std::vector<double>{90, 95}));
  EXPECT_EQ(a->subsample, 10);
  EXPECT_EQ(a->per_category, 2);
  EXPECT_EQ(a->max_prompts, 3);
  EXPECT_EQ(a->max_batch_rows, 64);
  EXPECT_EQ(a->threads, 2);
  EXPECT_EQ(a->seed, 7u);
  EXPECT_FLOAT_EQ(a->sampling.cfg_weight, 3.5f);
  EXPECT_FLOAT_EQ(a->sampling.temperature, 0.9f);
  EXPECT_EQ(a->sampling.top_k, 100);
  EXPECT_FLOAT_EQ(a->sampling.top_p, 0.95f);
  EXPECT_TRUE(a->resume);
}

// The run samples as the server does: the model's defaults (the shipped
// model's cfg 3), with what the command line gives in their place; the
// negative prompt reaches every request.
TEST(SweepArgsTest, SamplingIsTheModelsDefaultsWithTheGivenFieldsInTheirPlace) {
  engine::SamplingParams model;
  model.cfg_weight = 3.0f;
  model.temperature = 1.0f;
  model.top_k = 2000;
  model.top_p = 1.0f;
  absl::StatusOr<SweepArgs> none = ParseSweepArgs({"--model", "m", "--out", "o"});
  ASSERT_TRUE(none.ok()) << none.status();
  const engine::SamplingParams same = EffectiveSampling(*none, model);
  EXPECT_FLOAT_EQ(same.cfg_weight, 3.0f);
  EXPECT_EQ(same.top_k, 2000);
  EXPECT_TRUE(none->negative_prompt.empty());
  absl::StatusOr<SweepArgs> some =
      ParseSweepArgs({"--model", "m", "--out", "o", "--cfg", "4.5", "--top_p", "0.9", "--negative-prompt", "blurry"});
  ASSERT_TRUE(some.ok()) << some.status();
  const engine::SamplingParams mixed = EffectiveSampling(*some, model);
  EXPECT_FLOAT_EQ(mixed.cfg_weight, 4.5f);
  EXPECT_FLOAT_EQ(mixed.top_p, 0.9f);
  EXPECT_FLOAT_EQ(mixed.temperature, 1.0f);  // not given: the model's
  EXPECT_EQ(mixed.top_k, 2000);
  EXPECT_EQ(some->negative_prompt, "blurry");
  RunSettings settings;
  settings.negative_prompt = some->negative_prompt;
  settings.images_per_prompt = 1;
  BenchmarkPrompt prompt;
  prompt.prompt = "a cat";
  SweepConfig config;
  WorkItem item;
  item.prompt = &prompt;
  item.config = &config;
  EXPECT_EQ(MakeRequest(item, settings).negative_prompt, "blurry");
}

TEST(SweepArgsTest, NRecentIsUnsetByDefaultAndParsed) {
  absl::StatusOr<SweepArgs> a = ParseSweepArgs({"--model", "m", "--out", "o"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->n_recent, 0);
  a = ParseSweepArgs({"--model", "m", "--out", "o", "--n-recent", "200"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->n_recent, 200);
  a = ParseSweepArgs({"--model", "m", "--out", "o", "--policies", "dense,diagonal_sink4", "--n-recent=40"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->n_recent, 40);
  // 0 is the default, so it is fine without a diagonal policy.
  a = ParseSweepArgs({"--model", "m", "--out", "o", "--policies", "dense,h2o", "--n-recent", "0"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->n_recent, 0);
}

TEST(SweepArgsTest, NRecentReachesOnlyTheDiagonalPolicies) {
  RunSettings settings;
  settings.n_recent = 40;
  const BenchmarkPrompt prompt{};
  for (const SweepConfig& c : BuildGrid(ParsePolicies(kDefaultPolicies).value(), {90})) {
    const engine::GenerationRequest r = MakeRequest({&c, &prompt}, settings);
    EXPECT_EQ(r.policy.n_recent, UsesNRecent(c.kind) ? 40 : 0) << c.label;
    EXPECT_EQ(UsesNRecent(c.kind), c.policy == "diagonal" || c.policy == "diagonal_sink4") << c.label;
  }
}

TEST(SweepArgsTest, UsageErrorsNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--out", "o"}, "--model is required"},
      {{"--model", "m"}, "--out is required"},
      {{"--model", "m", "--out", "o", "--bogus", "1"}, "unknown argument \"--bogus\""},
      {{"--model", "m", "--out", "o", "--images-per-prompt", "0"}, "--images-per-prompt must be >= 1"},
      {{"--model", "m", "--out", "o", "--images-per-prompt", "two"}, "--images-per-prompt: \"two\""},
      {{"--model", "m", "--out", "o", "--subsample", "0"}, "--subsample must be >= 1"},
      {{"--model", "m", "--out", "o", "--policies", "diagonal,nope"}, "unknown sparsity policy \"nope\""},
      {{"--model", "m", "--out", "o", "--sparsities", "90,100"}, "--sparsities: 100 must be a percent"},
      {{"--model", "m", "--out", "o", "--sparsities", "abc"}, "--sparsities: \"abc\" is not a number"},
      {{"--model", "m", "--out", "o", "--backend", "tpu"}, "--backend must be cpu or cuda"},
      {{"--model", "m", "--out", "o", "--seed", "-1"}, "--seed"},
      {{"--model", "m", "--out", "o", "--max-batch-rows", "6"}, "--max-batch-rows (6) must be >= 2 x"},
      {{"--model", "m", "--out"}, "--out needs a value"},
      {{"--model", "m", "--out", "o", "--max-batch-rows", "255"}, "--max-batch-rows must be even"},
      {{"--model", "m", "--out", "o", "--resume=yes"}, "--resume takes no value"},
      {{"--model", "m", "--out", "o", "--n-recent", "-1"}, "--n-recent must be >= 0"},
      {{"--model", "m", "--out", "o", "--n-recent", "half"}, "--n-recent: \"half\" is not an integer"},
      {{"--model", "m", "--out", "o", "--policies", "dense,h2o", "--n-recent", "40"},
       "--n-recent 40 sets the recent window of the diagonal policies"},
  };
  for (const auto& [args, message] : cases) {
    absl::StatusOr<SweepArgs> a = ParseSweepArgs(args);
    ASSERT_FALSE(a.ok()) << message;
    EXPECT_NE(a.status().message().find(message), std::string::npos) << a.status();
  }
}

TEST(SweepGridTest, DenseRunsOnceAndLabelsNameTheFolders) {
  const std::vector<SweepConfig> grid =
      BuildGrid({sparse::PolicyKind::kDense, sparse::PolicyKind::kDiagonalSink4}, {0, 92.5, 96});
  ASSERT_EQ(grid.size(), 4u);
  EXPECT_EQ(grid[0].label, "dense_0");
  EXPECT_EQ(grid[1].label, "diagonal_sink4_0");
  EXPECT_EQ(grid[2].label, "diagonal_sink4_92.5");
  EXPECT_EQ(grid[3].label, "diagonal_sink4_96");
  EXPECT_DOUBLE_EQ(grid[2].sparsity_percent, 92.5);
  EXPECT_EQ(FormatPercent(80), "80");
  EXPECT_EQ(FormatPercent(99.25), "99.25");
}

// "name:N" entries: their own n_recent, their own folder and manifest policy
// name, next to the same policy at its default window.
TEST(SweepGridTest, PolicyEntriesWithTheirOwnWindow) {
  absl::StatusOr<SweepArgs> a =
      ParseSweepArgs({"--model", "m", "--out", "o", "--policies",
                      "dense,diagonal,diagonal:64,grid_window,diagonal_grid:80,ssd", "--sparsities", "95"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->policies.size(), 6u);
  const std::vector<SweepConfig> grid = BuildGrid(a->policy_specs, a->sparsities);
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_EQ(grid[1].label, "diagonal_95");
  EXPECT_EQ(grid[2].label, "diagonal_nr64_95");
  EXPECT_EQ(grid[2].policy, "diagonal_nr64");
  EXPECT_EQ(grid[2].kind, sparse::PolicyKind::kDiagonal);
  EXPECT_EQ(grid[3].label, "grid_window_95");
  EXPECT_EQ(grid[4].label, "diagonal_grid_nr80_95");
  EXPECT_EQ(grid[5].label, "ssd_95");
  RunSettings settings;
  settings.n_recent = 40;  // --n-recent: the diagonal entries without their own
  const BenchmarkPrompt prompt{};
  EXPECT_EQ(MakeRequest({&grid[1], &prompt}, settings).policy.n_recent, 40);
  EXPECT_EQ(MakeRequest({&grid[2], &prompt}, settings).policy.n_recent, 64);
  EXPECT_EQ(MakeRequest({&grid[3], &prompt}, settings).policy.n_recent, 0);
  EXPECT_EQ(MakeRequest({&grid[4], &prompt}, settings).policy.n_recent, 80);
  for (const char* bad : {"tova:8", "diagonal:0", "diagonal:x", "nope:3"}) {
    absl::StatusOr<std::vector<PolicySpec>> p = ParsePolicySpecs(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(std::string(p.status().message()).find("--policies"), std::string::npos) << p.status();
  }
  EXPECT_EQ(ParsePolicySpecs("diagonal:64,diagonal:64,diagonal")->size(), 2u);
}

// "name@fp8" entries: their KV in fp8, their own folder and manifest policy
// name ("dense_fp8": PSNR against "dense", the bf16 twin), the rest as the entry says.
TEST(SweepGridTest, PolicyEntriesWithTheirOwnKvDtype) {
  absl::StatusOr<SweepArgs> a = ParseSweepArgs(
      {"--model", "m", "--out", "o", "--policies", "dense,dense@fp8,diagonal,diagonal:64@fp8", "--sparsities", "95"});
  ASSERT_TRUE(a.ok()) << a.status();
  const std::vector<SweepConfig> grid = BuildGrid(a->policy_specs, a->sparsities);
  ASSERT_EQ(grid.size(), 4u);
  EXPECT_EQ(grid[0].label, "dense_0");
  EXPECT_EQ(grid[1].label, "dense_fp8_0");
  EXPECT_EQ(grid[1].policy, "dense_fp8");
  EXPECT_EQ(grid[3].label, "diagonal_nr64_fp8_95");
  const RunSettings settings;
  const BenchmarkPrompt prompt{};
  EXPECT_EQ(MakeRequest({&grid[0], &prompt}, settings).policy.kv_format, sparse::KvFormat::kAuto);
  EXPECT_EQ(MakeRequest({&grid[1], &prompt}, settings).policy.kv_format, sparse::KvFormat::kFp8E4m3);
  EXPECT_EQ(MakeRequest({&grid[2], &prompt}, settings).policy.kv_format, sparse::KvFormat::kAuto);
  const engine::GenerationRequest last = MakeRequest({&grid[3], &prompt}, settings);
  EXPECT_EQ(last.policy.kv_format, sparse::KvFormat::kFp8E4m3);
  EXPECT_EQ(last.policy.n_recent, 64);
  for (const char* bad : {"dense@", "dense@auto", "dense@fp4", "diagonal:64@"}) {
    absl::StatusOr<std::vector<PolicySpec>> p = ParsePolicySpecs(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(std::string(p.status().message()).find("kv_cache_dtype"), std::string::npos) << p.status();
  }
  EXPECT_EQ(ParsePolicySpecs("dense@fp8,dense@fp8_e4m3,dense")->size(), 2u);
}

TEST(SweepGridTest, DuplicatesAndAliasesCollapse) {
  absl::StatusOr<std::vector<sparse::PolicyKind>> p = ParsePolicies("window,sliding_window, tova");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->size(), 2u);
  absl::StatusOr<std::vector<double>> s = ParseSparsities("90,90.0,80");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (std::vector<double>{90, 80}));
  EXPECT_FALSE(ParseSparsities(" , ").ok());
}

TEST(SweepPromptSetTest, LoadsKeepsLineIndicesAndSubsamples) {
  const fs::path dir = TempDir("sweep_prompts");
  const fs::path file = dir / "p.jsonl";
  {
    std::ofstream out(file);
    for (int i = 0; i < 10; ++i) {
      out << R"({"tag": "t)" << i % 3 << R"(", "prompt": "p)" << i << R"(", "include": []})"
          << "\n";
    }
  }
  absl::StatusOr<std::vector<BenchmarkPrompt>> all = LoadPrompts(file.string());
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 10u);
  EXPECT_EQ((*all)[7].prompt, "p7");
  EXPECT_EQ((*all)[7].tag, "t1");
  std::vector<BenchmarkPrompt> every3 = Subsample(*all, 3, 0);
  ASSERT_EQ(every3.size(), 4u);  // 0, 3, 6, 9
  EXPECT_EQ(every3[3].index, 9);
  std::vector<BenchmarkPrompt> first2 = Subsample(*all, 3, 2);
  ASSERT_EQ(first2.size(), 2u);
  EXPECT_EQ(first2[1].index, 3);
  // Tags t0 (0,3,6,9), t1 (1,4,7), t2 (2,5,8): 2 of each, evenly spread (j * n / 2).
  std::vector<int32_t> picked;
  for (const BenchmarkPrompt& p : PerCategory(*all, 2)) picked.push_back(p.index);
  EXPECT_EQ(picked, (std::vector<int32_t>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(PerCategory(*all, 0).size(), 10u);
  EXPECT_EQ(PerCategory(*all, 50).size(), 10u);
  fs::remove_all(dir);
}

TEST(SweepPromptSetTest, BadFilesNameTheLine) {
  const fs::path dir = TempDir("sweep_bad_prompts");
  const fs::path file = dir / "p.jsonl";
  std::ofstream(file) << R"({"tag": "a", "prompt": "x"})"
                      << "\n"
                      << R"({"tag": "a"})"
                      << "\n";
  absl::StatusOr<std::vector<BenchmarkPrompt>> r = LoadPrompts(file.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("p.jsonl:2: field \"prompt\""), std::string::npos) << r.status();
  std::ofstream(file) << "{not json\n";
  r = LoadPrompts(file.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("p.jsonl:1: not a JSON object"), std::string::npos) << r.status();
  std::ofstream(file) << "\n";
  EXPECT_FALSE(LoadPrompts(file.string()).ok());
  EXPECT_FALSE(LoadPrompts((dir / "missing.jsonl").string()).ok());
  fs::remove_all(dir);
}

TEST(SweepManifestTest, RoundTripAndResumeKeepsOnlyCompletePrompts) {
  const fs::path dir = TempDir("sweep_manifest");
  ManifestEntry e;
  e.prompt_index = 12;
  e.tag = "colors";
  e.prompt = "a photo of a \"red\" circle";
  e.policy = "diagonal";
  e.sparsity = 92.5;
  e.config = "diagonal_92.5";
  e.seed = 12;
  e.decode_s = 1.25;
  EXPECT_EQ(ImageFileName(12, 3), "0012_3.png");
  std::vector<ManifestEntry> entries;
  for (int32_t prompt : {12, 13}) {
    for (int32_t image = 0; image < 2; ++image) {
      e.prompt_index = prompt;
      e.image = image;
      e.path = "diagonal_92.5/" + ImageFileName(prompt, image);
      entries.push_back(e);
    }
  }
  {
    absl::StatusOr<std::unique_ptr<ManifestWriter>> w = ManifestWriter::Open((dir / "manifest.jsonl").string(), false);
    ASSERT_TRUE(w.ok()) << w.status();
    for (const ManifestEntry& x : entries) ASSERT_TRUE((*w)->Write(x).ok());
  }
  std::ofstream(dir / "manifest.jsonl", std::ios::app) << R"({"prompt_index": 1)";  // killed mid-line
  absl::StatusOr<std::vector<ManifestEntry>> read = ReadManifest((dir / "manifest.jsonl").string());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 4u);
  EXPECT_EQ((*read)[0].prompt, e.prompt);
  EXPECT_DOUBLE_EQ((*read)[3].sparsity, 92.5);
  EXPECT_EQ((*read)[3].path, "diagonal_92.5/0013_1.png");

  // Prompt 12 has both files; prompt 13 lost one: only 12 is done.
  fs::create_directories(dir / "diagonal_92.5");
  for (const char* name : {"0012_0.png", "0012_1.png", "0013_0.png"})
    std::ofstream(dir / "diagonal_92.5" / name) << "x";
  ResumeState state = FinishedWork(*read, dir.string(), 2);
  EXPECT_EQ(state.done.size(), 1u);
  EXPECT_TRUE(state.done.contains({"diagonal_92.5", 12}));
  EXPECT_EQ(state.kept.size(), 2u);
  // Asking for 3 images a prompt: nothing is complete.
  EXPECT_TRUE(FinishedWork(*read, dir.string(), 3).done.empty());
  fs::remove_all(dir);
}

TEST(SweepResumeTest, SettingsMustMatch) {
  SweepArgs a;
  a.images_per_prompt = 4;
  const nlohmann::json before = SettingsJson(a, "model-a");
  EXPECT_TRUE(CheckSameSettings(before, SettingsJson(a, "model-a")).ok());
  a.sampling.cfg_weight = 3.0f;
  absl::Status s = CheckSameSettings(before, SettingsJson(a, "model-a"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("\"cfg\""), std::string::npos) << s;
  EXPECT_FALSE(CheckSameSettings(before, SettingsJson(SweepArgs{}, "model-b")).ok());
}

TEST(SweepResumeTest, NRecentIsASettingOnlyWhenSet) {
  SweepArgs a;
  const nlohmann::json unset = SettingsJson(a, "m");
  EXPECT_FALSE(unset.contains("n_recent"));  // a default run's settings file is as before
  a.n_recent = 40;
  const nlohmann::json forty = SettingsJson(a, "m");
  EXPECT_EQ(forty.at("n_recent"), 40);
  EXPECT_TRUE(CheckSameSettings(forty, SettingsJson(a, "m")).ok());
  a.n_recent = 20;
  for (const auto& [previous, now] :
       {std::pair{forty, SettingsJson(a, "m")}, std::pair{unset, forty}, std::pair{forty, unset}}) {
    const absl::Status s = CheckSameSettings(previous, now);
    ASSERT_FALSE(s.ok()) << previous.dump() << " -> " << now.dump();
    EXPECT_NE(s.message().find("\"n_recent\""), std::string::npos) << s;
  }
}

TEST(SweepArgsTest, KvCacheDtypeIsAutoByDefaultAndParsed) {
  const std::vector<std::string> base = {"--model", "m", "--out", "o"};
  absl::StatusOr<SweepArgs> a = ParseSweepArgs(base);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kv_format, sparse::KvFormat::kAuto);
  for (const char* fp8 : {"fp8", "FP8", "fp8_e4m3"}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--kv-cache-dtype", fp8});
    a = ParseSweepArgs(args);
    ASSERT_TRUE(a.ok()) << fp8 << ": " << a.status();
    EXPECT_EQ(a->kv_format, sparse::KvFormat::kFp8E4m3) << fp8;
  }
  std::vector<std::string> bad = base;
  bad.push_back("--kv-cache-dtype=fp16");
  a = ParseSweepArgs(bad);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--kv-cache-dtype: \"fp16\" is not auto or fp8"), std::string::npos)
      << a.status();
}

TEST(SweepArgsTest, WeightDtypeIsAutoByDefaultAndParsed) {
  const std::vector<std::string> base = {"--model", "m", "--out", "o"};
  absl::StatusOr<SweepArgs> a = ParseSweepArgs(base);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->weight_format, model::WeightFormat::kAuto);
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--weight-dtype", "fp8"});
  a = ParseSweepArgs(args);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->weight_format, model::WeightFormat::kFp8);
  std::vector<std::string> bad = base;
  bad.push_back("--weight-dtype=int8");
  a = ParseSweepArgs(bad);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--weight-dtype: \"int8\" is not auto or fp8"), std::string::npos) << a.status();
}

// Every configuration's request carries the format (dense included).
TEST(SweepRunnerRequestTest, MakeRequestCarriesTheKvFormat) {
  RunSettings settings;
  settings.kv_format = sparse::KvFormat::kFp8E4m3;
  BenchmarkPrompt prompt;
  prompt.index = 3;
  prompt.prompt = "a cube";
  prompt.tag = "tag";
  for (const SweepConfig& c :
       BuildGrid({sparse::PolicyKind::kDense, sparse::PolicyKind::kDiagonal, sparse::PolicyKind::kH2O}, {90})) {
    EXPECT_EQ(MakeRequest({&c, &prompt}, settings).policy.kv_format, sparse::KvFormat::kFp8E4m3) << c.label;
  }
  settings.kv_format = sparse::KvFormat::kAuto;
  const SweepConfig dense = BuildGrid({sparse::PolicyKind::kDense}, {0}).front();
  EXPECT_EQ(MakeRequest({&dense, &prompt}, settings).policy.kv_format, sparse::KvFormat::kAuto);
  // An entry's own "@fp8" wins over the sweep's auto.
  const std::vector<SweepConfig> own = BuildGrid(ParsePolicySpecs("dense,dense@fp8").value(), {0});
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(MakeRequest({&own[0], &prompt}, settings).policy.kv_format, sparse::KvFormat::kAuto);
  EXPECT_EQ(MakeRequest({&own[1], &prompt}, settings).policy.kv_format, sparse::KvFormat::kFp8E4m3);
  EXPECT_EQ(KvFormatOf({&own[1], &prompt}, settings), sparse::KvFormat::kFp8E4m3);
}

TEST(SweepResumeTest, KvCacheDtypeIsASettingOnlyWhenNotAuto) {
  SweepArgs a;
  const nlohmann::json auto_run = SettingsJson(a, "m");
  EXPECT_FALSE(auto_run.contains("kv_cache_dtype"));  // a run from before the flag resumes as it did
  a.kv_format = sparse::KvFormat::kFp8E4m3;
  const nlohmann::json fp8_run = SettingsJson(a, "m");
  EXPECT_EQ(fp8_run.at("kv_cache_dtype"), "fp8");
  EXPECT_TRUE(CheckSameSettings(fp8_run, SettingsJson(a, "m")).ok());
  for (const auto& [previous, now] : {std::pair{auto_run, fp8_run}, std::pair{fp8_run, auto_run}}) {
    const absl::Status s = CheckSameSettings(previous, now);
    ASSERT_FALSE(s.ok()) << previous.dump() << " -> " << now.dump();
    EXPECT_NE(s.message().find("\"kv_cache_dtype\""), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace argen::sweep

namespace argen::sweep {
namespace {

// --parallel-windows: every configuration at each window, window 0 keeping
// its folder; bad entries name the flag.
// --speculative-windows: every configuration at each speculative window > 0
// too, without parallel decoding (the two do not combine); "_sw<N>" folders.
TEST(SweepGridTest, SpeculativeWindowsAddConfigurations) {
  absl::StatusOr<SweepArgs> a = ParseSweepArgs({"--model", "m", "--out", "o", "--policies", "dense",
                                                "--parallel-windows", "0,4", "--speculative-windows", "0,8,8"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->speculative_windows, (std::vector<int32_t>{0, 8}));
  const std::vector<SweepConfig> grid =
      BuildGrid(a->policy_specs, a->sparsities, a->parallel_windows, a->speculative_windows);
  ASSERT_EQ(grid.size(), 3u);
  EXPECT_EQ(grid[0].label, "dense_0");
  EXPECT_EQ(grid[1].label, "dense_0_pw4");
  EXPECT_EQ(grid[2].label, "dense_0_sw8");
  EXPECT_EQ(grid[2].speculative_window, 8);
  EXPECT_EQ(grid[2].parallel_window, 0);
  absl::StatusOr<SweepArgs> plain = ParseSweepArgs({"--model", "m", "--out", "o"});
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->speculative_windows.empty());
  absl::StatusOr<SweepArgs> b = ParseSweepArgs({"--model", "m", "--out", "o", "--speculative-windows", "4,-2"});
  EXPECT_FALSE(b.ok());
  EXPECT_NE(std::string(b.status().message()).find("--speculative-windows"), std::string::npos) << b.status();
}

TEST(SweepGridTest, ParallelWindowsMultiplyTheGrid) {
  absl::StatusOr<SweepArgs> a = ParseSweepArgs({"--model", "m", "--out", "o", "--policies", "dense,diagonal",
                                                "--sparsities", "95", "--parallel-windows", "0,4,8,4"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->parallel_windows, (std::vector<int32_t>{0, 4, 8}));
  const std::vector<SweepConfig> grid = BuildGrid(a->policy_specs, a->sparsities, a->parallel_windows);
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_EQ(grid[0].label, "dense_0");
  EXPECT_EQ(grid[0].parallel_window, 0);
  EXPECT_EQ(grid[1].label, "dense_0_pw4");
  EXPECT_EQ(grid[1].parallel_window, 4);
  EXPECT_EQ(grid[5].label, "diagonal_95_pw8");
  absl::StatusOr<SweepArgs> plain = ParseSweepArgs({"--model", "m", "--out", "o"});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->parallel_windows, (std::vector<int32_t>{0}));
  for (const char* bad : {"-1", "4,x", ""}) {
    absl::StatusOr<SweepArgs> b = ParseSweepArgs({"--model", "m", "--out", "o", "--parallel-windows", bad});
    EXPECT_FALSE(b.ok()) << bad;
    EXPECT_NE(std::string(b.status().message()).find("--parallel-windows"), std::string::npos) << b.status();
  }
}

}  // namespace
}  // namespace argen::sweep

namespace argen::sweep {
namespace {

// --format and the benchmarks' prompt flags: each format reads its own
// prompts, the default layout stays the default and is no setting.
TEST(SweepArgsTest, FormatAndItsPromptFlags) {
  absl::StatusOr<SweepArgs> a = ParseSweepArgs({"--model", "m", "--out", "o"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->format, OutputFormat::kDefault);
  EXPECT_FALSE(SettingsJson(*a, "m").contains("format"));  // a default run's settings file is as before
  a = ParseSweepArgs({"--model", "m", "--out", "o", "--format", "geneval", "--geneval-prompts", "g/meta.jsonl"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->format, OutputFormat::kGeneval);
  EXPECT_EQ(a->prompts, "g/meta.jsonl");
  EXPECT_EQ(SettingsJson(*a, "m").at("format"), "geneval");
  a = ParseSweepArgs({"--model", "m", "--out", "o", "--format=dpg", "--dpg-prompts", "d/prompts"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->format, OutputFormat::kDpg);
  EXPECT_EQ(a->dpg_prompts, "d/prompts");
  const std::vector<std::pair<std::vector<std::string>, std::string>> errors = {
      {{"--format", "coco"}, "--format \"coco\" is not known; expected default, geneval or dpg"},
      {{"--format", "geneval"}, "--format geneval needs --geneval-prompts"},
      {{"--format", "dpg"}, "--format dpg needs --dpg-prompts"},
      {{"--geneval-prompts", "g.jsonl"}, "--geneval-prompts is read by --format geneval only"},
      {{"--format", "geneval", "--geneval-prompts", "g", "--dpg-prompts", "d"},
       "--dpg-prompts is read by --format dpg only"},
      {{"--format", "geneval", "--geneval-prompts", "g", "--prompts", "p"}, "--prompts and --geneval-prompts"},
      {{"--format", "dpg", "--dpg-prompts", "d", "--images-per-prompt", "5"}, "--format dpg tiles at most 4"},
  };
  for (const auto& [extra, message] : errors) {
    std::vector<std::string> args = {"--model", "m", "--out", "o"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<SweepArgs> bad = ParseSweepArgs(args);
    ASSERT_FALSE(bad.ok()) << message;
    EXPECT_NE(bad.status().message().find(message), std::string::npos) << bad.status();
  }
}

TEST(SweepPromptSetTest, DpgPromptsAreTheFolderInNameOrder) {
  const fs::path dir = TempDir("argen_dpg_prompts");
  std::ofstream(dir / "10.txt") << "ten\n";
  std::ofstream(dir / "9.txt") << "  nine  ";
  std::ofstream(dir / "b.txt") << "bee";
  std::ofstream(dir / "a.txt") << "ay";
  std::ofstream(dir / "notes.md") << "not a prompt";
  absl::StatusOr<std::vector<BenchmarkPrompt>> p = LoadDpgPrompts(dir.string());
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 4u);
  const std::vector<std::pair<std::string, std::string>> expect = {
      {"9", "nine"}, {"10", "ten"}, {"a", "ay"}, {"b", "bee"}};
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ((*p)[i].index, static_cast<int32_t>(i));
    EXPECT_EQ((*p)[i].name, expect[i].first);
    EXPECT_EQ((*p)[i].prompt, expect[i].second);
    EXPECT_EQ((*p)[i].tag, "dpg");
  }
  std::ofstream(dir / "empty.txt") << " \n";
  p = LoadDpgPrompts(dir.string());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("empty.txt is empty"), std::string::npos) << p.status();
  EXPECT_FALSE(LoadDpgPrompts((dir / "missing").string()).ok());
  fs::remove_all(dir);
}

TEST(SweepOutputFormatTest, TwoByTwoGridPlacesImageIAtColumnIMod2RowIDiv2) {
  std::vector<engine::RgbImage> images(3);
  for (size_t i = 0; i < images.size(); ++i) {
    images[i].width = 2;
    images[i].height = 1;
    images[i].rgb.assign(6, static_cast<uint8_t>(10 * (i + 1)));
  }
  absl::StatusOr<engine::RgbImage> grid = TileTwoByTwo(images);
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->width, 4);
  EXPECT_EQ(grid->height, 2);
  // Row 0: image 0 then image 1; row 1: image 2 then black.
  const std::vector<uint8_t> expect = {10, 10, 10, 10, 10, 10, 20, 20, 20, 20, 20, 20,
                                       30, 30, 30, 30, 30, 30, 0,  0,  0,  0,  0,  0};
  EXPECT_EQ(grid->rgb, expect);
  images.resize(5, images[0]);
  EXPECT_FALSE(TileTwoByTwo(images).ok());
  EXPECT_FALSE(TileTwoByTwo({}).ok());
}

}  // namespace
}  // namespace argen::sweep
