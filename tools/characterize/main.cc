// argen_characterize: the paper's section 3 attention characterization on any
// Janus-layout checkpoint and prompt file (one caption a line). Generates one
// image per prompt with the CPU engine (dense attention), observes every
// query head's decode attention, and writes to --out:
//   mass.csv        attention mass on prompt / local / middle keys
//   similarity.csv  vertical vs diagonal cosine similarity vs query distance d
//   locality.csv    per-head locality score s_{l,h} and head type
//   heatmap_p<i>_L<l>_H<h>.png  attention map of the chosen layer and head
// Plots: .venv/bin/python tools/characterize/plot.py --dir <out>.
// With --policy (default dense) the statistics and heatmaps show what a sparse
// policy attends (keys it skips or evicted have weight 0).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cli.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/create_engine.h"
#include "engine/sparse/policy_params.h"
#include "engine/sparse/ssd_heads.h"
#include "tools/characterize/aggregate.h"
#include "tools/characterize/attention_map.h"
#include "tools/characterize/attention_stats.h"
#include "tools/characterize/png_file.h"
#include "tools/runner/batch_runner.h"

namespace argen::characterize {
namespace {

struct Args {
  std::string model_dir, prompts, out;
  int32_t max_prompts = 0;  // 0: all
  // Heatmap layer/head; -1: the paper's Fig. 9 choice (layer 10, head 5),
  // clamped to the model.
  int32_t layer = -1, head = -1;
  int32_t max_distance = 32;
  double local_fraction = 0.1;
  int32_t locality_window = 32;
  double threshold = 0.45;
  bool uncond = false;
  bool sequence_keys = false;
  int32_t threads = 0;
  uint64_t seed = 0;
  float cfg = 5.0f;
  sparse::PolicyParams policy;  // dense by default; a sparse policy shows its attended set
  // ssd's head classification file to write (empty: none), from the decode
  // keys' locality score (s_decode) or the whole sequence's (s).
  std::string ssd_heads;
  bool ssd_sequence_score = false;
  std::string command;  // argv, recorded in the classification file
};

constexpr char kUsage[] =
    "usage: argen_characterize --model_dir=DIR --prompts=FILE --out=DIR [--max_prompts=N]\n"
    "  [--layer=L --head=H (default 10, 5, clamped)] [--max_distance=32] [--local_fraction=0.1] "
    "[--locality_window=32]\n"
    "  [--threshold=0.45] [--row=cond|uncond] [--keys=decode|sequence] [--threads=0] [--seed=0] [--cfg=5]\n"
    "  [--policy=dense|sliding_window|...|diagonal_sink4 --sparsity=S --n_att=N --n_recent=N --n_sink=N]\n"
    "  [--ssd_heads=FILE [--ssd_score=decode|sequence]]  (ssd's head classification, e.g.\n"
    "   models/<ckpt>/ssd_heads.json: a kv head is semantic when its query heads' mean score >= --threshold)\n";

absl::Status CheckArgs(const Args& args) {
  const Args* a = &args;
  if (a->model_dir.empty() || a->prompts.empty() || a->out.empty()) {
    return absl::InvalidArgumentError("--model_dir, --prompts and --out are required");
  }
  if (a->max_distance < 1) return absl::InvalidArgumentError("--max_distance must be >= 1");
  if (!(a->local_fraction > 0 && a->local_fraction <= 1)) {
    return absl::InvalidArgumentError("--local_fraction must be in (0, 1]");
  }
  if (a->locality_window < 0) return absl::InvalidArgumentError("--locality_window must be >= 0");
  return absl::OkStatus();
}

// CLI11 parses (--name=value or --name value); the checks below are the
// ones CLI11 cannot express. nullopt: run; otherwise the exit code, with the
// help, version or error already printed.
std::optional<int> ParseArgs(int argc, char** argv, Args* a) {
  CLI::App app("argen_characterize: attention statistics and heatmaps of one layer/head over a prompt set.\n" +
                   std::string(kUsage),
               "argen_characterize");
  cli::Configure(app, "argen_characterize");
  app.add_option("--model_dir", a->model_dir, "Checkpoint directory")->required();
  app.add_option("--prompts", a->prompts, "Prompt file, one a line")->required();
  app.add_option("--out", a->out, "Output directory")->required();
  app.add_option("--max_prompts", a->max_prompts, "At most this many prompts (0: all)");
  app.add_option("--layer", a->layer, "Layer of the heatmaps (-1: 10, clamped)");
  app.add_option("--head", a->head, "Head of the heatmaps (-1: 5, clamped)");
  app.add_option("--max_distance", a->max_distance, "Largest key distance of the locality statistics")
      ->check(CLI::PositiveNumber);
  app.add_option("--local_fraction", a->local_fraction, "Mass fraction for locality, in (0, 1]")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--locality_window", a->locality_window, "Window of the locality statistic")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threshold", a->threshold, "Similarity threshold");
  app.add_option("--threads", a->threads, "CPU threads (0: all cores)");
  app.add_option("--seed", a->seed, "Sampling seed");
  app.add_option("--cfg", a->cfg, "Classifier-free guidance weight");
  std::string policy = "dense", row = "cond", keys = "decode";
  app.add_option("--policy", policy, "Sparsity policy whose attended set the statistics show");
  app.add_option("--sparsity", a->policy.sparsity, "Policy sparsity");
  app.add_option("--n_att", a->policy.n_att, "Policy N_att");
  app.add_option("--n_recent", a->policy.n_recent, "Policy N_r");
  app.add_option("--n_sink", a->policy.n_sink, "Policy sinks");
  app.add_option("--row", row, "CFG row to read")->check(CLI::IsMember({"cond", "uncond"}));
  app.add_option("--keys", keys, "Keys: decode tokens only or the whole sequence")
      ->check(CLI::IsMember({"decode", "sequence"}));
  std::string ssd_score = "decode";
  app.add_option("--ssd_heads", a->ssd_heads,
                 "Write ssd's head classification here (e.g. models/<ckpt>/ssd_heads.json: a kv head is "
                 "semantic when its query heads' mean score >= --threshold)");
  app.add_option("--ssd_score", ssd_score, "Score of that classification: over decode keys or the sequence")
      ->check(CLI::IsMember({"decode", "sequence"}));
  if (std::optional<int> rc = cli::Parse(app, argc, argv, std::cout, std::cerr)) return rc;
  absl::StatusOr<sparse::PolicyKind> kind = sparse::ParsePolicyName(policy);
  if (!kind.ok()) {
    std::cerr << "argen_characterize: --policy: " << kind.status().message() << "\n";
    return cli::kUsageExit;
  }
  a->policy.kind = *kind;
  a->uncond = row == "uncond";
  a->sequence_keys = keys == "sequence";
  a->ssd_sequence_score = ssd_score == "sequence";
  if (absl::Status s = CheckArgs(*a); !s.ok()) {
    std::cerr << "argen_characterize: " << s.message() << "\n" << kUsage;
    return cli::kUsageExit;
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<std::string>> ReadPrompts(const std::string& path, int32_t max_prompts) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("prompt file ", path, " cannot be read"));
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(f, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    prompts.push_back(line);
    if (max_prompts > 0 && static_cast<int32_t>(prompts.size()) == max_prompts) break;
  }
  if (prompts.empty()) return absl::InvalidArgumentError(absl::StrCat("prompt file ", path, " has no prompts"));
  return prompts;
}

// Collects one prompt's observations of the selected row into per-head stats.
class Collector {
 public:
  Collector(const Args& args, int32_t layers, int32_t heads, int32_t l_dec)
      : args_(args), layers_(layers), heads_(heads), l_dec_(l_dec) {}

