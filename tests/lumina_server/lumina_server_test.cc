// argen_server serving the shipped Lumina-mGPT-format model
// (models/argen-lumina-scenes-v1) as a process, through the client over
// gRPC: `info` reports the lumina family, its 384 px grid and L_dec with the
// row breaks, `generate` writes a valid 384 x 384 PNG (cfg 4 as Lumina-mGPT;
// the small model has 1,024 codes, so no top-k 2000; diagonal sparsity 0.9
// with the paper's N_r), and a wrong
// vqgan_dir is a start-up error naming vqgan.yaml. One model per server.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "client/commands.h"
#include "engine/image/png.h"

extern char** environ;

namespace argen {
namespace {

namespace fs = std::filesystem;

std::string SourceDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return dir ? dir : ".";
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

pid_t Spawn(const std::vector<std::string>& args, const std::string& stderr_path) {
  pid_t pid = -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
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

std::vector<std::string> ServerArgs() {
  // No config file and no sampling flags: the family's defaults apply (cfg 4, top-k 2000
  // capped by the small model's 1,024 codes).
  return {ARGEN_SERVER_BIN,
          "--model_dir",
          SourceDir() + "/models/argen-lumina-scenes-v1",
          "--listen_address=127.0.0.1",
          "--port=0",
          "--metrics_port=-1",
          "--threads=2"};
}

TEST(LuminaServerTest, InfoAndGenerateOverGrpc) {
  const std::string log = ::testing::TempDir() + "/argen_lumina_server.log";
  const pid_t pid = Spawn(ServerArgs(), log);
  std::string port;
  const std::regex serving("serving gRPC on [0-9.]+:([0-9]+)");
  for (int i = 0; i < 6000 && port.empty(); ++i) {
    int status = 0;
    ASSERT_NE(waitpid(pid, &status, WNOHANG), pid) << "the server exited: " << ReadFile(log);
    std::smatch m;
    const std::string text = ReadFile(log);
    if (std::regex_search(text, m, serving))
      port = m[1];
    else
      usleep(10000);
  }
  ASSERT_FALSE(port.empty()) << ReadFile(log);
  const std::string server = "--server=127.0.0.1:" + port;

  std::ostringstream out, err;
  ASSERT_EQ(client::RunClient({server, "info", "--json"}, out, err), 0) << err.str();
  const std::string info = out.str();
  EXPECT_NE(info.find("\"lumina\""), std::string::npos) << info;
  EXPECT_NE(info.find("599"), std::string::npos) << info;  // L_dec: 24 rows of 24 codes + 23 new lines
  // The family's sampling defaults, since nothing configured them.
  EXPECT_TRUE(std::regex_search(info, std::regex(R"("name": "cfg_weight",[^}]*"default_value": 4\b)"))) << info;
  EXPECT_TRUE(std::regex_search(info, std::regex(R"("name": "top_k",[^}]*"default_value": 1024\b)"))) << info;

  const std::string dir = ::testing::TempDir() + "/lumina_images";
  fs::remove_all(dir);
  std::ostringstream gen_out, gen_err;
  ASSERT_EQ(client::RunClient({server, "generate", "--prompt", "a red circle", "--seed", "5", "--policy", "diagonal",
                               "--sparsity", "0.9", "--out", dir, "--request_id", "lumina", "--quiet"},
                              gen_out, gen_err),
            0)
      << gen_err.str() << gen_out.str();
  const std::string png = ReadFile(dir + "/lumina_0.png");
  absl::StatusOr<image::Rgb8Image> decoded =
      image::DecodePng({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->width, 384);
  EXPECT_EQ(decoded->height, 384);
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid, 120), 0) << ReadFile(log);
  fs::remove_all(dir);
}

TEST(LuminaServerTest, MissingVqganIsAStartUpErrorNamingIt) {
  const std::string log = ::testing::TempDir() + "/argen_lumina_novq.log";
  std::vector<std::string> args = ServerArgs();
  args.push_back("--vqgan_dir=no_such_dir");
  const pid_t pid = Spawn(args, log);
  EXPECT_EQ(WaitExit(pid, 60), 1);
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("no_such_dir/vqgan.yaml"), std::string::npos) << text;
}

}  // namespace
}  // namespace argen
