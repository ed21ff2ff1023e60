// Config parsing: YAML keys, byte units, flag overrides, and errors that
// name the key (and the file or flag it came from).
#include "server/server_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "server/byte_size.h"

namespace argen::server {
namespace {

TEST(ByteSizeTest, ParsesUnits) {
  EXPECT_EQ(ParseByteSize("1024").value(), 1024);
  EXPECT_EQ(ParseByteSize("8GiB").value(), int64_t{8} << 30);
  EXPECT_EQ(ParseByteSize("512 MiB").value(), int64_t{512} << 20);
  EXPECT_EQ(ParseByteSize("1.5KiB").value(), 1536);
  EXPECT_EQ(ParseByteSize("2GB").value(), 2000000000);
  EXPECT_EQ(ParseByteSize("3kB").value(), 3000);
  EXPECT_EQ(ParseByteSize("7B").value(), 7);
  EXPECT_FALSE(ParseByteSize("8XB").ok());
  EXPECT_FALSE(ParseByteSize("GiB").ok());
  EXPECT_FALSE(ParseByteSize("-1GiB").ok());
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("99999999TiB").ok());
}

// Issue 15, defect 7: Kubernetes-style units ("40Gi", "4G") were refused.
TEST(ByteSizeTest, AcceptsKubernetesAndCommonSpellings) {
  EXPECT_EQ(ParseByteSize("40Gi").value(), int64_t{40} << 30);
  EXPECT_EQ(ParseByteSize("512Mi").value(), int64_t{512} << 20);
  EXPECT_EQ(ParseByteSize("64Ki").value(), int64_t{64} << 10);
  EXPECT_EQ(ParseByteSize("2Ti").value(), int64_t{2} << 40);
  EXPECT_EQ(ParseByteSize("1Pi").value(), int64_t{1} << 50);
  EXPECT_EQ(ParseByteSize("4G").value(), 4000000000);
  EXPECT_EQ(ParseByteSize("4GB").value(), 4000000000);
  EXPECT_EQ(ParseByteSize("4GiB").value(), int64_t{4} << 30);
  EXPECT_EQ(ParseByteSize("500M").value(), 500000000);
  EXPECT_EQ(ParseByteSize("8k").value(), 8000);
  EXPECT_EQ(ParseByteSize("8K").value(), 8000);
  EXPECT_EQ(ParseByteSize("1.5Gi").value(), int64_t{3} << 29);
  EXPECT_EQ(ParseByteSize(" 12 Mi ").value(), int64_t{12} << 20);
  EXPECT_EQ(ParseByteSize("1073741824").value(), int64_t{1} << 30);
  // Kubernetes' "m" is milli: refused with a hint rather than read as mega.
  absl::StatusOr<int64_t> milli = ParseByteSize("512m");
  ASSERT_FALSE(milli.ok());
  EXPECT_NE(milli.status().message().find("milli"), std::string::npos) << milli.status();
  EXPECT_FALSE(ParseByteSize("4gb").ok());
  EXPECT_FALSE(ParseByteSize("4Gii").ok());
  // Through the config, from a file and from a flag.
  ServerConfig c;
  ASSERT_TRUE(ApplyConfigYaml(c, "kv_budget_bytes: 40Gi\nmax_message_bytes: 64Mi\n", "k8s.yaml").ok());
  EXPECT_EQ(c.kv_budget_bytes, int64_t{40} << 30);
  EXPECT_EQ(c.max_message_bytes, int64_t{64} << 20);
  ASSERT_TRUE(SetConfigValue(c, "kv_budget_bytes", "4G").ok());
  EXPECT_EQ(c.kv_budget_bytes, 4000000000);
}

TEST(ServerConfigTest, LogFormatAndLevelKeys) {
  ServerConfig c;
  EXPECT_EQ(c.log_format, "text");
  EXPECT_EQ(c.log_level, "info");
  ASSERT_TRUE(ApplyConfigYaml(c, "log_format: json\nlog_level: warning\n", "log.yaml").ok());
  EXPECT_EQ(c.log_format, "json");
  EXPECT_EQ(c.log_level, "warning");
  absl::Status bad = SetConfigValue(c, "log_format", "xml");
  EXPECT_NE(bad.message().find("log_format"), std::string::npos) << bad;
  EXPECT_FALSE(SetConfigValue(c, "log_level", "loud").ok());
}

// Issue 15, defect 4: --bogus said "missing value"; --help and --version.
TEST(ServerConfigTest, CommandLineSaysUnknownFlagAndHasHelpAndVersion) {
  const char* bogus[] = {"argen_server", "--bogus"};
  absl::StatusOr<CommandLine> cl = ParseCommandLine(2, bogus);
  ASSERT_FALSE(cl.ok());
  EXPECT_NE(cl.status().message().find("unknown flag --bogus"), std::string::npos) << cl.status();
  const char* positional[] = {"argen_server", "model"};
  cl = ParseCommandLine(2, positional);
  ASSERT_FALSE(cl.ok());
  EXPECT_NE(cl.status().message().find("'model'"), std::string::npos) << cl.status();
  const char* version[] = {"argen_server", "--version"};
  cl = ParseCommandLine(2, version);
  ASSERT_TRUE(cl.ok());
  EXPECT_TRUE(cl->version);
  const char* help[] = {"argen_server", "-h"};
  cl = ParseCommandLine(2, help);
  ASSERT_TRUE(cl.ok());
  EXPECT_TRUE(cl->help);
  const std::string text = ConfigHelp();
  for (const ConfigKey& k : ConfigKeys()) {
    EXPECT_NE(text.find(std::string("--") + k.name), std::string::npos) << k.name;
  }
  EXPECT_NE(text.find("--kv_budget_bytes VALUE=auto"), std::string::npos) << text;
  // Repeated flags: the last wins, as in the file-then-flags order.
  const char* twice[] = {"argen_server", "--model_dir=/m", "--queue_limit", "3", "--queue_limit=5"};
  cl = ParseCommandLine(5, twice);
  ASSERT_TRUE(cl.ok()) << cl.status();
  absl::StatusOr<ServerConfig> c = LoadServerConfig(*cl);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->queue_limit, 5);
}