  void Start(int32_t prompt_len) {
    prompt_len_ = prompt_len;
    StatsOptions o;
    o.prompt_len = prompt_len;
    o.max_queries = l_dec_;
    o.max_distance = args_.max_distance;
    o.local_fraction = args_.local_fraction;
    o.locality_window = args_.locality_window;
    o.similarity_keys = args_.sequence_keys ? KeySpace::kSequence : KeySpace::kDecode;
    stats_.clear();
    stats_.reserve(static_cast<size_t>(layers_) * heads_);
    for (int32_t i = 0; i < layers_ * heads_; ++i) stats_.emplace_back(o);
    map_ = std::make_unique<AttentionMap>(prompt_len, l_dec_);
    rows_seen_.clear();
    dense_.assign(prompt_len + l_dec_, 0.0f);
    status_ = absl::OkStatus();
  }

  void Observe(const cpu::AttentionObservation& obs) {
    if (!status_.ok()) return;
    if (obs.step == 0 && obs.layer == 0 && obs.head == 0) rows_seen_.push_back(obs.row);  // cond first
    const size_t want = args_.uncond ? 1 : 0;
    if (rows_seen_.size() <= want || obs.row != rows_seen_[want]) return;
    // Scatter the attended weights into a dense row over prompt + 0..t.
    const int32_t n = prompt_len_ + obs.step + 1;
    std::fill(dense_.begin(), dense_.begin() + n, 0.0f);
    for (int32_t j = 0; j < prompt_len_; ++j) dense_[j] = obs.probs[j];
    for (size_t i = 0; i < obs.decode_positions.size(); ++i) {
      dense_[prompt_len_ + obs.decode_positions[i]] = obs.probs[prompt_len_ + i];
    }
    const std::span<const float> row(dense_.data(), n);
    absl::Status s = stats_[obs.layer * heads_ + obs.head].AddQuery(row);
    if (s.ok() && obs.layer == args_.layer && obs.head == args_.head) s = map_->AddQuery(row);
    if (!s.ok()) {
      status_ = absl::InternalError(
          absl::StrCat("observation layer ", obs.layer, " head ", obs.head, " step ", obs.step, ": ", s.message()));
    }
  }

