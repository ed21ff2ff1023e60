#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/flags.h"
#include "client/generate_call.h"

namespace argen::client {
namespace {

// Fills a GenerateRequest from generate's flags; errors name the flag.
absl::StatusOr<v1::GenerateRequest> RequestFromFlags(const Flags& flags) {
  v1::GenerateRequest r;
  if (!flags.Has("prompt")) return absl::InvalidArgumentError("flag --prompt is required");
  r.set_prompt(flags.String("prompt"));
  absl::StatusOr<int64_t> count = flags.Int("count", 1, 1, 4096);
  if (!count.ok()) return count.status();
  r.set_num_images(static_cast<int32_t>(*count));
  absl::StatusOr<std::optional<int64_t>> seed = flags.OptionalInt("seed", 0, INT64_MAX);
  if (!seed.ok()) return seed.status();
  if (*seed) r.set_seed(static_cast<uint64_t>(**seed));
  for (const char* name : {"cfg", "temperature", "top_p"}) {
    absl::StatusOr<std::optional<double>> v = flags.OptionalDouble(name);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    const float x = static_cast<float>(**v);
    if (std::string(name) == "cfg") r.set_cfg_weight(x);
    if (std::string(name) == "temperature") r.set_temperature(x);
    if (std::string(name) == "top_p") r.set_top_p(x);
  }
  absl::StatusOr<std::optional<int64_t>> top_k = flags.OptionalInt("top_k", 0, 1 << 30);
  if (!top_k.ok()) return top_k.status();
  if (*top_k) r.set_top_k(static_cast<int32_t>(**top_k));
  v1::SparsityPolicy* policy = r.mutable_policy();
  if (flags.Has("policy")) {
    absl::StatusOr<v1::SparsityPolicy> spec = ParsePolicySpec(flags.String("policy"));
    if (!spec.ok()) return spec.status();
    *policy = *spec;
  }
  absl::StatusOr<std::optional<double>> sparsity = flags.OptionalDouble("sparsity");
  if (!sparsity.ok()) return sparsity.status();
  if (*sparsity) policy->set_sparsity(**sparsity);
  for (const char* name : {"n_att", "n_recent", "n_sink"}) {
    absl::StatusOr<std::optional<int64_t>> v = flags.OptionalInt(name, -1, 1 << 24);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    const int32_t x = static_cast<int32_t>(**v);
    if (std::string(name) == "n_att") policy->set_n_att(x);
    if (std::string(name) == "n_recent") policy->set_n_recent(x);
    if (std::string(name) == "n_sink") policy->set_n_sink(x);
  }
  r.set_request_id(flags.String("request_id"));
  return r;
}

}  // namespace

int RunGenerate(const CommonOptions& common, const std::vector<std::string>& args, std::ostream& out,
                std::ostream& err) {
  absl::StatusOr<Flags> flags = Flags::Parse(
      args,
      {"prompt", "count", "policy", "sparsity", "n_att", "n_recent", "n_sink", "seed", "cfg",
       "temperature", "top_k", "top_p", "out", "request_id", "quiet"},
      {"quiet"});
  if (!flags.ok()) {
    err << "argen_client generate: " << flags.status().message() << "\n";
    return kUsage;
  }
  absl::StatusOr<v1::GenerateRequest> request = RequestFromFlags(*flags);
  if (!request.ok()) {
    err << "argen_client generate: " << request.status().message() << "\n";
    return kUsage;
  }
  const std::filesystem::path out_dir = flags->String("out", "out");
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    err << "argen_client generate: cannot create output folder " << out_dir << ": " << ec.message() << "\n";
    return kLocalError;
  }
  const bool quiet = flags->Has("quiet");

  auto channel = MakeChannel(common.server, common.max_message_bytes, common.security);
  auto stub = v1::ArGen::NewStub(channel);
  ProgressLine progress(err, common.interactive);
  auto on_event = [&](const v1::GenerateEvent& e) {
    if (quiet) return;
    if (e.has_accepted()) {
      err << "accepted " << e.accepted().request_id() << ": seed " << e.accepted().seed() << ", policy "
          << e.accepted().policy().name() << " (" << e.accepted().policy().n_slots()
          << " KV slots/row), KV " << e.accepted().kv_bytes() << " bytes, queue position "
          << e.accepted().queue_position() << "\n";
    } else if (e.has_progress()) {
      progress.Show("image tokens", e.progress().tokens_done(), e.progress().tokens_total());
    } else if (e.has_image()) {
      progress.Finish();
      err << "image " << e.image().index() << " received\n";
    }
  };
  GenerateResult result = CallGenerate(*stub, *request, common.timeout_seconds, on_event);
  progress.Finish();
  if (!result.status.ok()) return ReportRpcError("generate", common.server, result.status, err);

  const std::string stem = result.accepted.request_id().empty()
                               ? absl::StrCat("seed", result.accepted.seed())
                               : result.accepted.request_id();
  for (const v1::Image& image : result.images) {
    const std::filesystem::path path = out_dir / absl::StrCat(stem, "_", image.index(), ".png");
    std::ofstream file(path, std::ios::binary);
    file.write(image.png().data(), static_cast<std::streamsize>(image.png().size()));
    if (!file) {
      err << "argen_client generate: cannot write " << path << "\n";
      return kLocalError;
    }
    out << "wrote " << path.string() << " (" << image.width() << "x" << image.height() << ", seed "
        << image.seed() << ", index " << image.index() << ")\n";
  }
  if (result.has_metrics) PrintMetrics(result.metrics, out);
  return kOk;
}

}  // namespace argen::client
