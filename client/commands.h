// argen_client subcommands. Each returns the process exit code:
//   0 success, 1 the server answered with an error (or NOT_SERVING),
//   2 bad command line, 3 server unreachable / unavailable, 4 local I/O error.
#pragma once

#include <iosfwd>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "argen/v1/argen.pb.h"
#include "client/generate_call.h"
#include "grpcpp/support/status.h"

namespace argen::client {

enum ExitCode { kOk = 0, kServerError = 1, kUsage = 2, kUnreachable = 3, kLocalError = 4 };

struct CommonOptions {
  std::string server = "localhost:50051";
  int64_t max_message_bytes = int64_t{64} << 20;
  double timeout_seconds = 0;  // 0: none
  // stderr is a terminal: progress redraws one line; otherwise progress is
  // printed as whole lines at quarter steps (logs stay readable).
  bool interactive = false;
  // --api_key (or ARGEN_API_KEY), --ca_file, --cert_file / --key_file.
  ChannelSecurity security;
};

// Progress display shared by generate and load.
class ProgressLine {
 public:
  ProgressLine(std::ostream& err, bool interactive) : err_(err), interactive_(interactive) {}
  ~ProgressLine() { Finish(); }
  void Show(const std::string& label, int64_t done, int64_t total);
  void Finish();  // ends a redrawn line

 private:
  std::ostream& err_;
  bool interactive_;
  bool open_ = false;
  int64_t last_quarter_ = -1;
};

// Entry point: argv without the program name.
int RunClient(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
              bool interactive = false);

int RunGenerate(const CommonOptions& common, const std::vector<std::string>& args, std::ostream& out,
                std::ostream& err);
int RunInfo(const CommonOptions& common, const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err);
int RunHealth(const CommonOptions& common, const std::vector<std::string>& args, std::ostream& out,
              std::ostream& err);
int RunLoad(const CommonOptions& common, const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err);

// "diagonal", "diagonal:0.75" (name:sparsity) -> SparsityPolicy.
absl::StatusOr<v1::SparsityPolicy> ParsePolicySpec(const std::string& spec);

// Prints "argen_client: <what>: <CODE>: <message>" and maps the code to an exit code.
int ReportRpcError(const std::string& what, const std::string& server, const grpc::Status& status,
                   std::ostream& err);

// Writes the metrics block of a finished request.
void PrintMetrics(const v1::RequestMetrics& m, std::ostream& out);

}  // namespace argen::client