TEST(ServerConfigTest, YamlSetsEveryKindOfKey) {
  ServerConfig c;
  const std::string yaml = R"(
model_dir: /models/janus
backend: cuda
vq_backend: cpu
threads: 3
port: 6000
metrics_port: -1
kv_budget_bytes: 2GiB
max_batch_rows: 32
queue_limit: 5
max_message_bytes: 8MiB
progress_interval_ms: 100
drain_timeout_s: 2.5
default_policy:
  name: diagonal
  sparsity: 0.75
  n_recent: 40
default_sampling:
  cfg_weight: 4.5
  top_k: 100
)";
  ASSERT_TRUE(ApplyConfigYaml(c, yaml, "test.yaml").ok());
  EXPECT_EQ(c.model_dir, "/models/janus");
  EXPECT_EQ(c.backend, "cuda");
  EXPECT_EQ(c.vq_backend, "cpu");
  EXPECT_EQ(c.threads, 3);
  EXPECT_EQ(c.port, 6000);
  EXPECT_EQ(c.metrics_port, -1);
  EXPECT_EQ(c.kv_budget_bytes, int64_t{2} << 30);
  EXPECT_EQ(c.max_batch_rows, 32);
  EXPECT_EQ(c.queue_limit, 5);
  EXPECT_EQ(c.max_message_bytes, int64_t{8} << 20);
  EXPECT_EQ(c.progress_interval_ms, 100);
  EXPECT_DOUBLE_EQ(c.drain_timeout_s, 2.5);
  EXPECT_EQ(c.default_policy.kind, sparse::PolicyKind::kDiagonal);
  EXPECT_DOUBLE_EQ(c.default_policy.sparsity, 0.75);
  EXPECT_EQ(c.default_policy.n_recent, 40);
  EXPECT_FLOAT_EQ(c.default_sampling.cfg_weight, 4.5f);
  EXPECT_EQ(c.default_sampling.top_k, 100);
  EXPECT_TRUE(ValidateConfig(c).ok());
}

