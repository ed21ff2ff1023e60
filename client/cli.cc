// argen_client's command line (CLI11): global flags, then one command with
// its own flags; `argen_client COMMAND --help` lists them with defaults.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/units.h"
#include "common/cli.h"
#include "common/image_size.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace argen::client {
namespace {

constexpr char kDescription[] =
    "argen_client: generate images with argen_server, inspect it, check its health, load-test it.\n"
    "Global flags go before or after the command; ARGEN_SERVER and ARGEN_API_KEY set defaults.";
constexpr char kFooter[] =
    "Exit codes: 0 ok, 1 server error (or NOT_SERVING), 2 bad command line, 3 server unreachable\n"
    "or unavailable, 4 local I/O error (output folder, existing file, prompts file).";

using cli::FlagNames;

void AddRequestFlags(CLI::App& sub, RequestFlags& f) {
  // One name per setting as on gRPC (num_images, cfg_weight) and HTTP (n,
  // guidance_scale): the short names first, the others as aliases.
  sub.add_option(FlagNames("count") + "," + FlagNames("num-images") + ",-n", f.count,
                 "Images for the prompt (each one CFG pair: 2 KV rows); at most the server's max_images_per_request "
                 "(argen_client info); alias --num-images, -n")
      ->check(CLI::PositiveNumber);
  sub.add_option(FlagNames("policy"), f.policy,
                 "Sparsity policy NAME or NAME:SPARSITY (dense, sliding_window, streaming_llm, h2o, tova, "
                 "alisa, diagonal, diagonal_sink4, grid_window, diagonal_grid, ssd, line_evict); a sparse NAME needs a "
                 "sparsity (NAME:S, --sparsity or --n-att); empty: the server's default");
  sub.add_option(FlagNames("sparsity"), f.sparsity, "Fraction of decode KV not attended, [0, 1)");
  sub.add_option(FlagNames("n_att"), f.n_att, "Decode keys attended per step (0: from sparsity)")
      ->check(CLI::Range(-1, 1 << 24));
  sub.add_option(FlagNames("n_recent"), f.n_recent, "Diagonal recent window N_r")->check(CLI::Range(-1, 1 << 24));
  sub.add_option(FlagNames("n_sink"), f.n_sink, "Sink tokens (-1: the policy default)")->check(CLI::Range(-1, 1 << 24));
  sub.add_option(FlagNames("seed"), f.seed, "Sampling seed (unset: the server picks one and reports it)")
      ->check(cli::Uint64Digits());
  sub.add_option(FlagNames("class_id"), f.class_id,
                 "Class-conditional models (LlamaGen c2i): the class to draw, instead of a prompt");
  sub.add_option(FlagNames("cfg") + "," + FlagNames("cfg-weight") + "," + FlagNames("guidance-scale"), f.cfg,
                 "Classifier-free guidance weight (unset: the server default); aliases --cfg-weight, "
                 "--guidance-scale");
  sub.add_option(FlagNames("negative-prompt"), f.negative_prompt,
                 "What the image should not show: the unconditional (guidance) prompt; unset: the model "
                 "family's default");
  sub.add_option(FlagNames("temperature"), f.temperature, "Sampling temperature (unset: the server default)");
  sub.add_option(FlagNames("top_k"), f.top_k, "Top-k filter, 0: off (unset: the server default)")
      ->check(CLI::Range(0, 1 << 30));
  sub.add_option(FlagNames("top_p"), f.top_p, "Top-p filter in (0, 1] (unset: the server default)");
  sub.add_option(FlagNames("parallel_window"), f.parallel_window,
                 "Parallel decoding (dense policy): image row r+1 starts once row r has this many tokens; 0: off "
                 "(unset: the server default; argen_client info shows the range)")
      ->check(CLI::Range(0, 1 << 16));
  sub.add_option(FlagNames("speculative_window"), f.speculative_window,
                 "Speculative Jacobi decoding (dense policy, exact): tokens verified per step; 0: off "
                 "(unset: the server default; argen_client info shows the range)")
      ->check(CLI::Range(0, 1 << 16));
  sub.add_option(FlagNames("size"), f.size,
                 "Image size WxH, one of the model's (argen_client info lists them); unset: its default");
  sub.add_option(FlagNames("kv-cache-dtype"), f.kv_cache_dtype,
                 "KV cache storage: auto (the backend's own) or fp8 (e4m3, about half the KV memory on cuda); "
                 "unset: the server's default")
      ->check([](const std::string& v) {
        absl::StatusOr<std::string> d = ParseKvCacheDtype(v);
        return d.ok() ? std::string() : std::string(d.status().message());
      });
}

std::string ClientMessage(const CLI::App& failed, const std::string& message) {
  // At the top level a bare word is a command name.
  if (failed.get_parent() == nullptr && message.rfind("unexpected argument '", 0) == 0) {
    return "unknown command " + message.substr(std::string("unexpected argument ").size()) +
           " (commands: generate, info, health, load)";
  }
  if (message.find("A subcommand is required") != std::string::npos) {
    return "no command given (commands: generate, info, health, load)";
  }
  return message;
}

}  // namespace

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK:
      return "OK";
    case grpc::CANCELLED:
      return "CANCELLED";
    case grpc::UNKNOWN:
      return "UNKNOWN";
    case grpc::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::ABORTED:
      return "ABORTED";
    case grpc::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::INTERNAL:
      return "INTERNAL";
    case grpc::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