  const absl::Status& status() const { return status_; }
  const HeadStats& stats(int32_t layer, int32_t head) const { return stats_[layer * heads_ + head]; }
  const AttentionMap& map() const { return *map_; }

 private:
  const Args& args_;
  int32_t layers_, heads_, l_dec_, prompt_len_ = 0;
  std::vector<HeadStats> stats_;
  std::unique_ptr<AttentionMap> map_;
  std::vector<model::RowId> rows_seen_;
  std::vector<float> dense_;
  absl::Status status_;
};

// ssd's classification per (layer, kv head): the mean locality score of the
// kv head's query heads (GQA groups; NaN-skipping), semantic when >= threshold.
absl::Status WriteSsdHeads(const Args& args, const engine::ModelInfo& info, const Aggregate& aggregate,
                           int32_t prompt_count) {
  const int32_t group = info.num_heads / info.num_kv_heads;
  std::vector<double> scores;
  for (int32_t l = 0; l < info.num_layers; ++l) {
    for (int32_t g = 0; g < info.num_kv_heads; ++g) {
      double sum = 0;
      int32_t n = 0;
      for (int32_t h = g * group; h < (g + 1) * group; ++h) {
        const HeadSummary& s = aggregate.head(l, h);
        const double v = args.ssd_sequence_score ? s.locality : s.decode_locality;
        if (std::isfinite(v)) {
          sum += v;
          ++n;
        }
      }
      scores.push_back(n > 0 ? sum / n : std::nan(""));
    }
  }
  const sparse::HeadClasses classes = sparse::ClassifyHeads(info.num_layers, info.num_kv_heads, scores, args.threshold);
  sparse::HeadClassesProvenance prov;
  prov.model = info.name;
  prov.score = args.ssd_sequence_score ? "s (locality score over the whole sequence, tools/characterize)"
                                       : "s_decode (locality score over decode keys, tools/characterize)";
  prov.window = args.locality_window;
  prov.threshold = args.threshold;
  prov.prompts = args.prompts;
  prov.prompt_count = prompt_count;
  prov.command = args.command;
  std::ofstream f(args.ssd_heads, std::ios::binary);
  f << sparse::HeadClassesJson(classes, scores, prov);
  if (!f) return absl::PermissionDeniedError(absl::StrCat("cannot write --ssd_heads ", args.ssd_heads));
  int32_t semantic = 0;
  for (uint8_t c : classes.semantic) semantic += c;
  std::printf("ssd heads: %d of %zu (layer, kv head) pairs semantic (threshold %.2f) -> %s\n", semantic,
              classes.semantic.size(), args.threshold, args.ssd_heads.c_str());
  return absl::OkStatus();
}

absl::Status Run(Args args) {
  absl::StatusOr<std::vector<std::string>> prompts = ReadPrompts(args.prompts, args.max_prompts);
  if (!prompts.ok()) return prompts.status();
  std::error_code ec;
  std::filesystem::create_directories(args.out, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot create --out directory ", args.out, ": ", ec.message()));

  engine::EngineOptions options;
  options.model_dir = args.model_dir;
  options.backend = "cpu";
  options.threads = args.threads;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> engine = model::CreateGenericEngine(options);
  if (!engine.ok()) return engine.status();
  auto* backend = dynamic_cast<cpu::CpuBackend*>(&(*engine)->backend());
  if (backend == nullptr) return absl::InternalError("the engine's backend is not the CPU backend");
  const engine::ModelInfo& info = (*engine)->info();
  if (args.layer < 0) args.layer = std::min(10, info.num_layers - 1);
  if (args.head < 0) args.head = std::min(5, info.num_heads - 1);
  if (args.layer < 0 || args.layer >= info.num_layers || args.head < 0 || args.head >= info.num_heads) {
    return absl::InvalidArgumentError(absl::StrCat("--layer/--head (", args.layer, ", ", args.head,
                                                   ") outside the model's ", info.num_layers, " layers x ",
                                                   info.num_heads, " heads"));
  }

  Collector collector(args, info.num_layers, info.num_heads, info.image_tokens);
  backend->SetAttentionObserver([&](const cpu::AttentionObservation& obs) { collector.Observe(obs); });
  Aggregate aggregate(info.num_layers, info.num_heads, args.max_distance, args.threshold);

  std::vector<runner::Job> jobs;
  for (size_t p = 0; p < prompts->size(); ++p) {
    runner::Job job;
    if (info.num_classes > 0) {
      job.request.class_id = static_cast<int32_t>(p % info.num_classes);  // a class model: prompt p draws class p
    } else {
      job.request.prompt = (*prompts)[p];
    }
    job.request.num_images = 1;
    job.request.sampling.seed = args.seed + p;
    job.request.sampling.cfg_weight = args.cfg;
    job.request.policy = args.policy;
    job.tag = static_cast<int64_t>(p);
    jobs.push_back(std::move(job));
  }
  // One prompt at a time: the collector tells the rows apart by the order of
  // their first observation, which needs a single group in the batch.
  runner::RunOptions run;
  run.max_rows = 2;
  runner::RunHooks hooks;
  int32_t prompt_tokens = 0;
  hooks.on_admitted = [&](const runner::Job&, const engine::PreparedRequest& prepared) {
    prompt_tokens = static_cast<int32_t>(prepared.cond_ids.size());
    collector.Start(prompt_tokens);
    return absl::OkStatus();
  };
  hooks.on_step = [&](const engine::StepReport&) { return collector.status(); };
  hooks.on_finished = [&](runner::FinishedJob job) -> absl::Status {
    for (int32_t l = 0; l < info.num_layers; ++l) {
      for (int32_t h = 0; h < info.num_heads; ++h) aggregate.Add(l, h, collector.stats(l, h));
    }
    const std::string png = absl::StrCat(args.out, "/heatmap_p", job.tag, "_L", args.layer, "_H", args.head, ".png");
    if (absl::Status s = WritePng(collector.map().Heatmap(), png); !s.ok()) return s;
    std::fprintf(stderr, "prompt %lld/%zu done (%d prompt tokens, %d decode queries)\n",
                 static_cast<long long>(job.tag + 1), prompts->size(), prompt_tokens, collector.stats(0, 0).queries());
    return absl::OkStatus();
  };
  if (const runner::RunResult r = runner::RunJobs(**engine, jobs, run, hooks); !r.status.ok()) return r.status;
  backend->SetAttentionObserver(nullptr);

  if (absl::Status s = aggregate.WriteMassCsv(args.out + "/mass.csv"); !s.ok()) return s;
  if (absl::Status s = aggregate.WriteSimilarityCsv(args.out + "/similarity.csv"); !s.ok()) return s;
  if (absl::Status s = aggregate.WriteLocalityCsv(args.out + "/locality.csv"); !s.ok()) return s;
  std::printf("attention mass (mean over layers and heads): prompt %.4f, local %.4f, middle %.4f\n",
              aggregate.MeanMass(-1, 0), aggregate.MeanMass(-1, 1), aggregate.MeanMass(-1, 2));
  // The model's row lag (one token row: Janus 24; Lumina-mGPT w + 1 with its new line) among the distances shown.
  const int32_t row_lag = info.grid.width > 0 ? info.grid.width + info.grid.row_break_tokens : info.token_grid;
  std::vector<int32_t> distances = {1, 2, 4, 8, 16, 24, 32};
  if (std::find(distances.begin(), distances.end(), row_lag) == distances.end()) {
    distances.insert(std::upper_bound(distances.begin(), distances.end(), row_lag), row_lag);
  }
  for (int32_t d : distances) {
    if (d > args.max_distance) break;
    const SimilarityAt s = aggregate.Similarity(-1, d);
    if (!std::isfinite(s.vertical) || !std::isfinite(s.diagonal)) {  // a small grid has no queries d apart
      std::printf("d=%-3d -: no two decode queries this far apart\n", d);
      continue;
    }
    std::printf("d=%-3d vertical %.4f diagonal %.4f%s\n", d, s.vertical, s.diagonal, d == row_lag ? "  (row lag)" : "");
  }
  std::printf("wrote %s/{mass,similarity,locality}.csv and heatmaps\n", args.out.c_str());
  if (!args.ssd_heads.empty()) {
    if (absl::Status s = WriteSsdHeads(args, info, aggregate, static_cast<int32_t>(prompts->size())); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace argen::characterize

int main(int argc, char** argv) {
  argen::characterize::Args args;
  if (std::optional<int> rc = argen::characterize::ParseArgs(argc, argv, &args)) return *rc;
  args.command = "argen_characterize";
  for (int i = 1; i < argc; ++i) args.command.append(" ").append(argv[i]);
  absl::Status s = argen::characterize::Run(args);
  if (!s.ok()) {
    std::fprintf(stderr, "argen_characterize: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