struct BadCase {
  const char* yaml;
  const char* must_mention;
};

TEST(ServerConfigTest, ErrorsNameTheKeyAndFile) {
  const BadCase cases[] = {
      {"modle_dir: x\n", "unknown key 'modle_dir'"},
      {"kv_budget_bytes: 8XB\n", "key 'kv_budget_bytes'"},
      {"port: 70000\n", "key 'port'"},
      {"port: eighty\n", "key 'port'"},
      {"backend: tpu\n", "key 'backend'"},
      {"vq_backend: gpu\n", "key 'vq_backend'"},
      {"max_batch_rows: 1\n", "key 'max_batch_rows'"},
      {"queue_limit: 0\n", "key 'queue_limit'"},
      {"default_policy:\n  name: sparse_magic\n", "key 'default_policy.name'"},
      {"default_policy:\n  sparsity: 1.0\n", "key 'default_policy.sparsity'"},
      {"default_policy:\n  colour: red\n", "unknown key 'default_policy.colour'"},
      {"default_sampling:\n  temperature: -1\n", "key 'default_sampling.temperature'"},
      {"default_sampling:\n  temperature: 100.5\n", "key 'default_sampling.temperature'"},
      {"default_sampling:\n  top_p: 1.5\n", "key 'default_sampling.top_p'"},
      {"threads: [1, 2]\n", "key 'threads'"},
      {"threads:\n", "key 'threads'"},
      {"model_dir: [unclosed\n", "not valid YAML"},
      {"- a\n- b\n", "mapping"},
  };
  for (const BadCase& c : cases) {
    ServerConfig config;
    absl::Status s = ApplyConfigYaml(config, c.yaml, "my.yaml");
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_NE(s.message().find(c.must_mention), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("my.yaml"), std::string::npos) << s.message();
  }
}

TEST(ServerConfigTest, FlagsOverrideTheFile) {
  const std::string path = ::testing::TempDir() + "/argen_config_test.yaml";
  {
    std::ofstream f(path);
    f << "model_dir: /from/file\nkv_budget_bytes: 1GiB\nqueue_limit: 3\n";
  }
  const char* argv[] = {"argen_server",          "--config",       path.c_str(),       "--kv_budget_bytes=8GiB",
                        "--default_policy.name", "diagonal_sink4", "--vq_backend=cuda"};
  absl::StatusOr<CommandLine> cl = ParseCommandLine(7, argv);
  ASSERT_TRUE(cl.ok()) << cl.status();
  absl::StatusOr<ServerConfig> c = LoadServerConfig(*cl);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_dir, "/from/file");
  EXPECT_EQ(c->kv_budget_bytes, int64_t{8} << 30);  // flag wins
  EXPECT_EQ(c->queue_limit, 3);                     // file kept
  EXPECT_EQ(c->default_policy.kind, sparse::PolicyKind::kDiagonalSink4);
  EXPECT_EQ(c->vq_backend, "cuda");
  std::remove(path.c_str());
}

