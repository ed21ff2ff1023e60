// argen_sweep's command line, tokenized by CLI11 with a setter per flag, so
// that every usage error, unknown flags and bad values included, is a
// message naming the flag and exit status 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "tools/sweep/output_format.h"
#include "tools/sweep/sweep_grid.h"

namespace argen::sweep {

struct SweepArgs {
  std::string model;
  std::string prompts = "tools/sweep/benchmark_prompts.jsonl";
  std::string out;
  OutputFormat format = OutputFormat::kDefault;  // --format: the files' layout (output_format.h)
  std::string geneval_prompts;                   // --format geneval: GenEval's evaluation_metadata.jsonl
  std::string dpg_prompts;                       // --format dpg: DPG-Bench's prompts folder
  std::string backend = "cpu";
  int32_t images_per_prompt = 4;
  std::vector<sparse::PolicyKind> policies;  // the kinds of policy_specs, in order
  std::vector<PolicySpec> policy_specs;      // --policies entries ("diagonal:64": its own n_recent)
  std::vector<double> sparsities;            // percent
  std::vector<int32_t> parallel_windows{0};  // --parallel-windows: every configuration at each
  std::vector<int32_t> speculative_windows;  // --speculative-windows: and at each of these > 0
  int32_t n_recent = 0;                      // diagonal policies' recent window N_r (0: the family's default)
  int32_t subsample = 1;                     // every K-th prompt
  int32_t per_category = 0;                  // then at most N of each tag, evenly spread (0: all)
  int32_t max_prompts = 0;                   // then the first N of those (0: all)
  int32_t max_batch_rows = 256;              // rows (2 per image: CFG pair) decoded at once
  int32_t threads = 0;
  int32_t image_threads = 0;    // PNG writer threads (0: hardware threads - 1)
  int32_t png_level = 1;        // zlib level of the PNGs
  int32_t decode_batch = 8;     // finished requests VQ-decoded in one call
  double deadline_seconds = 0;  // admit no request after this many seconds from start (0: none)
  int32_t shard_index = 0;      // --shard i/n: prompts whose file line % n == i
  int32_t shard_count = 1;
  std::string exclude;              // file of "<config> <prompt index>" lines done elsewhere: skipped
  uint64_t seed = 0;                // prompt p uses seed + p; image i its stream i
  engine::SamplingParams sampling;  // seed unused here; the fields given on the command line:
  bool cfg_given = false, temperature_given = false, top_k_given = false, top_p_given = false;
  std::string negative_prompt;    // --negative-prompt: every request's guidance row ("": the family's)
  int32_t width = 0, height = 0;  // --size WxH, one of the model's sizes; 0, 0: its default
  sparse::KvFormat kv_format = sparse::KvFormat::kAuto;            // --kv-cache-dtype: every request's KV storage
  model::WeightFormat weight_format = model::WeightFormat::kAuto;  // --weight-dtype: the layers' projections
  bool resume = false;
  bool skip_invalid = false;  // leave out configurations the model rejects (named) instead of exit 2
  bool help = false;
  bool version = false;
};

// The run's sampling: the model's defaults (engine::ModelInfo::default_sampling,
// which the server and argen_generate use), with the fields given on the
// command line in their place.
engine::SamplingParams EffectiveSampling(const SweepArgs& args, const engine::SamplingParams& model_defaults);

// Usage text printed with --help and after a usage error.
const char* SweepUsage();

// args excludes argv[0]. Accepts --name=value and --name value. With --help or
// --version only that field is meaningful.
absl::StatusOr<SweepArgs> ParseSweepArgs(const std::vector<std::string>& args);

}  // namespace argen::sweep
