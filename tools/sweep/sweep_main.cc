// argen_sweep: the quality sweep. Runs the benchmark prompts through the
// engine for every sparsity policy x sparsity of a grid, with the same seeds
// for every configuration (a paired comparison), and writes
//   OUT/<policy>_<sparsity>/<prompt index:04d>_<image>.png (--format geneval,
//                             dpg: the official evaluators' layouts, output_format.h)
//   OUT/manifest.jsonl        one line per image (prompt, tag, policy, sparsity, seed, path, time)
//   OUT/sweep_settings.json   what --resume checks
// tools/sweep/report.py scores them. See SweepUsage() (--help) for options.
// Exit status: 0 done, 1 generation failed, 2 usage error.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "engine/engine.h"
#include "engine/request_rules.h"
#include "tools/sweep/image_sink.h"
#include "tools/sweep/manifest.h"
#include "tools/sweep/prompt_set.h"
#include "tools/sweep/resume.h"
#include "tools/sweep/sweep_args.h"
#include "tools/sweep/sweep_grid.h"
#include "tools/sweep/sweep_runner.h"

namespace {

namespace fs = std::filesystem;
using namespace argen;

constexpr int kFailed = 1;
constexpr int kUsage = 2;

int Fail(int code, const absl::Status& s) {
  std::fprintf(stderr, "argen_sweep: %s\n", std::string(s.message()).c_str());
  return code;
}

// Every configuration must be valid for this model (e.g. 96% of a tiny
// decode length leaves no key; streaming_llm needs n_att > 4 sinks; --n-recent
// must be >= every diagonal configuration's n_att and <= L_dec), checked
// before any image is made.
absl::Status ValidateGrid(const engine::Engine& engine, const std::vector<sweep::SweepConfig>& grid,
                          const sweep::BenchmarkPrompt& prompt, const sweep::RunSettings& settings) {
  for (const sweep::SweepConfig& c : grid) {
    const engine::GenerationRequest request = sweep::MakeRequest({&c, &prompt}, settings);
    absl::StatusOr<engine::PreparedRequest> p = engine.Prepare(request);
    if (!p.ok()) {
      // The decode length of the size asked for (the default's when the size itself is refused).
      absl::StatusOr<engine::ImageLayout> layout = engine::RequestLayout(request, engine.info());
      const int32_t tokens = layout.ok() ? layout->image_tokens : engine.info().image_tokens;
      return absl::InvalidArgumentError(absl::StrCat("configuration ", c.label, " on model ", engine.info().name, " (",
                                                     tokens, " image tokens): ", p.status().message()));
    }
  }
  return absl::OkStatus();
}

// --exclude: "<config> <prompt index>" a line; blank lines and # comments are skipped.
absl::StatusOr<std::set<std::pair<std::string, int32_t>>> ReadExclude(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--exclude \"", path, "\" cannot be read"));
  std::set<std::pair<std::string, int32_t>> pairs;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream fields(line);
    std::string config, extra;
    int32_t prompt = 0;
    if (!(fields >> config) || config[0] == '#') continue;
    if (!(fields >> prompt) || (fields >> extra)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--exclude ", path, ":", n, ": want \"<config> <prompt index>\", got \"", line, "\""));
    }
    pairs.insert({config, prompt});
  }
  return pairs;
}