TEST(ServerConfigTest, CommandLineErrorsNameTheFlag) {
  const char* unknown[] = {"argen_server", "--kv_budget=1GiB"};
  absl::StatusOr<CommandLine> cl = ParseCommandLine(2, unknown);
  ASSERT_FALSE(cl.ok());
  EXPECT_NE(cl.status().message().find("--kv_budget"), std::string::npos);

  const char* bad_value[] = {"argen_server", "--model_dir=/m", "--queue_limit=-4"};
  cl = ParseCommandLine(3, bad_value);
  ASSERT_TRUE(cl.ok());
  absl::StatusOr<ServerConfig> c = LoadServerConfig(*cl);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("flag --queue_limit"), std::string::npos) << c.status();

  const char* missing_value[] = {"argen_server", "--port"};
  EXPECT_FALSE(ParseCommandLine(2, missing_value).ok());

  const char* no_model[] = {"argen_server"};
  c = LoadServerConfig(*ParseCommandLine(1, no_model));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("model_dir"), std::string::npos);

  const char* missing_file[] = {"argen_server", "--config=/nonexistent/argen.yaml"};
  c = LoadServerConfig(*ParseCommandLine(2, missing_file));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/argen.yaml"), std::string::npos);
}

TEST(ServerConfigTest, VqPrecisionAndAutoImageWorkers) {
  ServerConfig c;
  EXPECT_EQ(c.vq_precision, "auto");
  EXPECT_EQ(c.image_workers, 0);          // auto
  EXPECT_EQ(ResolvedImageWorkers(c), 1);  // backend cpu
  c.backend = "cuda";
  const int32_t gpu_auto = ResolvedImageWorkers(c);
  EXPECT_GE(gpu_auto, 1);
  EXPECT_LE(gpu_auto, 8);
  EXPECT_EQ(gpu_auto, static_cast<int32_t>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8)));
  ASSERT_TRUE(ApplyConfigYaml(c, "image_workers: 3\nvq_precision: bf16\n", "t.yaml").ok());
  EXPECT_EQ(ResolvedImageWorkers(c), 3);
  EXPECT_EQ(c.vq_precision, "bf16");
  ASSERT_TRUE(ApplyConfigYaml(c, "image_workers: auto\n", "t.yaml").ok());
  EXPECT_EQ(c.image_workers, 0);
  for (const char* bad : {"image_workers: 0\n", "image_workers: many\n", "vq_precision: fp16\n"}) {
    absl::Status s = ApplyConfigYaml(c, bad, "t.yaml");
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find(std::string(bad).substr(0, std::string(bad).find(':'))), std::string::npos) << s;
  }
}

// Issue 34: threads 0 on the CPU engine took every core and starved the image
// path (late or missing partial images); auto leaves one core to it.
TEST(ServerConfigTest, AutoThreadsLeaveTheImagePathACore) {
  ServerConfig c;
  EXPECT_EQ(c.threads, 0);
  EXPECT_EQ(ResolvedThreads(c, 16), 15);
  EXPECT_EQ(ResolvedThreads(c, 2), 1);
  EXPECT_EQ(ResolvedThreads(c, 1), 1);
  EXPECT_EQ(ResolvedThreads(c, 0), 1);  // hardware_concurrency() unknown
  EXPECT_GE(ResolvedThreads(c), 1);
  c.threads = 16;  // as configured
  EXPECT_EQ(ResolvedThreads(c, 16), 16);
  c.threads = 0;
  c.backend = "cuda";  // the backend's own choice
  EXPECT_EQ(ResolvedThreads(c, 16), 0);
}

