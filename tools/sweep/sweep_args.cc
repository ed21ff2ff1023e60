#include "tools/sweep/sweep_args.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cli.h"
#include "common/image_size.h"
#include "engine/sparse/policy_params.h"

namespace argen::sweep {
namespace {

using Setter = std::function<absl::Status(const std::string& value)>;

absl::Status Bad(const std::string& flag, const std::string& value, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", value, "\" is not ", want));
}

Setter Int(const std::string& flag, int32_t* out, int32_t min) {
  return [=](const std::string& v) {
    if (!absl::SimpleAtoi(v, out)) return Bad(flag, v, "an integer");
    if (*out < min) return absl::InvalidArgumentError(absl::StrCat(flag, " must be >= ", min, ", got ", v));
    return absl::OkStatus();
  };
}

Setter Float(const std::string& flag, float* out) {
  return [=](const std::string& v) { return absl::SimpleAtof(v, out) ? absl::OkStatus() : Bad(flag, v, "a number"); };
}

Setter Double(const std::string& flag, double* out, double min) {
  return [=](const std::string& v) {
    if (!absl::SimpleAtod(v, out)) return Bad(flag, v, "a number");
    if (!(*out >= min)) return absl::InvalidArgumentError(absl::StrCat(flag, " must be >= ", min, ", got ", v));
    return absl::OkStatus();
  };
}

Setter Text(const std::string& flag, std::string* out) {
  return [=](const std::string& v) {
    if (v.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " must not be empty"));
    *out = v;
    return absl::OkStatus();
  };
}

}  // namespace

const char* SweepUsage() {
  return "argen_sweep: runs benchmark prompts through the engine for every policy x sparsity.\n"
         "  argen_sweep --model DIR --out DIR [options]\n"
         "Options (defaults in brackets):\n"
         "  --prompts FILE          benchmark JSONL [tools/sweep/benchmark_prompts.jsonl]\n"
         "  --format F              the files' layout: default, geneval (GenEval's evaluate_images.py reads\n"
         "                          OUT/<config>: <index:05d>/metadata.jsonl + samples/<image:04d>.png) or dpg\n"
         "                          (DPG-Bench's compute_dpg_bench.py reads OUT/<config>: <prompt name>.png,\n"
         "                          the images 2 x 2; at most 4 a prompt) [default]\n"
         "  --geneval-prompts FILE  --format geneval: GenEval's prompts/evaluation_metadata.jsonl, as published\n"
         "  --dpg-prompts DIR       --format dpg: DPG-Bench's dpg_bench/prompts folder (<name>.txt a prompt)\n"
         "  --backend cpu|cuda      [cpu]\n"
         "                          (a class-conditional model, LlamaGen c2i: prompt p asks for class p mod the\n"
         "                          model's classes, recorded as class_id in the manifest; its text is a label)\n"
         "  --images-per-prompt N   [4]\n"
         "  --policies a,b,...      [dense,sliding_window,streaming_llm,h2o,tova,alisa,diagonal,"
         "diagonal_sink4]\n"
         "                          also grid_window, diagonal_grid, ssd, line_evict; name:N gives that entry its own\n"
         "                          n_recent (e.g. diagonal:64, folder diagonal_nr64_<sparsity>)\n"
         "  --sparsities p,q,...    percent [80,90,92.5,95,96]; dense always runs once, at 0\n"
         "  --parallel-windows a,b  every configuration at each parallel_window (ZipAR-style rows in\n"
         "                          flight, dense only; folder <config>_pw<N>; 0: in order) [0]\n"
         "  --speculative-windows a,b  and every configuration at each speculative_window > 0\n"
         "                          (speculative Jacobi decoding, exact, dense only; folder <config>_sw<N>) []\n"
         "  --n-recent N            diagonal policies' recent window N_r (diagonal, diagonal_sink4; N_att\n"
         "                          still comes from the sparsity, and must be <= N); default the model\n"
         "                          family's N_r (docs/policies.md; the paper's 0.5 x image tokens: say it),\n"
         "                          widened to N_att where that is larger [0: the default]\n"
         "  --subsample K           every K-th prompt (0, K, 2K, ...: all categories stay) [1]\n"
         "  --per-category N        then at most N prompts of each category, evenly spread (0: all) [0]\n"
         "  --max-prompts N         then only the first N of those (0: all) [0]\n"
         "  --max-batch-rows R      rows decoded at once, 2 per image (CFG) [256]\n"
         "  --threads T             CPU threads, 0: all cores [0]\n"
         "  --image-threads N       PNG writer threads, 0: hardware threads - 1 [0]\n"
         "  --png-level L           zlib level of the PNGs, 0..9 [1]\n"
         "  --decode-batch G        finished requests VQ-decoded in one call [8]\n"
         "  --shard i/n             only prompts whose line index % n == i (a disjoint part of the grid) [0/1]\n"
         "  --exclude FILE          skip the (configuration, prompt) pairs listed, one \"<config> <prompt index>\"\n"
         "                          a line (done by another run; tools/sweep/report.py --done-list writes it)\n"
         "  --deadline-seconds S    admit no request S seconds after start; running ones finish and are\n"
         "                          written, then exit 0 naming the requests left (--resume continues) [0: none]\n"
         "  --seed S                prompt p uses seed S+p, image i its stream i [0]\n"
         "  --cfg W --temperature T --top_k K --top_p P   sampling [the model's defaults, as the server's]\n"
         "  --negative-prompt TEXT  every request's guidance (unconditional) prompt [the model family's]\n"
         "  --size WxH              the image size, one of the model's sizes [auto: the model's default]\n"
         "  --kv-cache-dtype D      KV cache storage of every request: auto (bf16 on cuda, f32 on cpu) or fp8\n"
         "                          (e4m3, per-vector scales; the cpu rounds through e4m3) [auto]\n"
         "  --weight-dtype D        the decoder layers' projections: auto (bf16 on cuda, f32 on cpu) or fp8\n"
         "                          (e4m3 W8A8; the cpu rounds weights and GEMM inputs through e4m3) [auto]\n"
         "  --resume                keep finished images of an earlier run into --out\n"
         "  --skip-invalid          leave out (and name) configurations the model rejects, e.g. diagonal:64\n"
         "                          at 80% (N_att 115 > 64), instead of stopping with exit 2\n"
         "  --version               print the version (git describe, build type) and exit\n"
         "Writes OUT/<policy>_<sparsity>/<prompt index:04d>_<image>.png (or --format's layout) and\n"
         "OUT/manifest.jsonl.\n"
         "Exit status: 0 done, 1 generation failed, 2 usage error.\n";
}

