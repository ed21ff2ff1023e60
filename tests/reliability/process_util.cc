#include "tests/reliability/process_util.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/serving/serving_test_util.h"

extern char** environ;

namespace argen::reliability_test {

ServerProcess SpawnProcess(const std::vector<std::string>& args, const std::string& log_path) {
  ServerProcess p;
  p.log_path = log_path;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  if (posix_spawn(&p.pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) p.pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return p;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool WaitServing(ServerProcess& p, int timeout_s) {
  const std::regex serving("serving gRPC on [^ ]*:([0-9]+)");
  for (int i = 0; i < timeout_s * 100; ++i) {
    std::smatch m;
    const std::string text = ReadFile(p.log_path);
    if (std::regex_search(text, m, serving)) {
      p.port = std::stoi(m[1]);
      return true;
    }
    int status = 0;
    if (waitpid(p.pid, &status, WNOHANG) == p.pid) return false;
    usleep(10000);
  }
  return false;
}

int WaitExit(pid_t pid, int timeout_s) {
  for (int i = 0; i < timeout_s * 100; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return WIFSIGNALED(status) ? -WTERMSIG(status) : -999;
    }
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1000;
}

std::vector<int> ThreadsNotBlockingStopSignals(pid_t pid) {
  const unsigned long long want = (1ull << (SIGTERM - 1)) | (1ull << (SIGINT - 1));
  std::vector<int> out;
  std::error_code ec;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(dir, ec)) {
    const int tid = std::stoi(task.path().filename().string());
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigBlk:", 0) != 0) continue;
      if ((std::stoull(line.substr(7), nullptr, 16) & want) != want) out.push_back(tid);
    }
  }
  return out;
}

namespace {

std::string ServerBinary() {
  const char* bin = std::getenv("ARGEN_SERVER_BIN");  // the device runs carry their own build
  return bin != nullptr ? bin : ARGEN_SERVER_BIN;
}

}  // namespace

std::vector<std::string> TinyServerArgs(const std::vector<std::string>& extra) {
  const std::string src = serving_test::SourceDir();
  std::vector<std::string> args = {ServerBinary(),
                                   "--config",
                                   src + "/configs/argen.yaml",
                                   "--model_dir",
                                   src + "/tests/goldens/tiny/tiny-mha",
                                   "--listen_address=127.0.0.1",
                                   "--port=0",
                                   "--metrics_port=-1",
                                   "--threads=1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> ModelServerArgs(const std::string& model_dir, bool http,
                                         const std::vector<std::string>& extra) {
  std::vector<std::string> args = {ServerBinary(), "--model_dir",       model_dir,    "--listen_address=127.0.0.1",
                                   "--port=0",     "--metrics_port=-1", "--threads=2"};
  if (http) {
    args.push_back("--http_address=127.0.0.1");
    args.push_back("--http_port=0");
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

int AnnouncedHttpPort(const ServerProcess& p) {
  std::smatch m;
  const std::string log = ReadFile(p.log_path);
  return std::regex_search(log, m, std::regex("HTTP API on [^ ]*:([0-9]+)")) ? std::stoi(m[1].str()) : 0;
}

int StopServer(const ServerProcess& p, int timeout_s) {
  kill(p.pid, SIGTERM);
  return WaitExit(p.pid, timeout_s);
}

}  // namespace argen::reliability_test
