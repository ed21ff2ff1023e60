// argen_server serving the shipped Lumina-mGPT-format model
// (models/argen-lumina-scenes-v1) as a process, through the client over
// gRPC: `info` reports the lumina family, its 384 px grid and L_dec with the
// row breaks, the family's sampling defaults (cfg 4; top-k 2000 capped at the small
// model's 1,024 codes), `generate` writes a valid 384 x 384 PNG (diagonal
// sparsity 0.9 with the paper's N_r), and a wrong
// vqgan_dir is a start-up error naming vqgan.yaml. One model per server.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <vector>

#include "client/commands.h"
#include "engine/image/png.h"
#include "tests/reliability/process_util.h"
#include "tests/support/golden_files.h"

namespace argen {
namespace {

namespace fs = std::filesystem;
using reliability_test::ReadFile;
using reliability_test::ServerProcess;
using reliability_test::SpawnProcess;
using reliability_test::WaitExit;
using reliability_test::WaitServing;
using test_support::SourceDir;

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
  ServerProcess p = SpawnProcess(ServerArgs(), log);
  ASSERT_TRUE(WaitServing(p, 60)) << ReadFile(log);
  const pid_t pid = p.pid;
  const std::string port = std::to_string(p.port);
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
  const pid_t pid = SpawnProcess(args, log).pid;
  EXPECT_EQ(WaitExit(pid, 60), 1);
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("no_such_dir/vqgan.yaml"), std::string::npos) << text;
}

}  // namespace
}  // namespace argen
