// The official OpenAI Python SDK against argen over HTTPS with an API key
// (tests/serving/openai_sdk_check.py): images.generate(n=2, size,
// response_format="b64_json") gives PNGs, streaming with partial_images=2
// gives two partial images then the completed one, errors map to the SDK's
// exceptions. The SDK is test tooling in .venv (scripts/dev-python.sh); where
// it is missing (CI) the test is skipped; tests/serving/http_api_test.cc
// covers the same behaviour with a C++ client and always runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "server/auth.h"
#include "tests/serving/http_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

std::string Python() {
  if (const char* p = std::getenv("ARGEN_TEST_PYTHON")) return p;
  return SourceDir() + "/.venv/bin/python";
}

int RunCommand(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[512];
  while (fgets(buf, sizeof(buf), pipe) != nullptr) *output += buf;
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(OpenAiSdkTest, SdkGeneratesAndStreamsOverHttpsWithAnApiKey) {
  const std::string python = Python();
  std::string probe;
  if (!std::filesystem::exists(python) || RunCommand("'" + python + "' -c 'import openai'", &probe) != 0) {
    GTEST_SKIP() << "no OpenAI SDK at " << python
                 << " (scripts/dev-python.sh installs it; ARGEN_TEST_PYTHON overrides)";
  }
  TempDir dir;
  const TestCerts certs = MakeTestCerts(dir);
  ASSERT_TRUE(certs.error.empty()) << certs.error;
  server::ServerConfig c = LoopbackConfig(SourceDir() + "/tests/goldens/tiny/tiny-mha");
  c.http_address = "127.0.0.1";
  c.http_port = 0;
  c.tls_cert_file = certs.server_cert;
  c.tls_key_file = certs.server_key;
  c.api_keys_file = dir.Write("keys", absl::StrCat("sdk ", server::Sha256Hex("sk-argen-test"), "\n"));
  c.served_model_names = {"dall-e-3"};  // an app's hard-coded name
  engine::EngineOptions o;
  o.model_dir = c.model_dir;
  o.threads = 1;
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::CreateEngine(o);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_STARTED(t, StartServer(c, *std::move(e)));
  // The tiny model samples faster than its image path decodes: pace it so
  // that no partial image is dropped (on real models steps are far slower).
  t.engine->set_step_delay(absl::Milliseconds(4));
  const engine::ModelInfo& info = t.server->engine().info();
  const std::string command = absl::StrCat(
      "'", python, "' '", SourceDir(), "/tests/serving/openai_sdk_check.py' https://localhost:", t.server->http_port(),
      "/v1 sk-argen-test '", certs.ca, "' ", info.image_size, "x", info.image_size, " ", info.name, " dall-e-3");
  std::string output;
  EXPECT_EQ(RunCommand(command, &output), 0) << output;
  EXPECT_NE(output.find("stream: image_generation.partial_image image_generation.partial_image "
                        "image_generation.completed"),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace argen::serving_test
