// The HTTP servers (the API and /metrics, both cpp-httplib) keep working in a
// process whose libraries have a large static TLS segment, as CUDA builds do
// (libcublasLt: 94 KB): prometheus-cpp's civetweb Exposer failed there because
// its small fixed-stack threads could not be created. The probe runs with a
// 256 KiB-TLS library preloaded; the same probe shows that such a library
// really does make a 128 KiB-stack thread fail (so the test can fail).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct ProbeRun {
  std::string output;
  int exit_code = -1;
};

ProbeRun RunProbe(const std::string& preload) {
  const std::string command =
      (preload.empty() ? std::string() : "LD_PRELOAD=" + preload + " ") + ARGEN_STATIC_TLS_PROBE + " 2>&1";
  ProbeRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) run.output += buf.data();
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(StaticTlsTest, HttpServersStartBesideALargeStaticTlsLibrary) {
#if defined(__SANITIZE_ADDRESS__)
  // A preloaded library comes before the ASan runtime, which then refuses to start the probe.
  GTEST_SKIP() << "the LD_PRELOAD probe cannot run under AddressSanitizer";
#endif
  const ProbeRun run = RunProbe(ARGEN_BIG_STATIC_TLS_LIB);
  // The hazard is real under this preload: a civetweb-sized stack is refused.
  EXPECT_NE(run.output.find("small_stack_thread: EINVAL"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("metrics: 200"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("http_api: 200"), std::string::npos) << run.output;
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST(StaticTlsTest, WithoutThePreloadSmallStacksWork) {
  const ProbeRun run = RunProbe("");
  EXPECT_NE(run.output.find("small_stack_thread: ok"), std::string::npos) << run.output;
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

}  // namespace
