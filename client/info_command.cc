#include <chrono>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "argen/v1/argen.grpc.pb.h"
#include "client/commands.h"
#include "client/generate_call.h"
#include "client/units.h"
#include "google/protobuf/util/json_util.h"

namespace argen::client {
namespace {

std::string DefaultSize(const v1::ModelInfo& info) {
  if (info.has_default_size()) return absl::StrCat(info.default_size().width(), "x", info.default_size().height());
  return absl::StrCat(info.image_size(), "x", info.image_size());  // an older server
}

// Every size with its decode length; an older server: its one size.
std::string SizeList(const v1::ModelInfo& info) {
  if (info.image_sizes().empty()) return absl::StrCat(DefaultSize(info), " (", info.image_tokens(), ")");
  std::string out;
  for (const v1::ImageSize& s : info.image_sizes()) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", s.width(), "x", s.height(), " (", s.image_tokens(), ")");
  }
  return out;
}

}  // namespace

int RunInfo(const CommonOptions& common, const InfoOptions& options, std::ostream& out, std::ostream& err) {
  auto stub = v1::ArGen::NewStub(MakeChannel(common.server, common.max_message_bytes, common.security));
  grpc::ClientContext context;
  PrepareContext(context, common.timeout_seconds > 0 ? common.timeout_seconds : 10);
  v1::ModelInfo info;
  grpc::Status status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
  if (!status.ok()) return ReportRpcError("info", common.server, status, err);
  if (options.json) {
    google::protobuf::util::JsonPrintOptions json_options;
    json_options.add_whitespace = true;
    json_options.preserve_proto_field_names = true;
    json_options.always_print_primitive_fields = true;
    std::string text;
    if (!google::protobuf::util::MessageToJsonString(info, &text, json_options).ok()) {
      err << "argen_client info: cannot print ModelInfo as JSON\n";
      return kLocalError;
    }
    out << text;
    if (text.empty() || text.back() != '\n') out << "\n";
    return kOk;
  }
  out << "model          " << info.model() << " (" << (info.family().empty() ? "" : info.family() + ", ")
      << info.backend() << ")\n"
      << "image          " << DefaultSize(info) << " px default, " << info.image_tokens() << " decode tokens, codebook "
      << info.image_vocab() << "\n"
      << "sizes          " << SizeList(info) << " (--size WxH)\n"
      << "layers         " << info.num_layers() << ", hidden " << info.hidden_size() << "\n"
      << "prompt         up to " << info.max_prompt_tokens() << " tokens\n"
      << "KV             " << HumanBytes(info.kv_bytes_per_token_row()) << " per token per row, budget "
      << HumanBytes(info.kv_budget_bytes()) << "\n"
      << "batch          up to " << info.max_batch_rows() << " rows, " << info.max_images_per_request()
      << " images per request, queue " << info.queue_limit() << "\n"
      << "default policy " << info.default_policy().name() << " (sparsity " << info.default_policy().sparsity()
      << ")\n";
  if (info.kv_cache_dtypes_size() > 0) {  // an older server lists none
    out << "KV dtypes     ";
    for (const std::string& d : info.kv_cache_dtypes()) out << " " << d;
    out << " (default " << info.default_policy().kv_cache_dtype() << "; --kv-cache-dtype)\n";
  }
  if (!info.weight_dtype().empty()) out << "weights        " << info.weight_dtype() << " (the server's weight_dtype)\n";
  out << "policies      ";
  for (const v1::PolicyInfo& p : info.policies()) out << " " << p.name();
  // How to ask for sparsity per request (the default may be dense: docs/quality.md).
  out << "\nper request    argen_client generate --policy NAME --sparsity S (or --policy NAME:S, e.g."
      << " --policy alisa:0.8); quality of each: docs/quality.md"
      << "\nparameters\n";
  // The ranges the server enforces, with open ends shown as such.
  for (const v1::ParameterRange& r : info.ranges()) {
    out << "  " << r.name() << " " << (r.min_exclusive() ? "(" : "[") << r.min() << ", " << r.max()
        << (r.max_exclusive() ? ")" : "]") << " default " << r.default_value() << ": " << r.meaning() << "\n";
  }
  return kOk;
}

}  // namespace argen::client
