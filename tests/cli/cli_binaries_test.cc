// The binaries as a user runs them (issue 15, defect 4 and the CLI
// deliverables): every binary answers --help and --version with exit 0;
// argen_server and argen_client say "unknown flag" for one they do not know;
// client subcommands have their own help with defaults; the progress bar
// redraws one line on a terminal (a pseudo-terminal here) and prints plain
// lines otherwise.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "scheduler/tests/fake_engine.h"
#include "tests/serving/serving_test_util.h"

extern char** environ;

namespace argen::serving_test {
namespace {

namespace fs = std::filesystem;

struct ProcessRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr, interleaved
};

// Runs argv with stdout+stderr on a pipe, or on a pseudo-terminal when
// `terminal`; waits up to 60 s.
ProcessRun Execute(const std::vector<std::string>& argv, bool terminal = false) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fd = -1;
  pid_t pid = -1;
  if (terminal) {
    pid = forkpty(&fd, nullptr, nullptr, nullptr);
    if (pid == 0) {
      execv(args[0], args.data());
      _exit(127);
    }
  } else {
    int p[2];
    if (pipe(p) != 0) return {};
    pid = fork();
    if (pid == 0) {
      dup2(p[1], 1);
      dup2(p[1], 2);
      close(p[0]);
      close(p[1]);
      execv(args[0], args.data());
      _exit(127);
    }
    close(p[1]);
    fd = p[0];
  }
  ProcessRun r;
  if (pid < 0) return r;
  char buf[4096];
  for (int waited = 0; waited < 60000;) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, 100);
    if (ready == 0) {
      waited += 100;
      continue;
    }
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;  // EOF (pipe) or EIO (pty, child gone)
    r.out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<std::string> Binaries() { return absl::StrSplit(ARGEN_BINARIES, ',', absl::SkipEmpty()); }

TEST(CliBinariesTest, EveryBinaryHasHelpAndVersion) {
  const std::regex version_line(R"(^(argen_\w+) [0-9]+\.[0-9]+\.[0-9]+(\+\S+)? \((\w+) build\)\n$)");
  ASSERT_GE(Binaries().size(), 8u);
  for (const std::string& bin : Binaries()) {
    const std::string name = fs::path(bin).filename().string();
    const ProcessRun version = Execute({bin, "--version"});
    EXPECT_EQ(version.exit_code, 0) << name << ": " << version.out;
    std::smatch m;
    EXPECT_TRUE(std::regex_match(version.out, m, version_line)) << name << ": " << version.out;
    if (!m.empty()) {
      EXPECT_EQ(m[1], name);
    }
    const ProcessRun help = Execute({bin, "--help"});
    EXPECT_EQ(help.exit_code, 0) << name << ": " << help.out;
    EXPECT_NE(help.out.find(name), std::string::npos) << name << ": " << help.out;
    EXPECT_EQ(help.out.find("No flags matched"), std::string::npos) << name;
  }
}