int ReportRpcError(const std::string& what, const std::string& server, const grpc::Status& status, std::ostream& err) {
  err << "argen_client: " << what << ": " << GrpcCodeName(status.error_code()) << ": " << status.error_message()
      << "\n";
  google::rpc::Status rich;
  if (!status.error_details().empty() && rich.ParseFromString(status.error_details())) {
    for (const google::protobuf::Any& any : rich.details()) {
      google::rpc::ErrorInfo info;
      google::rpc::BadRequest bad;
      google::rpc::RetryInfo retry;
      if (any.UnpackTo(&info)) {
        // The reason repeats the code for plain field errors; other reasons add to it.
        if (info.reason() != "INVALID_FIELD") err << "argen_client: reason " << info.reason() << "\n";
      } else if (any.UnpackTo(&bad)) {
        // The message names the field already in most cases: print each fact once.
        for (const auto& v : bad.field_violations()) {
          if (status.error_message().find(v.description()) != std::string::npos) continue;
          err << "argen_client: field " << v.field() << ": " << v.description() << "\n";
        }
      } else if (any.UnpackTo(&retry)) {
        err << "argen_client: retry after "
            << HumanSeconds(retry.retry_delay().seconds() + retry.retry_delay().nanos() / 1e9) << "\n";
      }
    }
  }
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

absl::StatusOr<std::string> ParseKvCacheDtype(const std::string& value) {
  const std::string lower = absl::AsciiStrToLower(value);
  if (lower == "auto" || lower == "fp8" || lower == "fp8_e4m3") return lower;
  return absl::InvalidArgumentError(
      absl::StrCat("kv_cache_dtype \"", value.substr(0, 64), "\": expected auto or fp8 (also fp8_e4m3)"));
}

absl::StatusOr<std::pair<int32_t, int32_t>> ParseSizeSpec(const std::string& spec) {
  if (spec.empty() || spec == "auto") return std::pair<int32_t, int32_t>{0, 0};
  const std::optional<std::pair<int32_t, int32_t>> size = ParseImageSize(spec);
  if (!size) {
    return absl::InvalidArgumentError(absl::StrCat("size \"", spec, "\": expected WxH in pixels (e.g. 512x768)"));
  }
  return *size;
}

absl::StatusOr<v1::GenerateRequest> RequestFromFlags(const RequestFlags& f) {
  v1::GenerateRequest r;
  absl::StatusOr<std::pair<int32_t, int32_t>> size = ParseSizeSpec(f.size);
  if (!size.ok()) return size.status();
  r.set_width(size->first);
  r.set_height(size->second);
  r.set_prompt(f.prompt);
  r.set_negative_prompt(f.negative_prompt);
  if (f.class_id) r.set_class_id(*f.class_id);
  r.set_num_images(f.count);
  if (f.seed) r.set_seed(*f.seed);
  if (f.cfg) r.set_cfg_weight(static_cast<float>(*f.cfg));
  if (f.temperature) r.set_temperature(static_cast<float>(*f.temperature));
  if (f.top_p) r.set_top_p(static_cast<float>(*f.top_p));
  if (f.top_k) r.set_top_k(*f.top_k);
  if (f.parallel_window) r.set_parallel_window(*f.parallel_window);
  if (f.speculative_window) r.set_speculative_window(*f.speculative_window);
  v1::SparsityPolicy* policy = r.mutable_policy();
  if (!f.policy.empty()) {
    absl::StatusOr<v1::SparsityPolicy> spec = ParsePolicySpec(f.policy);
    if (!spec.ok()) return spec.status();
    *policy = *spec;
  }
  if (f.sparsity) policy->set_sparsity(*f.sparsity);
  if (f.n_att) policy->set_n_att(*f.n_att);
  if (f.n_recent) policy->set_n_recent(*f.n_recent);
  if (f.n_sink) policy->set_n_sink(*f.n_sink);
  if (!f.kv_cache_dtype.empty()) {
    absl::StatusOr<std::string> dtype = ParseKvCacheDtype(f.kv_cache_dtype);
    if (!dtype.ok()) return dtype.status();
    policy->set_kv_cache_dtype(*dtype);
  }
  return r;
}

void PrintMetrics(const v1::RequestMetrics& m, std::ostream& out) {
  char rate[64];
  std::snprintf(rate, sizeof(rate), "%.1f tokens/s, %.2f images/s", m.tokens_per_second(), m.images_per_second());
  char batch[64];
  std::snprintf(batch, sizeof(batch), "%.1f", m.mean_batch_rows());
  out << "queue wait     " << HumanSeconds(m.queue_wait_seconds()) << "\n"
      << "prefill        " << HumanSeconds(m.prefill_seconds()) << "\n"
      << "decode         " << HumanSeconds(m.decode_seconds()) << "\n"
      << "VQ decode+PNG  " << HumanSeconds(m.vq_decode_seconds()) << "\n"
      << "total          " << HumanSeconds(m.total_seconds()) << "\n"
      << "throughput     " << rate << "\n"
      << "peak KV        " << HumanBytes(m.peak_kv_bytes()) << "\n"
      << "mean batch     " << batch << " rows (own " << m.rows() << ")\n"
      << "engine steps   " << m.steps() << "\n";
  if (m.drafts_proposed() > 0) {
    char accepted[96];
    std::snprintf(accepted, sizeof(accepted), "%lld of %lld (%.1f%%)", static_cast<long long>(m.drafts_accepted()),
                  static_cast<long long>(m.drafts_proposed()),
                  100.0 * static_cast<double>(m.drafts_accepted()) / static_cast<double>(m.drafts_proposed()));
    out << "drafts taken   " << accepted << "\n";
  }
}

int RunClient(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool interactive) {
  CommonOptions common;
  common.interactive = interactive;
  CLI::App app(kDescription, "argen_client");
  cli::Configure(app, "argen_client");
  app.footer(kFooter);
  app.fallthrough();  // global flags after the command too
  app.require_subcommand(1);
  app.add_option(FlagNames("server"), common.server, "Server address HOST:PORT")->envname("ARGEN_SERVER");
  app.add_option(FlagNames("api_key"), common.security.api_key,
                 "API key, sent as 'authorization: Bearer <key>' (ignored by servers without keys)")
      ->envname("ARGEN_API_KEY");
  std::string ca_file, cert_file, key_file;
  CLI::Option* ca =
      app.add_option(FlagNames("ca_file"), ca_file, "TLS: trust these CA certificates (PEM)")->check(CLI::ExistingFile);
  CLI::Option* cert = app.add_option(FlagNames("cert_file"), cert_file, "Mutual TLS: the client certificate (PEM)")
                          ->check(CLI::ExistingFile);
  CLI::Option* key =
      app.add_option(FlagNames("key_file"), key_file, "Mutual TLS: the client key (PEM)")->check(CLI::ExistingFile);
  cert->needs(key)->needs(ca);
  key->needs(cert);
  app.add_option(FlagNames("timeout"), common.timeout_seconds,
                 "Deadline of each call in seconds, or with a unit (500ms, 2m); 0: none")
      ->transform(DurationSeconds());
  app.add_option(FlagNames("max_message_bytes"), common.max_message_bytes,
                 "gRPC message size limit in bytes, or with a unit (64MiB)")
      ->transform(ByteCount())
      ->check(CLI::Range(int64_t{4096}, int64_t{1} << 31));

  GenerateOptions generate;
  CLI::App* gen = app.add_subcommand("generate", "Generate images for a prompt (or a file of prompts) and write PNGs");
  CLI::Option* prompt = gen->add_option(FlagNames("prompt", 'p'), generate.request.prompt, "The caption");
  CLI::Option* prompts_file =
      gen->add_option(FlagNames("prompts-file"), generate.prompts_file,
                      "Batch mode: one request per line, a prompt or a JSON object overriding the flags "
                      "(prompt, count, seed, size, policy, sparsity, n_att, n_recent, n_sink, kv_cache_dtype, cfg, "
                      "negative_prompt, temperature, top_k, top_p, request_id)");
  prompt->excludes(prompts_file);
  AddRequestFlags(*gen, generate.request);
  gen->add_option(FlagNames("parallel"), generate.parallel, "Batch mode: requests in flight at once")
      ->check(CLI::Range(1, 1024));
  CLI::Option* out_dir = gen->add_option(FlagNames("out"), generate.out, "Output folder (created at the first image)");
  CLI::Option* output_file = gen->add_option(
      FlagNames("output", 'o'), generate.output,
      "Output file for the image (with --count N > 1: <stem>_<i><ext> beside it) instead of --out's <id>_<i>.png");
  output_file->excludes(out_dir)->excludes(prompts_file);
  gen->add_option(FlagNames("request_id"), generate.request_id,
                  "Request id, also the file stem <id>_<index>.png (unset: the server assigns a unique ULID)");
  gen->add_flag(FlagNames("overwrite"), generate.overwrite, "Replace existing image files (default: refuse)");
  gen->add_flag(FlagNames("quiet", 'q'), generate.quiet, "No progress on stderr");
  gen->add_flag(FlagNames("json"), generate.json, "Print the result as JSON on stdout");

  InfoOptions info;
  CLI::App* info_cmd = app.add_subcommand("info", "Show the served model, limits, policies and parameter ranges");
  info_cmd->add_flag(FlagNames("json"), info.json, "Print ModelInfo as JSON");

  HealthOptions health;
  CLI::App* health_cmd = app.add_subcommand("health", "grpc.health.v1 Check: prints SERVING or NOT_SERVING");
  health_cmd->add_option(FlagNames("service"), health.service, "Service to check (\"\": the whole server)");

  LoadOptions load;
  load.request.prompt = "a red circle above a blue square";
  CLI::App* load_cmd = app.add_subcommand(
      "load", "Load test like a serving benchmark: closed loop (--concurrency) or Poisson arrivals (--rate)");
  load_cmd->add_option(FlagNames("prompt", 'p'), load.request.prompt, "The caption of every request");
  AddRequestFlags(*load_cmd, load.request);
  load_cmd->add_option(FlagNames("requests"), load.requests, "Requests to send (0: 16, or no limit with --duration)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  load_cmd
      ->add_option(FlagNames("concurrency"), load.concurrency,
                   "Closed loop: requests in flight (0: 4); with --rate: the most in flight (0: 1024)")
      ->check(CLI::Range(0, 4096));
  load_cmd
      ->add_option(FlagNames("rate"), load.rate, "Open loop: Poisson arrivals at this many requests/s (0: closed loop)")
      ->check(CLI::NonNegativeNumber);
  load_cmd
      ->add_option(FlagNames("duration"), load.duration,
                   "Stop starting requests after this long: seconds or with a unit (90s, 5m); 0: no limit")
      ->transform(DurationSeconds());
  load_cmd->add_option(FlagNames("policies"), load.policies,
                       "Policy mix cycled through, e.g. dense,alisa:0.8 (a sparse policy names its sparsity)");
  load_cmd->add_option(FlagNames("prompts-file"), load.prompts_file,
                       "Captions cycled through, one a line or JSONL as for generate (a line's fields apply; "
                       "request i still gets seed + i)");
  load_cmd->add_option(FlagNames("save-result"), load.save_result, "Write the summary as JSON to this file");
  load_cmd->add_flag(FlagNames("json"), load.json, "Print the summary as JSON on stdout");

  // A bare word where the command goes that names none: say so (CLI11 would
  // only say that a command is missing).
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("-", 0) == 0) {
      std::string flag = a;
      std::replace(flag.begin(), flag.end(), '-', '_');
      const bool takes_value = flag == "__server" || flag == "__api_key" || flag == "__timeout" ||
                               flag == "__max_message_bytes" || flag == "__ca_file" || flag == "__cert_file" ||
                               flag == "__key_file";
      if (takes_value) ++i;
      continue;
    }
    if (a != "generate" && a != "info" && a != "health" && a != "load") {
      err << "argen_client: unknown command '" << a << "' (commands: generate, info, health, load)\n"
          << "run 'argen_client --help' for the flags\n";
      return kUsage;
    }
    break;
  }
  if (std::optional<int> rc = cli::Parse(app, args, out, err, kUsage, ClientMessage)) return *rc;
  for (const auto& [flag, path, into] : {std::tuple{"--ca_file", &ca_file, &common.security.ca_pem},
                                         {"--cert_file", &cert_file, &common.security.cert_pem},
                                         {"--key_file", &key_file, &common.security.key_pem}}) {
    if (path->empty()) continue;
    std::ifstream in(*path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      err << "argen_client: flag " << flag << ": cannot read '" << *path << "'\n";
      return kUsage;
    }
    *into = text.str();
  }

  if (gen->parsed()) {
    if (prompt->count() == 0 && prompts_file->count() == 0 && !generate.request.class_id) {
      err << "argen_client generate: flag --prompt is required (or --prompts-file, or --class_id)\n"
          << "run 'argen_client generate --help' for the flags\n";
      return kUsage;
    }
    return RunGenerate(common, generate, out, err);
  }
  if (info_cmd->parsed()) return RunInfo(common, info, out, err);
  if (health_cmd->parsed()) return RunHealth(common, health, out, err);
  // A class-conditional model takes no caption: --class_id drops the default one.
  if (load.request.class_id && load_cmd->get_option("--prompt")->count() == 0) load.request.prompt.clear();
  return RunLoad(common, load, out, err);
}

}  // namespace argen::client
