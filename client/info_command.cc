#include <chrono>
#include <iostream>

#include "client/commands.h"
#include "client/flags.h"
#include "client/generate_call.h"
#include "argen/v1/argen.grpc.pb.h"

namespace argen::client {

int RunInfo(const CommonOptions& common, const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err) {
  absl::StatusOr<Flags> flags = Flags::Parse(args, {});
  if (!flags.ok()) {
    err << "argen_client info: " << flags.status().message() << "\n";
    return kUsage;
  }
  auto stub = v1::ArGen::NewStub(MakeChannel(common.server, common.max_message_bytes, common.security));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(
                           (common.timeout_seconds > 0 ? common.timeout_seconds : 10) * 1000)));
  v1::ModelInfo info;
  grpc::Status status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
  if (!status.ok()) return ReportRpcError("info", common.server, status, err);
  out << "model          " << info.model() << " (" << info.backend() << ")\n"
      << "image          " << info.image_size() << "x" << info.image_size() << " px, "
      << info.token_grid() << "x" << info.token_grid() << " tokens (" << info.image_tokens()
      << "), codebook " << info.image_vocab() << "\n"
      << "layers         " << info.num_layers() << ", hidden " << info.hidden_size() << "\n"
      << "prompt         up to " << info.max_prompt_tokens() << " tokens\n"
      << "KV             " << info.kv_bytes_per_token_row() << " bytes per token per row, budget "
      << info.kv_budget_bytes() << " bytes\n"
      << "batch          up to " << info.max_batch_rows() << " rows, queue " << info.queue_limit()
      << "\n"
      << "default policy " << info.default_policy().name() << " (sparsity "
      << info.default_policy().sparsity() << ")\n"
      << "policies      ";
  for (const v1::PolicyInfo& p : info.policies()) out << " " << p.name();
  // How to ask for sparsity per request (the default may be dense: docs/quality.md).
  out << "\nper request    argen_client generate --policy NAME --sparsity S (e.g. --policy diagonal"
      << " --sparsity 0.9 --n_recent 64); quality of each: docs/quality.md"
      << "\nparameters\n";
  for (const v1::ParameterRange& r : info.ranges()) {
    out << "  " << r.name() << " [" << r.min() << ", " << r.max() << "] default " << r.default_value()
        << ": " << r.meaning() << "\n";
  }
  return kOk;
}

}  // namespace argen::client