absl::StatusOr<SweepArgs> ParseSweepArgs(const std::vector<std::string>& args) {
  SweepArgs a;
  std::string policies(kDefaultPolicies), sparsities(kDefaultSparsities);
  std::string seed_text, shard_text, size_text, kv_text, weight_text, format_text, windows_text = "0", speculative_text;
  const std::map<std::string, Setter> valued = {
      {"--model", Text("--model", &a.model)},
      {"--prompts", Text("--prompts", &a.prompts)},
      {"--out", Text("--out", &a.out)},
      {"--format", Text("--format", &format_text)},
      {"--geneval-prompts", Text("--geneval-prompts", &a.geneval_prompts)},
      {"--dpg-prompts", Text("--dpg-prompts", &a.dpg_prompts)},
      {"--backend", Text("--backend", &a.backend)},
      {"--images-per-prompt", Int("--images-per-prompt", &a.images_per_prompt, 1)},
      {"--policies", Text("--policies", &policies)},
      {"--sparsities", Text("--sparsities", &sparsities)},
      {"--parallel-windows", Text("--parallel-windows", &windows_text)},
      {"--speculative-windows", Text("--speculative-windows", &speculative_text)},
      {"--n-recent", Int("--n-recent", &a.n_recent, 0)},
      {"--subsample", Int("--subsample", &a.subsample, 1)},
      {"--per-category", Int("--per-category", &a.per_category, 0)},
      {"--max-prompts", Int("--max-prompts", &a.max_prompts, 0)},
      {"--max-batch-rows", Int("--max-batch-rows", &a.max_batch_rows, 2)},
      {"--threads", Int("--threads", &a.threads, 0)},
      {"--image-threads", Int("--image-threads", &a.image_threads, 0)},
      {"--png-level", Int("--png-level", &a.png_level, 0)},
      {"--decode-batch", Int("--decode-batch", &a.decode_batch, 1)},
      {"--deadline-seconds", Double("--deadline-seconds", &a.deadline_seconds, 0)},
      {"--shard", Text("--shard", &shard_text)},
      {"--size", Text("--size", &size_text)},
      {"--kv-cache-dtype", Text("--kv-cache-dtype", &kv_text)},
      {"--weight-dtype", Text("--weight-dtype", &weight_text)},
      {"--exclude", Text("--exclude", &a.exclude)},
      {"--seed", Text("--seed", &seed_text)},
      {"--cfg", Float("--cfg", &a.sampling.cfg_weight)},
      {"--temperature", Float("--temperature", &a.sampling.temperature)},
      {"--top_k", Int("--top_k", &a.sampling.top_k, 0)},
      {"--top_p", Float("--top_p", &a.sampling.top_p)},
      {"--negative-prompt", Text("--negative-prompt", &a.negative_prompt)},
  };
  // CLI11 tokenizes (--name value, --name=value); each flag's setter keeps its
  // own message, and CLI11's are reworded to this parser's ("unknown
  // argument", "needs a value").
  struct SetterError {
    absl::Status status;
  };
  for (const std::string& arg : args) {
    if (arg.rfind("--resume=", 0) == 0) return absl::InvalidArgumentError("--resume takes no value");
    if (arg.rfind("--skip-invalid=", 0) == 0) return absl::InvalidArgumentError("--skip-invalid takes no value");
  }
  CLI::App app("argen_sweep", "argen_sweep");
  app.set_help_flag();
  app.add_flag("-h,--help", a.help);
  app.add_flag("--version", a.version);
  app.add_flag("--resume", a.resume);
  app.add_flag("--skip-invalid", a.skip_invalid);
  for (const auto& [name, setter] : valued) {
    app.add_option(
           name,
           [name = name, setter = setter](const CLI::results_t& values) {
             for (const std::string& v : values) {
               if (absl::Status s = setter(v); !s.ok()) throw SetterError{s};
             }
             return true;
           },
           name)
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  std::vector<std::string> reversed = cli::CliArgs(args);
  try {
    app.parse(reversed);
  } catch (const SetterError& e) {
    return e.status;
  } catch (const CLI::ExtrasError& e) {
    const std::vector<std::string> extras = cli::UnexpectedArguments(e);
    return absl::InvalidArgumentError(
        absl::StrCat("unknown argument \"", extras.empty() ? std::string("?") : extras.front(), "\""));
  } catch (const CLI::ArgumentMismatch& e) {
    const std::string what = e.what();  // "--out: 1 required TEXT missing"
    return absl::InvalidArgumentError(absl::StrCat(what.substr(0, what.find(':')), " needs a value"));
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(cli::ErrorMessage(e));
  }
  a.cfg_given = app.count("--cfg") > 0;
  a.temperature_given = app.count("--temperature") > 0;
  a.top_k_given = app.count("--top_k") > 0;
  a.top_p_given = app.count("--top_p") > 0;

  if (a.help || a.version) return a;
  if (a.model.empty()) return absl::InvalidArgumentError("--model is required");
  if (a.out.empty()) return absl::InvalidArgumentError("--out is required");
  if (a.backend != "cpu" && a.backend != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("--backend must be cpu or cuda, got \"", a.backend, "\""));
  }
  if (!seed_text.empty() && !absl::SimpleAtoi(seed_text, &a.seed)) {
    return Bad("--seed", seed_text, "a non-negative integer");
  }
  if (!format_text.empty()) {
    absl::StatusOr<OutputFormat> format = ParseOutputFormat(format_text);
    if (!format.ok()) return format.status();
    a.format = *format;
  }
  // The benchmarks' prompts come as published, each from its own flag.
  const bool prompts_given = app.count("--prompts") > 0;
  for (const auto& [flag, value, format] : {std::tuple{"--geneval-prompts", &a.geneval_prompts, OutputFormat::kGeneval},
                                            std::tuple{"--dpg-prompts", &a.dpg_prompts, OutputFormat::kDpg}}) {
    const bool given = !value->empty();
    if (given && a.format != format) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " is read by --format ", std::string(OutputFormatName(format)), " only"));
    }
    if (!given && a.format == format) {
      return absl::InvalidArgumentError(
          absl::StrCat("--format ", std::string(OutputFormatName(format)), " needs ", flag));
    }
    if (given && prompts_given) {
      return absl::InvalidArgumentError(absl::StrCat("--prompts and ", flag, ": give one of them"));
    }
    if (given) a.prompts = *value;
  }
  if (a.format == OutputFormat::kDpg && a.images_per_prompt > kDpgMaxImages) {
    return absl::InvalidArgumentError(absl::StrCat("--format dpg tiles at most ", kDpgMaxImages,
                                                   " images a prompt (2 x 2), got --images-per-prompt ",
                                                   a.images_per_prompt));
  }
  if (a.png_level > 9) return absl::InvalidArgumentError(absl::StrCat("--png-level must be 0..9, got ", a.png_level));
  if (!size_text.empty() && size_text != "auto") {
    const std::optional<std::pair<int32_t, int32_t>> size = ParseImageSize(size_text);
    if (!size) return Bad("--size", size_text, "WxH in pixels (e.g. 512x768) or auto");
    a.width = size->first;
    a.height = size->second;
  }
  if (!kv_text.empty()) {
    absl::StatusOr<sparse::KvFormat> format = sparse::ParseKvFormat(kv_text);
    if (!format.ok()) return Bad("--kv-cache-dtype", kv_text, "auto or fp8 (also fp8_e4m3)");
    a.kv_format = *format;
  }
  if (!weight_text.empty()) {
    absl::StatusOr<model::WeightFormat> format = model::ParseWeightFormat(weight_text);
    if (!format.ok()) return Bad("--weight-dtype", weight_text, "auto or fp8");
    a.weight_format = *format;
  }
  if (!shard_text.empty()) {
    const size_t slash = shard_text.find('/');
    if (slash == std::string::npos || !absl::SimpleAtoi(shard_text.substr(0, slash), &a.shard_index) ||
        !absl::SimpleAtoi(shard_text.substr(slash + 1), &a.shard_count) || a.shard_count < 1 || a.shard_index < 0 ||
        a.shard_index >= a.shard_count) {
      return Bad("--shard", shard_text, "i/n with 0 <= i < n");
    }
  }
  if (a.max_batch_rows % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-batch-rows must be even (rows come in CFG pairs), got ", a.max_batch_rows));
  }
  if (a.max_batch_rows < 2 * a.images_per_prompt) {
    return absl::InvalidArgumentError(absl::StrCat("--max-batch-rows (", a.max_batch_rows,
                                                   ") must be >= 2 x --images-per-prompt (", 2 * a.images_per_prompt,
                                                   "): a prompt's images (a CFG row pair each) run together"));
  }
  absl::StatusOr<std::vector<PolicySpec>> specs = ParsePolicySpecs(policies);
  if (!specs.ok()) return specs.status();
  a.policy_specs = *std::move(specs);
  for (const PolicySpec& s : a.policy_specs) a.policies.push_back(s.kind);
  absl::StatusOr<std::vector<int32_t>> windows = ParseParallelWindows(windows_text);
  if (!windows.ok()) return windows.status();
  a.parallel_windows = *std::move(windows);
  if (!speculative_text.empty()) {
    absl::StatusOr<std::vector<int32_t>> speculative = ParseParallelWindows(speculative_text, "--speculative-windows");
    if (!speculative.ok()) return speculative.status();
    a.speculative_windows = *std::move(speculative);
  }
  absl::StatusOr<std::vector<double>> percents = ParseSparsities(sparsities);
  if (!percents.ok()) return percents.status();
  a.sparsities = *std::move(percents);
  if (a.n_recent > 0 && std::none_of(a.policies.begin(), a.policies.end(), UsesNRecent)) {
    return absl::InvalidArgumentError(absl::StrCat("--n-recent ", a.n_recent,
                                                   " sets the recent window of the diagonal policies (diagonal, "
                                                   "diagonal_sink4), but --policies ",
                                                   policies, " has none"));
  }
  return a;
}

engine::SamplingParams EffectiveSampling(const SweepArgs& args, const engine::SamplingParams& model_defaults) {
  engine::SamplingParams s = model_defaults;
  if (args.cfg_given) s.cfg_weight = args.sampling.cfg_weight;
  if (args.temperature_given) s.temperature = args.sampling.temperature;
  if (args.top_k_given) s.top_k = args.sampling.top_k;
  if (args.top_p_given) s.top_p = args.sampling.top_p;
  return s;
}

}  // namespace argen::sweep