int Run(const sweep::SweepArgs& args, std::chrono::steady_clock::time_point start) {
  std::error_code ec;
  if (!fs::is_directory(args.model, ec)) {
    return Fail(kUsage, absl::NotFoundError(absl::StrCat("--model \"", args.model, "\" is not a directory")));
  }
  absl::StatusOr<std::vector<sweep::BenchmarkPrompt>> all = args.format == sweep::OutputFormat::kDpg
                                                                ? sweep::LoadDpgPrompts(args.dpg_prompts)
                                                                : sweep::LoadPrompts(args.prompts);
  if (!all.ok()) return Fail(kUsage, all.status());
  // Stride, then per category, then the first N.
  std::vector<sweep::BenchmarkPrompt> prompts = sweep::Subsample(
      sweep::PerCategory(sweep::Subsample(*all, args.subsample, 0), args.per_category), 1, args.max_prompts);
  // Then the shard: by line index, so shards of any subsample are disjoint and
  // each keeps every configuration of its prompts (the dense twins included).
  std::erase_if(prompts,
                [&](const sweep::BenchmarkPrompt& p) { return p.index % args.shard_count != args.shard_index; });
  if (prompts.empty()) {
    return Fail(kUsage, absl::InvalidArgumentError(absl::StrCat("no prompt left after subsampling and --shard ",
                                                                args.shard_index, "/", args.shard_count)));
  }
  std::set<std::pair<std::string, int32_t>> excluded;
  if (!args.exclude.empty()) {
    absl::StatusOr<std::set<std::pair<std::string, int32_t>>> e = ReadExclude(args.exclude);
    if (!e.ok()) return Fail(kUsage, e.status());
    excluded = *std::move(e);
  }
  std::vector<sweep::SweepConfig> grid =
      sweep::BuildGrid(args.policy_specs, args.sparsities, args.parallel_windows, args.speculative_windows);

  engine::EngineOptions options;
  options.model_dir = args.model;
  options.backend = args.backend;
  options.threads = args.threads;
  options.max_batch_rows = args.max_batch_rows;
  options.weight_format = args.weight_format;
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine = engine::CreateEngine(options);
  if (!engine.ok()) return Fail(kFailed, engine.status());

  sweep::RunSettings settings;
  settings.out_dir = args.out;
  settings.images_per_prompt = args.images_per_prompt;
  settings.max_batch_rows = args.max_batch_rows;
  settings.seed = args.seed;
  settings.sampling = sweep::EffectiveSampling(args, (*engine)->info().default_sampling);
  settings.negative_prompt = args.negative_prompt;
  settings.n_recent = args.n_recent;
  settings.width = args.width;
  settings.height = args.height;
  settings.kv_format = args.kv_format;
  settings.num_classes = (*engine)->info().num_classes;
  if (settings.num_classes > 0 && !args.negative_prompt.empty()) {
    return Fail(kUsage, absl::InvalidArgumentError(absl::StrCat("--negative-prompt: model ", (*engine)->info().name,
                                                                " is class-conditional (", settings.num_classes,
                                                                " classes; prompt p asks for class p mod ",
                                                                settings.num_classes, "): it takes no caption")));
  }
  if (args.deadline_seconds > 0) {
    settings.deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(args.deadline_seconds));
  }
  if (args.skip_invalid) {
    // Leave out what the model rejects (e.g. diagonal:64 at 80%, where N_att 115 > 64), naming it.
    std::erase_if(grid, [&](const sweep::SweepConfig& c) {
      const absl::Status s = ValidateGrid(**engine, {c}, prompts.front(), settings);
      if (!s.ok()) std::fprintf(stderr, "argen_sweep: skipped: %s\n", std::string(s.message()).c_str());
      return !s.ok();
    });
    if (grid.empty()) return Fail(kUsage, absl::InvalidArgumentError("--skip-invalid: no valid configuration left"));
  }
  if (absl::Status s = ValidateGrid(**engine, grid, prompts.front(), settings); !s.ok()) return Fail(kUsage, s);

  // Output folders, settings and (with --resume) the work already done.
  for (const sweep::SweepConfig& c : grid) {
    fs::create_directories(fs::path(args.out) / c.label, ec);
    if (ec) {
      return Fail(kUsage, absl::PermissionDeniedError(absl::StrCat(
                              "cannot create ", (fs::path(args.out) / c.label).string(), ": ", ec.message())));
    }
  }
  const fs::path settings_path = fs::path(args.out) / "sweep_settings.json";
  const fs::path manifest_path = fs::path(args.out) / "manifest.jsonl";
  // --resume compares what the run uses: the sampling after the model's defaults.
  sweep::SweepArgs effective = args;
  effective.sampling = settings.sampling;
  const nlohmann::json settings_json = sweep::SettingsJson(effective, (*engine)->info().name);
  sweep::ResumeState resume;
  if (args.resume && fs::exists(settings_path)) {
    std::ifstream in(settings_path);
    const nlohmann::json previous = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (absl::Status s = sweep::CheckSameSettings(previous, settings_json); !s.ok()) return Fail(kUsage, s);
    if (fs::exists(manifest_path)) {
      absl::StatusOr<std::vector<sweep::ManifestEntry>> entries = sweep::ReadManifest(manifest_path.string());
      if (!entries.ok()) return Fail(kFailed, entries.status());
      resume = sweep::FinishedWork(*entries, args.out, args.images_per_prompt);
    }
  }
  {
    std::ofstream out(settings_path);
    out << settings_json.dump(1) << "\n";
    if (!out) return Fail(kFailed, absl::DataLossError(absl::StrCat("cannot write ", settings_path.string())));
  }
  // The manifest is rewritten with the kept entries only (a killed run may
  // have left a partial line or entries of unfinished prompts).
  absl::StatusOr<std::unique_ptr<sweep::ManifestWriter>> manifest =
      sweep::ManifestWriter::Open(manifest_path.string(), /*append=*/false);
  if (!manifest.ok()) return Fail(kFailed, manifest.status());
  for (const sweep::ManifestEntry& e : resume.kept) {
    if (absl::Status s = (*manifest)->Write(e); !s.ok()) return Fail(kFailed, s);
  }

  std::vector<sweep::WorkItem> items;
  size_t skipped = 0;
  for (const sweep::SweepConfig& c : grid) {
    for (const sweep::BenchmarkPrompt& p : prompts) {
      if (excluded.contains({c.label, p.index})) {
        ++skipped;
      } else if (!resume.done.contains({c.label, p.index})) {
        items.push_back({&c, &p});
      }
    }
  }
  std::fprintf(
      stderr,
      "argen_sweep: model %s (%s, KV %s, weights %s), %zu prompts x %d images x %zu configurations; %zu requests to run"
      "%s%s%s\n",
      (*engine)->info().name.c_str(), args.backend.c_str(), std::string(sparse::KvFormatName(args.kv_format)).c_str(),
      model::WeightFormatName(args.weight_format).c_str(), prompts.size(), args.images_per_prompt, grid.size(),
      items.size(), resume.done.empty() ? "" : absl::StrCat(", ", resume.done.size(), " already done").c_str(),
      skipped == 0 ? "" : absl::StrCat(", ", skipped, " excluded").c_str(),
      args.shard_count == 1 ? "" : absl::StrCat(" (shard ", args.shard_index, "/", args.shard_count, ")").c_str());
  sweep::SinkOptions sink_options;
  sink_options.threads = args.image_threads > 0 ? args.image_threads : sweep::DefaultImageThreads();
  sink_options.decode_batch = args.decode_batch;
  sink_options.png.compression_level = args.png_level;
  sink_options.format = args.format;
  absl::StatusOr<sweep::SweepOutcome> outcome = sweep::RunSweep(**engine, items, settings, sink_options, **manifest);
  if (!outcome.ok()) return Fail(kFailed, outcome.status());
  std::fprintf(stderr, "argen_sweep: wrote %s\n", manifest_path.string().c_str());
  if (outcome->left > 0) {
    std::fprintf(stderr,
                 "argen_sweep: stopped at deadline, %lld requests left (%lld done in this run); run again with "
                 "--resume to continue\n",
                 static_cast<long long>(outcome->left), static_cast<long long>(outcome->finished));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::vector<std::string> raw(argv + 1, argv + argc);
  absl::StatusOr<sweep::SweepArgs> args = sweep::ParseSweepArgs(raw);
  if (!args.ok()) {
    std::fprintf(stderr, "argen_sweep: %s\n\n%s", std::string(args.status().message()).c_str(), sweep::SweepUsage());
    return kUsage;
  }
  if (args->help) {
    std::fputs(sweep::SweepUsage(), stdout);
    return 0;
  }
  if (args->version) {
    std::printf("%s\n", argen::VersionLine("argen_sweep").c_str());
    return 0;
  }
  return Run(*args, start);
}