TEST(CliBinariesTest, UnknownFlagsAreNamedAndExitTwo) {
  ProcessRun r = Execute({ARGEN_SERVER_BIN, "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown flag --bogus"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("missing value"), std::string::npos) << r.out;
  r = Execute({ARGEN_SERVER_BIN, "--bogus=3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown flag --bogus"), std::string::npos) << r.out;
  r = Execute({ARGEN_SERVER_BIN, "--port"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--port"), std::string::npos) << r.out;
  r = Execute({ARGEN_CLIENT_BIN, "generate", "--prompt", "x", "--colour", "red"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown flag --colour"), std::string::npos) << r.out;
  // A misspelt flag: the nearest one is suggested (either spelling of a long flag).
  r = Execute({ARGEN_CLIENT_BIN, "generate", "--prompt", "x", "--seeed", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown flag --seeed (did you mean --seed?)"), std::string::npos) << r.out;
  r = Execute({ARGEN_CLIENT_BIN, "generate", "--prompt", "x", "--topk", "3"});
  EXPECT_NE(r.out.find("(did you mean --top-k?)"), std::string::npos) << r.out;
  r = Execute({ARGEN_SERVER_BIN, "--prot", "5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown flag --prot (did you mean --port?)"), std::string::npos) << r.out;
  EXPECT_EQ(Execute({ARGEN_CLIENT_BIN, "generate", "--prompt", "x", "--colour", "red"}).out.find("did you mean"),
            std::string::npos);  // nothing near
  r = Execute({ARGEN_CLIENT_BIN, "paint"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown command 'paint'"), std::string::npos) << r.out;
  r = Execute({ARGEN_CLIENT_BIN, "generate", "--prompt", "x", "--count", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--count"), std::string::npos) << r.out;
}

TEST(CliBinariesTest, ClientCommandsHaveTheirOwnHelpWithDefaults) {
  ProcessRun r = Execute({ARGEN_CLIENT_BIN, "generate", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const char* want : {"--prompt", "--prompts-file", "--count", "=1", "--out", "=out", "--overwrite", "--json",
                           "--request_id", "--parallel"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in:\n" << r.out;
  }
  r = Execute({ARGEN_CLIENT_BIN, "load", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const char* want : {"--rate", "--concurrency", "--duration", "--save-result", "--requests"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in:\n" << r.out;
  }
  r = Execute({ARGEN_CLIENT_BIN, "--help"});
  for (const char* want :
       {"generate", "info", "health", "load", "ARGEN_SERVER", "ARGEN_API_KEY", "--api_key", "Exit codes"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in:\n" << r.out;
  }
  r = Execute({ARGEN_SERVER_BIN, "--help"});
  for (const char* want :
       {"--config", "--kv_budget_bytes", "=auto", "--default_policy.name", "--log_format", "=text"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in:\n" << r.out;
  }
}

TEST(CliBinariesTest, ServerAddressAndApiKeyFromTheEnvironment) {
  ASSERT_STARTED(t, StartServer(LoopbackConfig("fake"), std::make_unique<scheduler::testing::FakeEngine>()));
  setenv("ARGEN_SERVER", t.address.c_str(), 1);
  setenv("ARGEN_API_KEY", "k-123", 1);  // a server without keys ignores it
  const ProcessRun r = Execute({ARGEN_CLIENT_BIN, "health"});
  unsetenv("ARGEN_SERVER");
  unsetenv("ARGEN_API_KEY");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "SERVING\n");
}

scheduler::testing::FakeEngineOptions SlowEngine() {
  scheduler::testing::FakeEngineOptions o;
  o.token_grid = 16;  // 256 steps of 3 ms: ~0.8 s of progress
  o.step_time = absl::Milliseconds(3);
  return o;
}

TEST(CliBinariesTest, ProgressBarRedrawsOnATerminal) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.progress_interval_ms = 20;
  ASSERT_STARTED(t, StartServer(c, std::make_unique<scheduler::testing::FakeEngine>(SlowEngine())));
  const fs::path dir = fs::path(::testing::TempDir()) / "argen_cli_tty";
  fs::remove_all(dir);
  const ProcessRun r = Execute(
      {ARGEN_CLIENT_BIN, "--server=" + t.address, "generate", "--prompt", "tty", "--count", "2", "--out", dir.string()},
      /*terminal=*/true);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  // Redraws: carriage returns, the bar, percent, rate, elapsed and ETA.
  EXPECT_GE(std::count(r.out.begin(), r.out.end(), '\r'), 3) << r.out;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex(R"(\r\[[#.]{24}\] +[0-9]+% +[0-9.]+ tok/s  [0-9:]+ elapsed  ETA [0-9:-]+)")))
      << r.out;
  EXPECT_NE(r.out.find("100%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/2 images"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir));
  // Issue 34: the "wrote" lines never join the bar's line (it is cleared
  // first), the counter reaches 2/2 at the end, and the last bar line ends
  // before what follows (the metrics block).
  std::vector<std::string> screen_lines;
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(r.out, '\n'))) {
    const size_t last_redraw = line.rfind('\r', line.size() >= 2 ? line.size() - 2 : 0);
    screen_lines.push_back(last_redraw == std::string::npos ? line : line.substr(last_redraw));
  }
  int wrote = 0;
  for (const std::string& line : screen_lines) {
    if (line.find("wrote ") == std::string::npos) continue;
    ++wrote;
    EXPECT_EQ(line.find("tok/s"), std::string::npos) << ::testing::PrintToString(line);
  }
  EXPECT_EQ(wrote, 2) << r.out;
  const size_t metrics = r.out.find("queue wait");
  ASSERT_NE(metrics, std::string::npos) << r.out;
  const std::string before_metrics = r.out.substr(0, metrics);
  const size_t last_bar = before_metrics.rfind("tok/s");
  ASSERT_NE(last_bar, std::string::npos) << r.out;
  const std::string last_bar_line = before_metrics.substr(last_bar);
  EXPECT_NE(last_bar_line.find("2/2 images"), std::string::npos) << ::testing::PrintToString(last_bar_line);
  EXPECT_NE(last_bar_line.find('\n'), std::string::npos) << ::testing::PrintToString(last_bar_line);
}

// Issue 34: load's bar counts finished requests, so its rate is req/s.
TEST(CliBinariesTest, LoadProgressCountsRequestsPerSecond) {
  ASSERT_STARTED(t, StartServer(LoopbackConfig("fake"), std::make_unique<scheduler::testing::FakeEngine>()));
  const ProcessRun r =
      Execute({ARGEN_CLIENT_BIN, "--server=" + t.address, "load", "--requests", "4", "--concurrency", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(" req/s "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tok/s"), std::string::npos) << r.out;
}

TEST(CliBinariesTest, ProgressIsPlainLinesWhenNotATerminal) {
  server::ServerConfig c = LoopbackConfig("fake");
  c.progress_interval_ms = 20;
  ASSERT_STARTED(t, StartServer(c, std::make_unique<scheduler::testing::FakeEngine>(SlowEngine())));
  const fs::path dir = fs::path(::testing::TempDir()) / "argen_cli_pipe";
  fs::remove_all(dir);
  const ProcessRun r =
      Execute({ARGEN_CLIENT_BIN, "--server=" + t.address, "generate", "--prompt", "pipe", "--out", dir.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
  int lines = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines += line.find("tok/s") != std::string::npos;
  EXPECT_GE(lines, 2) << r.out;
  EXPECT_LE(lines, 11) << r.out;  // at most one per 10% step
}

// Runs argv with stdout+stderr on a pipe; once `marker` has appeared
// `occurrences` times in the output, sends SIGINT (Ctrl-C); waits up to 60 s.
ProcessRun ExecuteAndInterruptAfter(const std::vector<std::string>& argv, const std::string& marker, int occurrences) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int p[2];
  if (pipe(p) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    close(p[0]);
    close(p[1]);
    execv(args[0], args.data());
    _exit(127);
  }
  close(p[1]);
  ProcessRun r;
  bool sent = false;
  char buf[4096];
  for (int waited = 0; waited < 60000;) {
    pollfd pfd{p[0], POLLIN, 0};
    if (poll(&pfd, 1, 100) == 0) {
      waited += 100;
      continue;
    }
    const ssize_t n = read(p[0], buf, sizeof(buf));
    if (n <= 0) break;
    r.out.append(buf, static_cast<size_t>(n));
    int seen = 0;
    for (size_t at = r.out.find(marker); at != std::string::npos; at = r.out.find(marker, at + 1)) ++seen;
    if (!sent && seen >= occurrences) {
      kill(pid, SIGINT);
      sent = true;
    }
  }
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Issue 15, defect 6: Ctrl-C during a batch keeps the images already written
// (whole PNGs under their final names, no temporary files), cancels the call
// in flight (interrupted once the second request was accepted), sends
// nothing more, says so, and exits with 130.
TEST(CliBinariesTest, CtrlCKeepsWrittenImagesCancelsTheRestAndExits130) {
  server::ServerConfig c = LoopbackConfig("fake");
  ASSERT_STARTED(t, StartServer(c, std::make_unique<scheduler::testing::FakeEngine>(SlowEngine())));
  const fs::path dir = fs::path(::testing::TempDir()) / "argen_cli_ctrl_c";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path prompts = dir / "prompts.txt";
  std::ofstream(prompts) << "first\nsecond\nthird\n";
  const fs::path out = dir / "out";
  const ProcessRun r =
      ExecuteAndInterruptAfter({ARGEN_CLIENT_BIN, "--server=" + t.address, "generate", "--prompts-file",
                                prompts.string(), "--parallel", "1", "--out", out.string()},
                               "accepted ", /*occurrences=*/2);
  EXPECT_EQ(r.exit_code, 130) << r.out;
  EXPECT_NE(r.out.find("interrupted: 1 of 3 images written, 1 request cancelled, 1 not sent"), std::string::npos)
      << r.out;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().filename().string());
  ASSERT_EQ(files.size(), 1u) << r.out;
  EXPECT_EQ(fs::path(files[0]).extension(), ".png") << files[0];
  std::ifstream png(out / files[0], std::ios::binary);
  std::string magic(8, '\0');
  png.read(magic.data(), 8);
  EXPECT_EQ(magic, std::string("\x89PNG\r\n\x1a\n", 8));
  // The third prompt was never sent: the server saw two requests.
  EXPECT_EQ(r.out.find("accepted", r.out.find("accepted", r.out.find("accepted") + 1) + 1), std::string::npos) << r.out;
}

// Issue 15, defect 3, on the real binary: gRPC's built-in health service
// has no descriptors, and a server that does not link the generated ones
// cannot describe it (the in-process tests link them through the client).
TEST(CliBinariesTest, ServerBinaryReflectionDescribesHealth) {
  const std::string log = ::testing::TempDir() + "/argen_cli_reflection.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> argv = {ARGEN_SERVER_BIN,
                                   "--model_dir=" + SourceDir() + "/tests/goldens/tiny/tiny-mha",
                                   "--listen_address=127.0.0.1",
                                   "--port=0",
                                   "--metrics_port=-1",
                                   "--threads=1"};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  std::string port;
  const std::regex serving("serving gRPC on [0-9.]+:([0-9]+)");
  for (int i = 0; i < 3000 && port.empty(); ++i) {
    std::ifstream f(log);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(text, m, serving))
      port = m[1];
    else
      usleep(10000);
  }
  EXPECT_FALSE(port.empty()) << "argen_server did not start";
  for (const char* method : {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                             "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    if (port.empty()) break;
    grpc::reflection::v1::ServerReflectionRequest describe;
    describe.set_file_containing_symbol("grpc.health.v1.Health");
    const grpc::reflection::v1::ServerReflectionResponse answer = Reflect("127.0.0.1:" + port, method, describe);
    EXPECT_FALSE(answer.has_error_response()) << method << ": " << answer.error_response().error_message();
    EXPECT_GT(answer.file_descriptor_response().file_descriptor_proto_size(), 0) << method;
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace argen::serving_test
