#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"

namespace argen::client {
namespace {

constexpr char kUsageText[] =
    "usage: argen_client [--server HOST:PORT] [--timeout SECONDS] [--max_message_bytes N]\n"
    "                    [--api_key KEY] [--ca_file PEM [--cert_file PEM --key_file PEM]] COMMAND [flags]\n"
    "  --api_key: sent as 'authorization: Bearer KEY' (default: $ARGEN_API_KEY)\n"
    "  --ca_file: TLS, trusting these CAs; --cert_file/--key_file: client certificate (mutual TLS)\n"
    "commands:\n"
    "  generate --prompt TEXT [--count N] [--policy NAME] [--sparsity X] [--n_att N]\n"
    "           [--n_recent N] [--n_sink N] [--seed S] [--cfg W] [--temperature T]\n"
    "           [--top_k K] [--top_p P] [--out DIR] [--request_id ID] [--quiet]\n"
    "  info\n"
    "  health [--service NAME]\n"
    "  load --requests N --concurrency C [--policies dense,diagonal:0.75,...]\n"
    "       [--prompt TEXT] [--count N] [--seed S]\n"
    "exit codes: 0 ok, 1 server error, 2 bad command line, 3 server unreachable, 4 local I/O error\n";

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK: return "OK";
    case grpc::CANCELLED: return "CANCELLED";
    case grpc::UNKNOWN: return "UNKNOWN";
    case grpc::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND: return "NOT_FOUND";
    case grpc::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::ABORTED: return "ABORTED";
    case grpc::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::INTERNAL: return "INTERNAL";
    case grpc::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::DATA_LOSS: return "DATA_LOSS";
    case grpc::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

}  // namespace

int ReportRpcError(const std::string& what, const std::string& server, const grpc::Status& status,
                   std::ostream& err) {
  err << "argen_client: " << what << ": " << GrpcCodeName(status.error_code()) << ": "
      << status.error_message() << "\n";
  if (status.error_code() == grpc::UNAVAILABLE) {
    err << "argen_client: is argen_server running and reachable at " << server << "?\n";
    return kUnreachable;
  }
  return kServerError;
}

absl::StatusOr<v1::SparsityPolicy> ParsePolicySpec(const std::string& spec) {
  v1::SparsityPolicy policy;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  if (parts.empty() || parts[0].empty() || parts.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("policy \"", spec, "\": expected NAME or NAME:SPARSITY (e.g. diagonal:0.75)"));
  }
  policy.set_name(parts[0]);
  if (parts.size() == 2) {
    double sparsity = 0;
    if (!absl::SimpleAtod(parts[1], &sparsity)) {
      return absl::InvalidArgumentError(
          absl::StrCat("policy \"", spec, "\": \"", parts[1], "\" is not a sparsity number"));
    }
    policy.set_sparsity(sparsity);
  }
  return policy;
}

void PrintMetrics(const v1::RequestMetrics& m, std::ostream& out) {
  out << "queue wait     " << m.queue_wait_seconds() << " s\n"
      << "prefill        " << m.prefill_seconds() << " s\n"
      << "decode         " << m.decode_seconds() << " s\n"
      << "VQ decode+PNG  " << m.vq_decode_seconds() << " s\n"
      << "total          " << m.total_seconds() << " s\n"
      << "tokens/s       " << m.tokens_per_second() << "\n"
      << "images/s       " << m.images_per_second() << "\n"
      << "peak KV bytes  " << m.peak_kv_bytes() << "\n"
      << "mean batch     " << m.mean_batch_rows() << " rows (own " << m.rows() << ")\n"
      << "engine steps   " << m.steps() << "\n";
}

void ProgressLine::Show(const std::string& label, int64_t done, int64_t total) {
  if (interactive_) {
    err_ << "\r" << label << " " << done << "/" << total << std::flush;
    open_ = true;
    return;
  }
  const int64_t quarter = total > 0 ? done * 4 / total : 4;
  if (quarter == last_quarter_) return;
  last_quarter_ = quarter;
  err_ << label << " " << done << "/" << total << "\n";
}

void ProgressLine::Finish() {
  if (open_) err_ << "\n";
  open_ = false;
  last_quarter_ = -1;
}

int RunClient(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
              bool interactive) {
  CommonOptions common;
  common.interactive = interactive;
  if (const char* key = std::getenv("ARGEN_API_KEY")) common.security.api_key = key;
  std::string cert_file, key_file;
  auto read_pem = [&](const std::string& flag, const std::string& path, std::string* into) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      err << "argen_client: flag --" << flag << ": cannot read '" << path << "'\n";
      return false;
    }
    std::stringstream text;
    text << in.rdbuf();
    *into = text.str();
    return true;
  };
  size_t i = 0;
  // Global flags come before the command.
  for (; i < args.size() && args[i].rfind("--", 0) == 0; ++i) {
    std::string name = args[i].substr(2), value;
    if (name == "help") {
      out << kUsageText;
      return kOk;
    }
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      err << "argen_client: flag --" << name << " needs a value\n" << kUsageText;
      return kUsage;
    }
    if (name == "server") {
      common.server = value;
    } else if (name == "timeout") {
      if (!absl::SimpleAtod(value, &common.timeout_seconds) || common.timeout_seconds < 0) {
        err << "argen_client: flag --timeout: \"" << value << "\" is not a number of seconds >= 0\n";
        return kUsage;
      }
    } else if (name == "max_message_bytes") {
      if (!absl::SimpleAtoi(value, &common.max_message_bytes) || common.max_message_bytes < 4096) {
        err << "argen_client: flag --max_message_bytes: \"" << value << "\" is not an integer >= 4096\n";
        return kUsage;
      }
    } else if (name == "api_key") {
      common.security.api_key = value;
    } else if (name == "ca_file") {
      if (!read_pem(name, value, &common.security.ca_pem)) return kUsage;
    } else if (name == "cert_file") {
      if (!read_pem(name, value, &common.security.cert_pem)) return kUsage;
      cert_file = value;
    } else if (name == "key_file") {
      if (!read_pem(name, value, &common.security.key_pem)) return kUsage;
      key_file = value;
    } else {
      err << "argen_client: unknown flag --" << name << " (global flags: --server, --timeout, "
          << "--max_message_bytes, --api_key, --ca_file, --cert_file, --key_file)\n";
      return kUsage;
    }
  }
  if (cert_file.empty() != key_file.empty() || (!cert_file.empty() && common.security.ca_pem.empty())) {
    err << "argen_client: --cert_file and --key_file go together, and with --ca_file (TLS)\n";
    return kUsage;
  }
  if (i >= args.size()) {
    err << "argen_client: no command given\n" << kUsageText;
    return kUsage;
  }
  const std::string command = args[i];
  const std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1, args.end());
  if (command == "generate") return RunGenerate(common, rest, out, err);
  if (command == "info") return RunInfo(common, rest, out, err);
  if (command == "health") return RunHealth(common, rest, out, err);
  if (command == "load") return RunLoad(common, rest, out, err);
  if (command == "help") {
    out << kUsageText;
    return kOk;
  }
  err << "argen_client: unknown command '" << command << "'\n" << kUsageText;
  return kUsage;
}

}  // namespace argen::client
