// argen_server as a child process, for the reliability tests: spawn with
// stderr to a file, wait for its "serving gRPC on" line, wait for its exit.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace argen::reliability_test {

struct ServerProcess {
  pid_t pid = -1;
  std::string log_path;  // its stderr
  int port = 0;          // the gRPC port it announced (0: none yet)
};

// Starts `args` (args[0] is the binary) with stderr to `log_path`.
ServerProcess SpawnProcess(const std::vector<std::string>& args, const std::string& log_path);

// Waits up to `timeout_s` for "serving gRPC on <addr>:<port>" in the log and
// sets p.port; false when the process exited or the time ran out.
bool WaitServing(ServerProcess& p, int timeout_s = 60);

// The exit code; -(signal) when a signal ended it; -1000 when it was still
// running after `timeout_s` (it is then killed).
int WaitExit(pid_t pid, int timeout_s);

std::string ReadFile(const std::string& path);

// Tids of the process's threads whose SigBlk lacks SIGTERM or SIGINT.
std::vector<int> ThreadsNotBlockingStopSignals(pid_t pid);

// argen_server (the build's, or $ARGEN_SERVER_BIN) with the tiny checkpoint
// on 127.0.0.1, ephemeral port, no metrics unless `extra` asks, plus `extra`
// flags (later flags override earlier ones).
std::vector<std::string> TinyServerArgs(const std::vector<std::string>& extra = {});

// argen_server (as above) serving `model_dir` with the family's own defaults (no
// --config): 127.0.0.1, ephemeral gRPC port, no metrics, 2 threads; with `http`
// the HTTP API too, on an ephemeral port; then `extra`. The family server tests'
// common start.
std::vector<std::string> ModelServerArgs(const std::string& model_dir, bool http,
                                         const std::vector<std::string>& extra = {});

// The HTTP port the server announced in its log ("HTTP API on <addr>:<port>");
// 0 when it announced none.
int AnnouncedHttpPort(const ServerProcess& p);

// SIGTERM, then its exit code as WaitExit gives it.
int StopServer(const ServerProcess& p, int timeout_s = 120);

}  // namespace argen::reliability_test