TEST(ServerConfigTest, FamilyOptionsFromVqganDirSectionAndFlag) {
  // vqgan_dir (key and flag, as before) is the family option vqgan_dir.
  ServerConfig c;
  EXPECT_TRUE(c.family_options.empty());
  ASSERT_TRUE(ApplyConfigYaml(c, "vqgan_dir: /chameleon/tokenizer\n", "t.yaml").ok());
  EXPECT_EQ(c.family_options, (std::map<std::string, std::string>{{"vqgan_dir", "/chameleon/tokenizer"}}));
  // The section family_options takes any name: the model's family checks it at load.
  ASSERT_TRUE(ApplyConfigYaml(c, "family_options:\n  vqgan_dir: vq\n  other: x\n", "t.yaml").ok());
  EXPECT_EQ(c.family_options, (std::map<std::string, std::string>{{"vqgan_dir", "vq"}, {"other", "x"}}));
  for (const char* bad : {"family_options: vq\n", "family_options:\n  vqgan_dir: \"\"\n", "vqgan_dir: \"\"\n"}) {
    ServerConfig d;
    absl::Status s = ApplyConfigYaml(d, bad, "t.yaml");
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("t.yaml"), std::string::npos) << s;
  }

  const char* flags[] = {"argen_server",    "--model_dir=/m", "--vqgan_dir=a",
                         "--family_option", "vqgan_dir=b",    "--family_option=other=c=d"};
  absl::StatusOr<CommandLine> cl = ParseCommandLine(6, flags);
  ASSERT_TRUE(cl.ok()) << cl.status();
  absl::StatusOr<ServerConfig> loaded = LoadServerConfig(*cl);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->family_options, (std::map<std::string, std::string>{{"vqgan_dir", "b"}, {"other", "c=d"}}));
  const char* no_key[] = {"argen_server", "--model_dir=/m", "--family_option=vq"};
  cl = ParseCommandLine(3, no_key);
  ASSERT_TRUE(cl.ok()) << cl.status();
  loaded = LoadServerConfig(*cl);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("--family_option KEY=VALUE"), std::string::npos) << loaded.status();
  EXPECT_NE(ConfigHelp().find("--family_option"), std::string::npos);
}

TEST(ServerConfigTest, PromptSharingKeys) {
  ServerConfig c;
  EXPECT_TRUE(c.share_prompt_kv);
  EXPECT_FALSE(c.share_prompt_kv_across_requests);
  c.model_dir = "/models/janus";
  ASSERT_TRUE(ApplyConfigYaml(c, "share_prompt_kv_across_requests: true\n", "test.yaml").ok());
  EXPECT_TRUE(c.share_prompt_kv_across_requests);
  EXPECT_TRUE(ValidateConfig(c).ok());
  ASSERT_TRUE(SetConfigValue(c, "share_prompt_kv", "false").ok());
  absl::Status s = ValidateConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("key 'share_prompt_kv_across_requests': needs share_prompt_kv: true"), std::string::npos)
      << s;
  EXPECT_FALSE(ApplyConfigYaml(c, "share_prompt_kv_across_requests: sometimes\n", "test.yaml").ok());
}

TEST(ServerConfigTest, WeightDtypeKeyAndFlag) {
  ServerConfig c;
  EXPECT_EQ(c.weight_dtype, "auto");
  ASSERT_TRUE(ApplyConfigYaml(c, "weight_dtype: fp8\n", "test.yaml").ok());
  EXPECT_EQ(c.weight_dtype, "fp8");
  absl::Status bad = ApplyConfigYaml(c, "weight_dtype: int4\n", "test.yaml");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("weight_dtype"), std::string::npos) << bad;
  EXPECT_NE(bad.message().find("auto or fp8"), std::string::npos) << bad;
  EXPECT_EQ(c.weight_dtype, "fp8");  // a refused value changes nothing
  const char* argv[] = {"argen_server", "--model_dir=/models/janus", "--weight_dtype=fp8"};
  absl::StatusOr<ServerConfig> flagged = LoadServerConfig(*ParseCommandLine(3, argv));
  ASSERT_TRUE(flagged.ok()) << flagged.status();
  EXPECT_EQ(flagged->weight_dtype, "fp8");
}

TEST(ServerConfigTest, ShippedExampleConfigParses) {
  const char* root = std::getenv("ARGEN_SOURCE_DIR");
  ASSERT_NE(root, nullptr);
  const std::string path = std::string(root) + "/configs/argen.yaml";
  const std::string arg = "--config=" + path;
  const char* argv[] = {"argen_server", arg.c_str()};
  absl::StatusOr<ServerConfig> c = LoadServerConfig(*ParseCommandLine(2, argv));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->model_dir.empty());
  EXPECT_EQ(c->vq_backend, "auto");
  EXPECT_EQ(c->weight_dtype, "auto");
}

