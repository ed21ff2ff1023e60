// argen_server as a process: config errors exit 2 naming the key; SIGTERM
// while requests run lets them finish, then the process exits 0.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "client/commands.h"
#include "tests/serving/serving_test_util.h"

extern char** environ;

namespace argen::serving_test {
namespace {

struct Process {
  pid_t pid = -1;
  std::string stderr_path;
};

Process Spawn(const std::vector<std::string>& args, const std::string& stderr_path) {
  Process p;
  p.stderr_path = stderr_path;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  EXPECT_EQ(posix_spawn(&p.pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  return p;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int WaitExit(pid_t pid, int timeout_s) {
  for (int i = 0; i < timeout_s * 100; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -2;
}

TEST(ServerProcessTest, ConfigErrorsExitTwoNamingTheKey) {
  const std::string yaml = ::testing::TempDir() + "/argen_bad.yaml";
  {
    std::ofstream f(yaml);
    f << "model_dir: x\nkv_budget_bytes: lots\n";
  }
  const std::string log = ::testing::TempDir() + "/argen_bad.log";
  Process p = Spawn({ARGEN_SERVER_BIN, "--config", yaml}, log);
  EXPECT_EQ(WaitExit(p.pid, 30), 2);
  EXPECT_NE(ReadFile(log).find("key 'kv_budget_bytes'"), std::string::npos) << ReadFile(log);

  p = Spawn({ARGEN_SERVER_BIN, "--model_dir=x", "--no_such_key=1"}, log);
  EXPECT_EQ(WaitExit(p.pid, 30), 2);
  EXPECT_NE(ReadFile(log).find("--no_such_key"), std::string::npos) << ReadFile(log);

  p = Spawn({ARGEN_SERVER_BIN, "--model_dir=/nonexistent/model", "--port=0", "--metrics_port=-1"}, log);
  EXPECT_EQ(WaitExit(p.pid, 30), 1);
  EXPECT_NE(ReadFile(log).find("/nonexistent/model"), std::string::npos) << ReadFile(log);
}

TEST(ServerProcessTest, SigtermDrainsRunningRequestsThenExitsZero) {
  const std::string log = ::testing::TempDir() + "/argen_server_process.log";
  Process p = Spawn({ARGEN_SERVER_BIN, "--config", SourceDir() + "/configs/argen.yaml", "--model_dir",
                     SourceDir() + "/tests/goldens/tiny/tiny-mha", "--listen_address=127.0.0.1", "--port=0",
                     "--metrics_port=-1", "--threads=1"},
                    log);
  std::string port;
  const std::regex serving("serving gRPC on [0-9.]+:([0-9]+)");
  for (int i = 0; i < 3000 && port.empty(); ++i) {
    std::smatch m;
    const std::string text = ReadFile(log);
    if (std::regex_search(text, m, serving))
      port = m[1];
    else
      usleep(10000);
  }
  ASSERT_FALSE(port.empty()) << ReadFile(log);
  const std::string server = "--server=127.0.0.1:" + port;

  std::ostringstream load_out, load_err;
  int load_rc = -1;
  std::thread load([&] {
    // Far more work than fits before the signal: some requests are in flight
    // when it arrives, later ones are refused.
    load_rc = client::RunClient({server, "load", "--requests", "400", "--concurrency", "4", "--count", "8"}, load_out,
                                load_err);
  });
  // Signal once requests are in flight.
  usleep(300000);
  ASSERT_EQ(kill(p.pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(p.pid, 120), 0) << ReadFile(log);
  load.join();
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("SIGTERM: draining"), std::string::npos) << text;
  EXPECT_NE(text.find("drained, exiting"), std::string::npos) << text;
  // Accepted requests finished; ones sent after the signal were refused
  // (UNAVAILABLE: draining, or connection refused once the process is gone).
  const std::string out = load_out.str();
  std::cout << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("ok ([0-9]+), failed ([0-9]+)"))) << out;
  EXPECT_GT(std::stoi(m[1]), 0) << out;
  EXPECT_GT(std::stoi(m[2]), 0) << "the signal came after all the work: " << out;
  EXPECT_EQ(load_rc, client::kServerError);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("failure", 0) != 0) continue;
    // UNAVAILABLE, or gRPC's own CANCELLED for a call that reached the
    // transport after Shutdown began and never a handler (the server logs
    // every request its handler saw; the accepted ones finished). The last
    // accepted requests' images are decoded together, so their clients' next
    // calls can land in that moment.
    const bool transport_cancelled = line.find("CANCELLED (code 1): CANCELLED") != std::string::npos;
    EXPECT_TRUE(line.find("code 14") != std::string::npos || transport_cancelled) << line;
    EXPECT_EQ(line.find("shut down before"), std::string::npos) << line;  // nothing accepted was cut
  }
}

}  // namespace
}  // namespace argen::serving_test
