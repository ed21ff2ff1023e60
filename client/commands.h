// argen_client subcommands. Each returns the process exit code:
//   0 success, 1 the server answered with an error (or NOT_SERVING),
//   2 bad command line, 3 server unreachable / unavailable, 4 local I/O error.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "argen/v1/argen.pb.h"
#include "client/generate_call.h"
#include "grpcpp/support/status.h"

namespace argen::client {

enum ExitCode { kOk = 0, kServerError = 1, kUsage = 2, kUnreachable = 3, kLocalError = 4 };

struct CommonOptions {
  std::string server = "localhost:50051";  // env ARGEN_SERVER
  // --api_key (env ARGEN_API_KEY: "authorization: Bearer <key>"), --ca_file,
  // --cert_file / --key_file (TLS, mutual TLS).
  ChannelSecurity security;
  int64_t max_message_bytes = int64_t{64} << 20;
  double timeout_seconds = 0;  // 0: none
  // stderr is a terminal: the progress bar redraws one line; otherwise
  // progress is printed as whole lines at 10% steps (logs stay readable).
  bool interactive = false;
};

// The request fields generate and load share, as given on the command line.
struct RequestFlags {
  std::string prompt;
  int32_t count = 1;
  std::string policy;  // NAME or NAME:SPARSITY; "" = the server's default
  std::optional<double> sparsity;
  std::optional<int32_t> n_att, n_recent, n_sink;
  std::optional<uint64_t> seed;
  std::optional<double> cfg, temperature, top_p;
  std::string negative_prompt;  // "": the model family's unconditional prompt
  std::optional<int32_t> top_k;
  std::string size;            // "WxH" (GenerateRequest width, height); "": the model's default
  std::string kv_cache_dtype;  // auto | fp8 (SparsityPolicy.kv_cache_dtype); "": the server's default
  // Class-conditional models (GenerateRequest.class_id), instead of a prompt.
  std::optional<int32_t> class_id;
  std::optional<int32_t> parallel_window;     // GenerateRequest.parallel_window; unset: the server's default
  std::optional<int32_t> speculative_window;  // GenerateRequest.speculative_window; unset: the server's default
};

struct GenerateOptions {
  RequestFlags request;
  std::string prompts_file;  // batch mode: one request per line (plain or JSONL)
  int32_t parallel = 4;      // batch mode: requests in flight at once
  std::string out = "out";
  std::string output;  // --output FILE: the image itself (stem_i for several); "": <out>/<id>_<i>.png
  std::string request_id;
  bool overwrite = false;
  bool quiet = false;
  bool json = false;
};

struct HealthOptions {
  std::string service;
};

struct InfoOptions {
  bool json = false;
};

struct LoadOptions {
  RequestFlags request;
  int64_t requests = 0;     // 0: 16, or unlimited with --duration
  int32_t concurrency = 0;  // closed loop: workers (0: 4); with --rate: most in flight (0: 1024)
  double rate = 0;          // > 0: open loop, Poisson arrivals at this many requests/s
  double duration = 0;      // > 0: stop starting requests after this many seconds
  std::string policies;     // comma-separated mix, cycled through
  // Captions cycled through (client/prompts_file.h: a line's fields apply to
  // its requests); empty: --prompt for every request.
  std::string prompts_file;
  std::string save_result;  // JSON file
  bool json = false;
};

// Entry point: argv without the program name.
int RunClient(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool interactive = false);

int RunGenerate(const CommonOptions& common, const GenerateOptions& options, std::ostream& out, std::ostream& err);
int RunInfo(const CommonOptions& common, const InfoOptions& options, std::ostream& out, std::ostream& err);
int RunHealth(const CommonOptions& common, const HealthOptions& options, std::ostream& out, std::ostream& err);
int RunLoad(const CommonOptions& common, const LoadOptions& options, std::ostream& out, std::ostream& err);

// "diagonal", "diagonal:0.75" (name:sparsity) -> SparsityPolicy.
absl::StatusOr<v1::SparsityPolicy> ParsePolicySpec(const std::string& spec);
// "auto", "fp8" (any case; "fp8_e4m3" too) -> the value sent as
// SparsityPolicy.kv_cache_dtype; anything else is INVALID_ARGUMENT naming it.
absl::StatusOr<std::string> ParseKvCacheDtype(const std::string& value);
// "512x768" -> (512, 768): two positive integers around one 'x'; "auto" or "": (0, 0).
absl::StatusOr<std::pair<int32_t, int32_t>> ParseSizeSpec(const std::string& spec);

// The request the flags describe (policy spec first, then the single fields).
absl::StatusOr<v1::GenerateRequest> RequestFromFlags(const RequestFlags& flags);

// "OK", "INVALID_ARGUMENT", ... for a gRPC code.
const char* GrpcCodeName(grpc::StatusCode code);

// Prints "argen_client: <what>: <CODE>: <message>" plus the google.rpc.Status
// details (reason, field, retry delay) and maps the code to an exit code.
int ReportRpcError(const std::string& what, const std::string& server, const grpc::Status& status, std::ostream& err);

// Writes the metrics block of a finished request.
void PrintMetrics(const v1::RequestMetrics& m, std::ostream& out);

}  // namespace argen::client
