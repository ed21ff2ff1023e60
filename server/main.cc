// argen_server: loads the config (file + flag overrides), starts the engine,
// scheduler, gRPC service, the HTTP API (when http_port is set) and /metrics,
// and on SIGTERM/SIGINT drains the accepted requests, refuses new ones and
// exits 0 (a repeated signal while draining is logged and ignored:
// server/signals.h).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/version.h"
#include "engine/request_rules.h"
#include "server/argen_server.h"
#include "server/config_values.h"
#include "server/request_log.h"
#include "server/server_config.h"
#include "server/signals.h"

namespace {

namespace log = argen::server::log;

// Every key with a reader, as the server will run with it.
nlohmann::ordered_json EffectiveConfig(const argen::server::ServerConfig& config) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const argen::server::ConfigKey& k : argen::server::ConfigKeys()) {
    if (std::optional<std::string> v = argen::server::ConfigValueText(config, k.name)) j[k.name] = *v;
  }
  return j;
}

}  // namespace

// Runs before every shared library's constructor, so no thread (OpenBLAS's
// pool included) ever starts with the stop signals unblocked.
__attribute__((section(".preinit_array"),
               used)) static void (*const kBlockStopSignals)(int, char**,
                                                             char**) = &argen::server::BlockStopSignalsAtLoad;

int main(int argc, char** argv) {
  using argen::server::ArgenServer;

  absl::StatusOr<argen::server::CommandLine> command_line = argen::server::ParseCommandLine(argc, argv);
  if (!command_line.ok()) {
    std::cerr << "argen_server: " << command_line.status().message() << "\n"
              << "run argen_server --help for the keys\n";
    return 2;
  }
  if (command_line->help) {
    std::cout << argen::server::ConfigHelp();
    return 0;
  }
  if (command_line->version) {
    std::cout << argen::VersionLine("argen_server") << "\n";
    return 0;
  }
  absl::StatusOr<argen::server::ServerConfig> config = LoadServerConfig(*command_line);
  if (!config.ok()) {
    std::cerr << "argen_server: config: " << config.status().message() << "\n";
    return 2;
  }
  log::Configure(*log::ParseFormat(config->log_format), *log::ParseLevel(config->log_level));
  log::Event(spdlog::level::info, "startup",
             absl::StrCat("argen_server ", argen::Version(), " (", std::string(argen::BuildType()), " build): loading ",
                          config->model_dir, " (backend ", config->backend, ", vq_backend ", config->vq_backend,
                          ", vq_precision ", config->vq_precision, ", weight_dtype ", config->weight_dtype,
                          ", threads ", argen::server::ResolvedThreads(*config), ", image_workers ",
                          argen::server::ResolvedImageWorkers(*config), ")"),
             {{"version", argen::Version()},
              {"build_type", std::string(argen::BuildType())},
              {"config", EffectiveConfig(*config)}});
  absl::StatusOr<std::unique_ptr<ArgenServer>> server = ArgenServer::Start(*config);
  if (!server.ok()) {
    log::Event(spdlog::level::err, "startup_failed", absl::StrCat("argen_server: ", server.status().ToString()));
    return 1;
  }
  const argen::engine::ModelInfo& info = (*server)->engine().info();
  // The limits the engine enforces, and how it sized them when they were "auto".
  log::Event(spdlog::level::info, "sizing",
             absl::StrCat("max_batch_rows ", info.max_batch_rows, ", kv_budget_bytes ", info.kv_budget_bytes, " (",
                          absl::StrFormat("%.2f", info.kv_budget_bytes / 1e9), " GB)",
                          info.memory_sizing.empty() ? "" : "; ", info.memory_sizing),
             {{"max_batch_rows", info.max_batch_rows}, {"kv_budget_bytes", info.kv_budget_bytes}});
  const argen::engine::ImageLayout size = argen::engine::DefaultLayout(info);
  const size_t sizes = argen::engine::ImageLayouts(info).size();
  std::string serving =
      absl::StrCat("model ", info.name, ", ", size.width, "x", size.height, " px, ", size.image_tokens, " image tokens",
                   sizes > 1 ? absl::StrCat(" (default of ", sizes, " sizes)") : "", "; serving gRPC on ",
                   config->listen_address, ":", (*server)->port());
  if ((*server)->http_port() >= 0) {
    absl::StrAppend(&serving, ", HTTP API on ", config->http_address, ":", (*server)->http_port());
  }
  if ((*server)->metrics_port() >= 0) {
    absl::StrAppend(&serving, ", /metrics on ", config->metrics_address, ":", (*server)->metrics_port());
  }
  if ((*server)->tls()) absl::StrAppend(&serving, config->tls_client_ca_file.empty() ? " (TLS)" : " (mutual TLS)");
  if (!config->api_keys_file.empty()) absl::StrAppend(&serving, " (API keys)");
  log::Event(spdlog::level::info, "serving", serving,
             {{"model", info.name},
              {"backend", info.backend},
              {"grpc_port", (*server)->port()},
              {"http_port", (*server)->http_port()},
              {"metrics_port", (*server)->metrics_port()},
              {"tls", (*server)->tls()},
              {"api_keys", !config->api_keys_file.empty()}});

  if (!argen::server::AllThreadsBlockStopSignals()) {
    log::Event(spdlog::level::warn, "signals",
               "a thread does not block SIGTERM/SIGINT; a stop signal may end the process without a drain");
  }

  // A device that fails for good (a sticky CUDA error) ends the process with
  // exit code 3, so that its orchestrator restarts it (docs/operations.md).
  (*server)->SetFatalErrorHandler([](const absl::Status&) { kill(getpid(), SIGTERM); });

  const int signal_number = argen::server::WaitForStopSignal();
  if (absl::Status fatal = (*server)->fatal_error(); !fatal.ok()) {
    log::Event(spdlog::level::err, "device_failed",
               absl::StrCat("the device failed (", fatal.message(),
                            "); every request was ended; exiting with code 3 for a restart"));
    (*server)->Shutdown();
    server->reset();
    return 3;
  }
  log::Event(
      spdlog::level::info, "draining",
      absl::StrCat(argen::server::StopSignalName(signal_number), ": draining (up to ", config->drain_timeout_s, " s)"));
  bool drained = false;
  {
    const double drain_timeout_s = config->drain_timeout_s;
    argen::server::RepeatedStopSignalWatcher repeated([drain_timeout_s](int again) {
      log::Event(spdlog::level::warn, "signal_ignored",
                 absl::StrCat(argen::server::StopSignalName(again),
                              " again while draining: ignored (the drain ends within ", drain_timeout_s, " s)"));
    });
    drained = (*server)->Shutdown();
  }
  log::Event(drained ? spdlog::level::info : spdlog::level::warn, "shutdown",
             drained ? "drained, exiting" : "drain timed out; ended the rest, exiting", {{"drained", drained}});
  server->reset();
  return 0;
}
