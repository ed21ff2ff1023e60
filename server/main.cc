// argen_server: loads the config (file + flag overrides), starts the engine,
// scheduler, gRPC service, the HTTP API (when http_port is set) and /metrics, and on SIGTERM/SIGINT drains the
// accepted requests, refuses new ones and exits 0.
#include <csignal>
#include <cstdio>
#include <iostream>

#include "server/argen_server.h"
#include "server/server_config.h"

namespace {

// Blocks the stop signals in every thread (call before any thread starts) so
// that only the sigwait() below receives them.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  using argen::server::ArgenServer;
  const sigset_t stop_signals = BlockStopSignals();

  absl::StatusOr<argen::server::CommandLine> command_line =
      argen::server::ParseCommandLine(argc, argv);
  if (!command_line.ok()) {
    std::cerr << "argen_server: " << command_line.status().message() << "\n"
              << "run argen_server --help for the keys\n";
    return 2;
  }
  if (command_line->help) {
    std::cout << argen::server::ConfigHelp();
    return 0;
  }
  absl::StatusOr<argen::server::ServerConfig> config = LoadServerConfig(*command_line);
  if (!config.ok()) {
    std::cerr << "argen_server: config: " << config.status().message() << "\n";
    return 2;
  }
  std::cerr << "argen_server: loading " << config->model_dir << " (backend " << config->backend
            << ", vq_backend " << config->vq_backend << ", vq_precision " << config->vq_precision
            << ", image_workers " << argen::server::ResolvedImageWorkers(*config) << ")\n";
  absl::StatusOr<std::unique_ptr<ArgenServer>> server = ArgenServer::Start(*config);
  if (!server.ok()) {
    std::cerr << "argen_server: " << server.status() << "\n";
    return 1;
  }
  const argen::engine::ModelInfo& info = (*server)->engine().info();
  std::cerr << "argen_server: model " << info.name << ", " << info.image_size << "px, "
            << info.image_tokens << " image tokens; serving gRPC on " << config->listen_address
            << ":" << (*server)->port();
  if ((*server)->http_port() >= 0) {
    std::cerr << ", HTTP API on " << config->http_address << ":" << (*server)->http_port();
  }
  if ((*server)->metrics_port() >= 0) {
    std::cerr << ", /metrics on " << config->metrics_address << ":" << (*server)->metrics_port();
  }
  if ((*server)->tls()) std::cerr << (config->tls_client_ca_file.empty() ? " (TLS)" : " (mutual TLS)");
  if (!config->api_keys_file.empty()) std::cerr << " (API keys)";
  std::cerr << std::endl;

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  std::cerr << "argen_server: " << (signal_number == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": draining (up to " << config->drain_timeout_s << " s)" << std::endl;
  const bool drained = (*server)->Shutdown();
  std::cerr << "argen_server: " << (drained ? "drained" : "drain timed out; ended the rest")
            << ", exiting" << std::endl;
  server->reset();
  return 0;
}