TEST(ServerConfigTest, ModelSamplingDefaultsFillOnlyWhatTheConfigLeavesUnset) {
  engine::SamplingParams lumina;
  lumina.cfg_weight = 4.0f;
  lumina.top_k = 1024;
  // Nothing set: the model's defaults.
  ServerConfig plain;
  ApplyModelSamplingDefaults(plain, lumina);
  EXPECT_EQ(plain.default_sampling.cfg_weight, 4.0f);
  EXPECT_EQ(plain.default_sampling.top_k, 1024);
  EXPECT_EQ(plain.default_sampling.temperature, 1.0f);
  // A key the YAML or a flag set wins, even at the built-in value.
  ServerConfig keyed;
  ASSERT_TRUE(SetConfigValue(keyed, "default_sampling.cfg_weight", "5").ok());
  ASSERT_TRUE(SetConfigValue(keyed, "default_sampling.top_k", "0").ok());
  EXPECT_TRUE(keyed.WasSet("default_sampling.top_k"));
  EXPECT_FALSE(keyed.WasSet("default_sampling.top_p"));
  ApplyModelSamplingDefaults(keyed, lumina);
  EXPECT_EQ(keyed.default_sampling.cfg_weight, 5.0f);
  EXPECT_EQ(keyed.default_sampling.top_k, 0);
  // A value changed in code (in-process servers) counts as set.
  ServerConfig coded;
  coded.default_sampling.cfg_weight = 3.0f;
  ApplyModelSamplingDefaults(coded, lumina);
  EXPECT_EQ(coded.default_sampling.cfg_weight, 3.0f);
  EXPECT_EQ(coded.default_sampling.top_k, 1024);
}

}  // namespace
}  // namespace argen::server

namespace argen::server {
namespace {

TEST(ServerConfigTest, AutoSizingKeysAndTheirCpuAndCudaResolution) {
  ServerConfig c;
  // The defaults are auto.
  EXPECT_EQ(c.kv_budget_bytes, 0);
  EXPECT_EQ(c.max_batch_rows, 0);
  EXPECT_EQ(c.max_prefill_tokens, -1);
  c.backend = "cpu";
  EXPECT_EQ(ResolvedKvBudget(c), int64_t{4} << 30);
  EXPECT_EQ(ResolvedMaxBatchRows(c), 64);
  c.backend = "cuda";
  EXPECT_EQ(ResolvedKvBudget(c), 0);  // the engine sizes it from the card
  EXPECT_EQ(ResolvedMaxBatchRows(c), 0);
  EXPECT_EQ(ResolvedMaxPrefillTokens(c, 2100), 8400);
  ASSERT_TRUE(ApplyConfigYaml(c,
                              "kv_budget_bytes: 40Gi\nmax_batch_rows: 4096\nmax_prefill_tokens: 0\n"
                              "step_log: /tmp/steps.txt\n",
                              "t.yaml")
                  .ok());
  EXPECT_EQ(ResolvedKvBudget(c), int64_t{40} << 30);
  EXPECT_EQ(ResolvedMaxBatchRows(c), 4096);
  EXPECT_EQ(ResolvedMaxPrefillTokens(c, 4096), 0);  // no bound
  EXPECT_EQ(c.step_log, "/tmp/steps.txt");
  ASSERT_TRUE(
      ApplyConfigYaml(c, "kv_budget_bytes: auto\nmax_batch_rows: auto\nmax_prefill_tokens: auto\n", "t.yaml").ok());
  EXPECT_EQ(c.kv_budget_bytes, 0);
  EXPECT_EQ(c.max_batch_rows, 0);
  EXPECT_EQ(c.max_prefill_tokens, -1);
  absl::Status bad = ApplyConfigYaml(c, "max_prefill_tokens: -3\n", "t.yaml");
  EXPECT_NE(bad.message().find("key 'max_prefill_tokens'"), std::string::npos) << bad;
}

}  // namespace
}  // namespace argen::server
