// Fuzzes the server configuration (server/server_config.cc): the YAML file
// (nested sections, scalars, lists, anchors, bad values), then the same
// input as command-line flags, one per line. Whatever is accepted must pass
// or fail ValidateConfig cleanly and render --help.
#include <sstream>
#include <string>
#include <vector>

#include "server/server_config.h"
#include "tests/fuzz/fuzz_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace argen::server;
  const std::string text(reinterpret_cast<const char*>(data), size);
  ServerConfig config;
  if (ApplyConfigYaml(config, text, "fuzz.yaml").ok()) {
    (void)ValidateConfig(config);
    // The setters' ranges must hold (0: kv_budget_bytes / max_batch_rows auto; -1: max_prefill_tokens auto).
    if ((config.max_batch_rows != 0 && config.max_batch_rows < 2) || config.queue_limit < 1 ||
        config.kv_budget_bytes < 0 || config.max_prefill_tokens < -1) {
      __builtin_trap();
    }
  }
  // The lines as argv (no --config: the fuzzer must not read files).
  std::vector<std::string> args = {"argen_server"};
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line) && args.size() < 64;) {
    if (line.rfind("--config", 0) != 0) args.push_back(line);
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  absl::StatusOr<CommandLine> cl = ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  if (cl.ok() && cl->config_path.empty()) (void)LoadServerConfig(*cl);
  return 0;
}
